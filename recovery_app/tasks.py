"""Celery task deriving what an append committed: identifiers and the search index.

Queued after each append's commit by :func:`recovery_app.receivers.index_appended` (derived rows
are not written in the append transaction). Eager in the embedded
default, so it runs in-process right after the commit; with a broker a worker runs it.
Losing a run costs latency, not results: the search index catches up before every search
(:func:`recovery_app.search.index_sync`) and a fold writes any identifiers row still missing.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from journal_app.models import Journal
from journal_app.privacy import memo_findings
from journal_app.services.append import identifiers_fill
from recovery_app.search import index_sync

#: entries derived per privacy memo (:func:`derive_appended`): an import's batch
WINDOW = 1_000
#: the most characters of text one window's memo holds (an index catching up on entries
#: before the window reads through the same memo: it stays bounded)
MEMO_CHARS = 32_000_000


@shared_task(
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def derive_appended(journal_id: int, first_seq: int, head_seq: int) -> dict[str, Any]:
    """Identifiers rows and search segments of entries ``first_seq..head_seq`` of a journal.

    Args:
        journal_id: primary key of the :class:`~journal_app.models.Journal`.
        first_seq, head_seq: the seq range the append batch wrote.

    Returns:
        ``{"identifiers": rows written, "indexed_seq": the journal's indexed seq}``, or
        ``{"journal_id": id, "reason": "journal gone"}``.

    Idempotent: both writers skip what exists. Retries transient database errors only.
    """
    journal = Journal.objects.filter(pk=journal_id).first()
    if journal is None:
        return {"journal_id": journal_id, "reason": "journal gone"}
    # window by window, the identifiers then the index of the same entries with one privacy
    # memo: a message's or a tool output's text is scanned for secrets once, not once each
    # (the memo holds one window's texts: memory stays flat)
    written = 0
    for low in range(first_seq, head_seq + 1, WINDOW):
        high = min(head_seq, low + WINDOW - 1)
        find = memo_findings(MEMO_CHARS)
        written += identifiers_fill(journal=journal, first_seq=low, last_seq=high, findings=find)
        index_sync(journal=journal, upto=high, findings=find)
    return {"identifiers": written, "indexed_seq": index_sync(journal=journal, upto=head_seq)}
