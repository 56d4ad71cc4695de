"""Placing a history in a session's branches: the plan of :mod:`proxy_app.matching` applied.

* :func:`place_in_branches`: against the candidate branches, the history's new suffix is
  appended to the branch sharing the longest prefix, nothing is written when it is all
  stored, and a history that diverges opens a new branch holding the shared prefix then the
  new suffix (``metadata["branched_from"]`` on its first new entry);
* :class:`Recorded`: where a history landed;
* :func:`stored_entries`, :func:`stored_keys`, :func:`entry_as_item`: a branch's rows, their
  match keys, a row as an item again (to copy into a new branch).

Writes through :func:`journal_app.services.journal_append` only; the caller holds the
session's lock (:func:`proxy_app.services.locks.session_lock`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from journal_app.formats.base import ParsedEntry
from journal_app.models import Entry, Journal, Session
from journal_app.services import (
    journal_append,
    journal_ensure,
)
from proxy_app.matching import (
    MatchKey,
    match_key,
    parsed_key,
    plan_placement,
)


def stored_entries(journal: Journal) -> list[Entry]:
    """Every entry of the branch, in seq order (a whole placement reads them all)."""
    return list(Entry.objects.filter(journal=journal).order_by("seq"))


def stored_keys(rows: Sequence[Entry], every: bool) -> list[MatchKey | None]:
    """The match key of each stored row (:func:`proxy_app.matching.match_key`; ``None`` for
    a row that is not matched: an interrupted answer, and events or reasoning unless
    ``every``)."""
    return [
        match_key(
            kind=e.kind,
            role=e.role,
            tool_call_id=e.tool_call_id,
            content=e.content,
            metadata=e.meta_dict,
            every=every,
        )
        for e in rows
    ]


def entry_as_item(e: Entry) -> ParsedEntry:
    """A stored entry as an item again, to copy it into a new branch unchanged."""
    meta = e.meta_dict
    usage = meta.pop("usage", None)
    source_ref = meta.pop("source_ref", e.source_ref)
    return ParsedEntry(
        kind=e.kind,
        role=e.role,
        content=e.content,
        tool_call_id=e.tool_call_id,
        tool_name=e.tool_name,
        derived=e.derived,
        metadata=meta,
        usage=usage if isinstance(usage, dict) else None,
        source_ref=source_ref,
        token_figure=(e.token_count, e.token_source)
        if e.token_source.startswith("provider:")
        else None,
    )


def _new_branch_name(session: Session, lane: str) -> str:
    taken = set(Journal.objects.filter(session=session, lane=lane).values_list("branch", flat=True))
    n = 2
    while f"b{n}" in taken:
        n += 1
    return f"b{n}"


@dataclass
class Recorded:
    """Where a history landed.

    Attributes:
        journal: the branch that holds it (a new one when it diverged).
        revision: the seq of its last entry in that branch.
        appended: entries written by this call (0 for a history already journaled).
        branched_from: ``"<branch>@<seq>"`` when a new branch was opened, else ``None``.
        entry_hash: the entry hash at ``revision`` (it commits to the branch up to there;
            ``""`` when the branch is empty).
        known_messages, known_tokens: placed through the prefix index, how many of the
            request's messages were found stored and their tokens as
            :func:`proxy_app.services.sent_request.request_tokens` counts them (``-1``: not
            counted yet).
        index_key: the prefix index entry that records this request (``""``: none).
    """

    journal: Journal
    revision: int
    appended: int
    branched_from: str | None = None
    entry_hash: str = ""
    known_messages: int = 0
    known_tokens: int = -1
    index_key: str = ""


def place_in_branches(
    candidates: Sequence[Journal], items: Sequence[ParsedEntry], every: bool = False
) -> Recorded:
    """Place a whole history against the candidate branches (the caller holds the session's
    lock).

    The branch whose stored entries share the longest prefix with ``items`` wins (the first
    candidate on a tie): nothing is written when the history is all stored there, its new
    suffix is appended when it extends the branch, and when it diverges a new branch
    (``b2``, ``b3``, ...) is opened holding the shared prefix, then the suffix, whose first
    entry carries ``metadata["branched_from"]`` (branch, seq and entry hash of the fork).

    Returns:
        :class:`Recorded`: where the history landed.
    """
    item_keys = [parsed_key(i, every=every) for i in items]
    best: tuple[int, Journal, list[Entry], Any] | None = None
    for journal in candidates:
        rows = stored_entries(journal)
        plan = plan_placement(stored_keys(rows, every), item_keys)
        if best is None or plan.matched > best[0]:
            best = (plan.matched, journal, rows, plan)
    assert best is not None
    _, journal, rows, plan = best
    if plan.action == "none":
        last = rows[plan.stored_end - 1] if plan.stored_end else None
        return Recorded(
            journal, last.seq if last else 0, 0, entry_hash=last.entry_hash if last else ""
        )
    if plan.action == "append":
        return append_suffix(journal, list(items[plan.start :]))
    # diverged: a new branch holding the shared prefix, then the new suffix
    fork_seq = rows[plan.stored_end - 1].seq if plan.stored_end else 0
    new = journal_ensure(
        session=journal.session,
        lane=journal.lane,
        branch=_new_branch_name(journal.session, journal.lane),
    )
    suffix = list(items[plan.start :])
    origin = {"branch": journal.branch, "seq": fork_seq}
    if plan.stored_end:
        origin["entry"] = "sha256:" + rows[plan.stored_end - 1].entry_hash
    first = suffix[0]
    suffix[0] = replace(first, metadata={**first.metadata, "branched_from": origin})
    copied = [entry_as_item(e) for e in rows[: plan.stored_end]]
    result = journal_append(journal=new, items=[*copied, *suffix], start_seq=1)
    return Recorded(
        new, result.head_seq, result.appended, f"{journal.branch}@{fork_seq}", new.head_hash
    )


def append_suffix(journal: Journal, fresh: list[ParsedEntry]) -> Recorded:
    """Append a history's new suffix after the branch's head (nothing when it is empty)."""
    if fresh:
        journal_append(journal=journal, items=fresh, start_seq=journal.head_seq + 1)
    return Recorded(journal, journal.head_seq, len(fresh), entry_hash=journal.head_hash)
