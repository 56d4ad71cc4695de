"""Comments on ledger facts: the ledger says whether the fact exists, the audit app stores.

Issue 6 (item 4); docs/design.md section 8. A comment is written, and logged, by
:func:`audit_app.services.comment_add`; this module adds the one check only the ledger can
make (some fold of the journal holds the fact id), so the audit app never reads the ledger.
"""

from __future__ import annotations

from typing import Any

from audit_app.models import Comment
from audit_app.services import CommentInvalid, comment_add
from journal_app.models import Journal
from ledger_app.models import LedgerFact

__all__ = ["comment_on_fact", "fact_exists"]


def fact_exists(journal: Journal, fact_id: str) -> bool:
    """Whether the latest fold of ``journal`` that mentions ``fact_id`` holds it as a fact.

    A comment may outlive the fact's active life: a retired fact is still in the state.
    """
    return LedgerFact.objects.filter(journal=journal, fact_id=fact_id).exists()


def comment_on_fact(*, journal: Journal, fact_id: str, author: Any, text: str) -> Comment:
    """Add a comment to the ledger fact ``fact_id`` of ``journal`` and log it (``comment.add``).

    The fact must exist in some fold of the journal (:func:`fact_exists`).

    Raises:
        CommentInvalid: empty text, too long, or no fold of the journal holds ``fact_id``.
    """
    fact_id = (fact_id or "").strip()
    if not (text or "").strip():
        raise CommentInvalid("a comment needs text")
    if not fact_id or not fact_exists(journal, fact_id):
        raise CommentInvalid(f"no fact {fact_id!r} in the ledger of {journal.scope_label}")
    return comment_add(journal=journal, author=author, text=text, fact_id=fact_id)
