"""The prefix index: where a request's first messages were placed, so that a resent
history is placed by reading only the stored entries after them.

Records live in Django's cache (per session, lane and branch header, newest first, at most
:data:`PREFIX_RECORDS`); each names the entry hash at its seq and is used only while the
branch still holds that hash (the journal is a hash chain), so a stale or lost record costs
a whole placement (:func:`proxy_app.services.placement.place_in_branches`), never a wrong one.

* :func:`place_indexed`: place a history by its new suffix through the index;
* :func:`index_add`: record where a request's messages landed;
* :func:`index_tokens`: store the request's token count with its newest record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass, replace
from typing import Any

from django.core.cache import cache

from journal_app.formats.base import ParsedEntry
from journal_app.models import Entry, Journal, Session
from proxy_app.matching import (
    parsed_key,
    plan_placement,
)
from proxy_app.prefix import prefix_digest
from proxy_app.reading import request_digest
from proxy_app.services.placement import (
    Recorded,
    append_suffix,
    stored_keys,
)

#: records the prefix index keeps per session, lane and branch header (newest first)
PREFIX_RECORDS = 16
#: stored entries after an indexed prefix that a placement reads at most (more: placed whole)
PREFIX_TAIL_LIMIT = 200
#: message counts the index tries per call (longest first)
PREFIX_TRIES = 3
#: how long an unused session's records stay in the cache
PREFIX_INDEX_SECONDS = 24 * 3600


@dataclass(frozen=True)
class PrefixRecord:
    """Where the first ``messages`` messages of a request were placed.

    Attributes:
        messages: how many messages (of :func:`proxy_app.prefix.request_messages`).
        digest: :func:`proxy_app.prefix.prefix_digest` of them.
        journal: the branch's primary key.
        seq: the seq of the last entry they were placed as.
        entry_hash: the entry hash at ``seq``, which commits to the whole branch up to it
            (the journal is a hash chain): a record is used only while it still matches.
        items: how many journal items those messages are (:func:`proxy_app.matching.request_items`).
        tokens: their tokens as :func:`proxy_app.services.sent_request.request_tokens`
            counts each message (``-1``: not counted yet), so a call counts only its new
            messages.
    """

    messages: int
    digest: str
    journal: int
    seq: int
    entry_hash: str
    items: int
    tokens: int = -1


@dataclass
class RequestPrefix:
    """A request's message list as sent (:func:`proxy_app.prefix.request_messages`)."""

    head: Any
    messages: list[Any]

    def digest(self, m: int) -> str:
        """:func:`proxy_app.prefix.prefix_digest` of the first ``m`` messages, extended from
        the sha256 state this request's reading kept (:func:`proxy_app.reading.request_digest`:
        only the messages after the previous request's are encoded), else computed whole."""
        kept = request_digest(self.head, self.messages, m)
        return kept if kept is not None else prefix_digest(self.head, self.messages, m)


def _index_key(session: Session, lane: str, branch: str | None) -> str:
    return f"ledgerkeep:proxy-prefix:{session.pk}:{session.key}:{lane}:{branch or ''}"


def _index_plan(
    session: Session,
    lane: str,
    branch: str | None,
    record: PrefixRecord,
    items: Sequence[ParsedEntry],
    every: bool,
) -> tuple[Journal, list[Entry], Any] | None:
    """The placement of ``items[record.items:]`` after ``record``'s seq, or ``None`` when
    the record no longer holds (another branch, another hash at its seq, a long tail)."""
    rows = list(
        Entry.objects.filter(
            journal_id=record.journal,
            journal__session=session,
            journal__lane=lane,
            seq__gte=record.seq,
        )
        .select_related("journal__session__tenant")
        .order_by("seq")[: PREFIX_TAIL_LIMIT + 1]
    )
    if not rows or len(rows) > PREFIX_TAIL_LIMIT or rows[0].seq != record.seq:
        return None
    if rows[0].entry_hash != record.entry_hash:
        return None
    journal = rows[0].journal
    if branch is not None and journal.branch != branch:
        return None
    tail = rows[1:]
    suffix = [parsed_key(i, every=every) for i in items[record.items :]]
    return journal, rows, plan_placement(stored_keys(tail, every), suffix)


def place_indexed(
    session: Session,
    lane: str,
    branch: str | None,
    request: RequestPrefix,
    items: Sequence[ParsedEntry],
    every: bool,
) -> Recorded | None:
    """Place a resent history by its new suffix only, through the prefix index.

    The longest recorded message count whose digest the request's messages still give is
    looked up (at most :data:`PREFIX_TRIES` counts); each record of it that still holds
    (:func:`_index_plan`) is planned against the suffix, the one matching the most wins
    (the oldest branch on a tie, as :func:`proxy_app.services.placement.place_in_branches`
    decides). Only the stored entries after the prefix are read and only the suffix is keyed.

    Returns:
        Where the history landed, or ``None`` when the index has no usable record or the
        suffix diverges from the stored tail (then the history is placed whole by
        :func:`proxy_app.services.placement.place_in_branches`, which opens the new branch).
    """
    fields = len(PrefixRecord.__dataclass_fields__)
    stored = cache.get(_index_key(session, lane, branch)) or []
    records = [PrefixRecord(*r) for r in stored if len(r) == fields]
    counts = sorted(
        {
            r.messages
            for r in records
            if r.messages <= len(request.messages) and r.items <= len(items)
        },
        reverse=True,
    )
    for m in counts[:PREFIX_TRIES]:
        digest = request.digest(m)
        hits = sorted(
            (r for r in records if r.messages == m and r.digest == digest), key=lambda r: r.journal
        )
        best: tuple[int, PrefixRecord, Journal, list[Entry], Any] | None = None
        for record in hits:
            planned = _index_plan(session, lane, branch, record, items, every)
            if planned is None:
                continue
            journal, rows, plan = planned
            if best is None or plan.matched > best[0]:
                best = (plan.matched, record, journal, rows, plan)
        if best is None:
            continue
        _, record, journal, rows, plan = best
        if plan.action == "branch":
            return None
        if plan.action == "none":
            last = rows[plan.stored_end]  # rows[0] is the record's own entry
            placed = Recorded(journal, last.seq, 0, entry_hash=last.entry_hash)
        else:
            placed = append_suffix(journal, list(items[record.items + plan.start :]))
        return replace(placed, known_messages=m, known_tokens=record.tokens)
    return None


def index_add(
    session: Session,
    lane: str,
    branch: str | None,
    request: RequestPrefix,
    items: Sequence[ParsedEntry],
    recorded: Recorded,
) -> None:
    """Remember where this request's messages landed (newest first, deduplicated)."""
    if not recorded.revision or not recorded.entry_hash:
        return
    record = PrefixRecord(
        len(request.messages),
        request.digest(len(request.messages)),
        recorded.journal.pk,
        recorded.revision,
        recorded.entry_hash,
        len(items),
    )
    key = _index_key(session, lane, branch)
    row = astuple(record)
    kept = [row, *(r for r in cache.get(key) or [] if tuple(r)[:-1] != row[:-1])]
    cache.set(key, kept[:PREFIX_RECORDS], timeout=PREFIX_INDEX_SECONDS)
    recorded.index_key = key


def index_tokens(recorded: Recorded, tokens: int) -> None:
    """Store the token count of the request the newest record of ``recorded``'s index
    entry describes (:func:`index_add` wrote it first)."""
    rows = cache.get(recorded.index_key) if recorded.index_key else None
    if rows and tuple(rows[0])[-1] != tokens:
        rows[0] = (*tuple(rows[0])[:-1], tokens)
        cache.set(recorded.index_key, rows, timeout=PREFIX_INDEX_SECONDS)
