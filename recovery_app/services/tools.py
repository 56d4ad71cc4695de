"""The agent's tools: search, read, analyst (docs/design.md section 7, "Agent tools").

Scope is never a parameter: it is the caller's journal (from its credentials and session).
Pagination cursors are HMAC-signed (scope, revision, query, position, expiry); reads are
re-verified by hash and filtered by :mod:`journal_app.privacy`, saying ``filtered`` and why.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from journal_app.models import Entry, Journal
from journal_app.privacy import (
    REASONING_MARK,
    SECRET_MARK,
    Filtered,
    filter_content,
    filter_text,
)
from recovery_app.analyst import AnalystModel
from recovery_app.budget import Budget
from recovery_app.cursors import Cursor, cursor_open, cursor_sign, derive_key
from recovery_app.errors import EntryNotFound, RecoveryError
from recovery_app.lexical import Query, QueryInvalid, parse_query, snippet
from recovery_app.models import Receipt
from recovery_app.query_plan import plan_queries
from recovery_app.search import Lead, backend
from recovery_app.services.attempt import recovery_run
from recovery_app.services.reads import entry_reread, journal_reload, read_verify, snapshot_freeze


def _cursor_key() -> bytes:
    return derive_key(settings.SECRET_KEY)


@dataclass
class SearchPage:
    """One page of search results (leads) at a frozen revision."""

    query: str
    revision: int
    hits: list[dict[str, Any]]
    next_cursor: str | None


def recovery_search(
    *,
    journal: Journal,
    query: str,
    cursor: str | None = None,
    limit: int | None = None,
    now: float | None = None,
) -> SearchPage:
    """Search the caller's journal: leads with filtered snippets, paginated by signed cursors.

    Args:
        journal: the caller's journal (scope from credentials and session, never a parameter).
        query: terms (see :func:`recovery_app.lexical.parse_query`).
        cursor: from a previous page: the revision stays frozen and the page continues.
        limit: results per page (default ``RECOVERY_PAGE_SIZE``, 10; at most 50).
        now: Unix seconds (default: the clock).

    Returns:
        :class:`SearchPage`: hits ``{"seq", "entry", "kind", "role", "tool_name",
        "snippet", "filtered", "filter_labels"}`` in seq order; ``next_cursor`` when more.

    Raises:
        QueryInvalid: nothing searchable, too long, too many terms.
        CursorRefused: tampered, expired, another scope, another query.
    """
    now = time.time() if now is None else now
    journal = journal_reload(journal)
    q = parse_query(query)
    size = max(1, min(int(limit or settings.RECOVERY_PAGE_SIZE), 50))
    if cursor:
        c = cursor_open(_cursor_key(), cursor, scope=journal.scope_label, query=q.text, now=now)
        revision, after = c.revision, c.position
    else:
        revision, after = journal.head_seq, 0
    snapshot = snapshot_freeze(journal=journal, revision=revision)
    leads = backend().search(
        journal_id=journal.pk, revision=snapshot.revision, query=q, after=after, limit=size + 1
    )
    page = leads[:size]
    hits = _hits(page, q)
    next_cursor = None
    if len(leads) > size:
        ttl = int(settings.RECOVERY_CURSOR_TTL_SECONDS)
        next_cursor = cursor_sign(
            _cursor_key(),
            Cursor(journal.scope_label, snapshot.revision, q.text, page[-1].seq, int(now) + ttl),
        )
    return SearchPage(q.text, snapshot.revision, hits, next_cursor)


def _mark(label: str) -> str:
    """The mark :mod:`journal_app.privacy` leaves for a label (``secret: kind``, ``reasoning``)."""
    return (
        REASONING_MARK
        if label == "reasoning"
        else SECRET_MARK.format(kind=label.removeprefix("secret: "))
    )


def _hits(leads: Sequence[Lead], q: Query) -> list[dict[str, Any]]:
    rows = {e.pk: e for e in Entry.objects.filter(pk__in=[lead.entry_id for lead in leads])}
    out = []
    for lead in leads:
        e = rows[lead.entry_id]
        # filter the whole text first: a snippet window could cut a secret so that its
        # pattern no longer matches and part of it shows; the snippet then says which of
        # the whole text's filters it shows
        full = filter_text(e.text, kind=e.kind)
        text = snippet(q, full.text)
        labels = [x for x in full.labels if _mark(x) in text]
        f = Filtered(text, bool(labels), labels, [])
        out.append(
            {
                "seq": e.seq,
                "entry": "sha256:" + e.entry_hash,
                "kind": e.kind,
                "role": e.role,
                "tool_name": e.tool_name,
                "snippet": f.text,
                "filtered": f.filtered,
                "filter_labels": f.labels,
            }
        )
    return out


@dataclass
class ReadResult:
    """An entry re-read in full, verified, and filtered for the caller; the read API answers
    it as is (``recovery_app.schemas.ReadOut`` is derived from these fields)."""

    revision: int
    seq: int
    entry: str
    kind: str
    role: str
    tool_call_id: str
    tool_name: str
    verified: bool
    checks: dict[str, bool]
    reason: str
    content: dict[str, Any] | None
    text: str | None
    filtered: bool
    filter_labels: list[str]
    byte_length: int
    body_hash: str
    chunks: list[dict[str, Any]]
    #: ``[start, end)`` in characters of the entry's text when a range was asked for
    #: (``text`` then holds that range only, ``content`` is left out)
    range: list[int] | None = None
    #: ``sha256:<hex>`` of the range's UTF-8 bytes before filtering (a pin attachment's
    #: receipt names the same hash, docs/design.md 5.2)
    range_sha256: str | None = None


def recovery_read(
    *,
    journal: Journal,
    seq: int | None = None,
    entry: str | None = None,
    text_range: tuple[int, int] | None = None,
) -> ReadResult:
    """Read one entry of the caller's journal in full, verify it, and filter it.

    The entry is re-read with every chunk and checked against a snapshot of the caller's
    journal at its head (scope, seq, raw, entry hash, body hash, byte length, metadata hash,
    every chunk). Content is returned only when every check passes; a summary or compaction
    marker returns nothing (``verified`` false, with the reason). Secrets and hidden
    reasoning are filtered out and the result says ``filtered`` with labels.

    Args:
        journal: the caller's journal.
        seq / entry: which entry (``entry`` is ``sha256:<hex>`` or hex); exactly one.
        text_range: ``(start, end)``, characters of the entry's text (``end`` excluded):
            only that range is returned as ``text`` (no ``content``), with ``range`` and
            ``range_sha256`` (of the range's UTF-8 bytes, before filtering). A pinned
            message's attachment receipt names its range and hash (docs/design.md 5.2).

    Raises:
        EntryNotFound: no such entry in the caller's journal (other scopes' entries do not
            exist for the caller).
        RecoveryError: neither or both of ``seq`` and ``entry``; a range that is empty or
            not inside the entry's text.
    """
    if (seq is None) == (entry is None):
        raise RecoveryError("give exactly one of seq and entry")
    if text_range is not None and not 0 <= text_range[0] < text_range[1]:
        raise RecoveryError(f"range {list(text_range)} is not [start, end) with start < end")
    journal = journal_reload(journal)
    snapshot = snapshot_freeze(journal=journal)
    qs = Entry.objects.filter(journal=journal, seq__lte=snapshot.revision)
    if seq is not None:
        row = qs.filter(seq=seq).values_list("id", "seq", "entry_hash").first()
        what = f"seq {seq}"
    else:
        hex_ = str(entry).strip().lower().removeprefix("sha256:")
        row = qs.filter(entry_hash=hex_).values_list("id", "seq", "entry_hash").first()
        what = f"entry {entry}"
    if row is None:
        raise EntryNotFound(
            f"{what} is not in {journal.scope_label} at revision {snapshot.revision}"
        )
    found = entry_reread(row[0])
    if found is None:
        raise EntryNotFound(f"{what} is not in {journal.scope_label}")
    r = read_verify(snapshot, found, lead_seq=row[1], lead_hash=row[2])
    content: dict[str, Any] | None = None
    text: str | None = None
    labels: list[str] = []
    sliced: str | None = None
    if text_range is not None:
        if text_range[1] > len(found.text):
            raise RecoveryError(
                f"range {list(text_range)} is not inside {what}'s text of "
                f"{len(found.text)} characters"
            )
        sliced = found.text[text_range[0] : text_range[1]]
    if r.check.ok and sliced is not None:
        f = filter_text(sliced, kind=found.kind)
        text, labels = f.text, list(f.labels)
    elif r.check.ok:
        content, labels = filter_content(found.kind, found.content)
        f = filter_text(found.text, kind=found.kind)
        text = f.text
        labels += [x for x in f.labels if x not in labels]
    return ReadResult(
        revision=snapshot.revision,
        seq=found.seq,
        entry="sha256:" + found.entry_hash,
        kind=found.kind,
        role=found.role,
        tool_call_id=found.tool_call_id,
        tool_name=found.tool_name,
        verified=r.check.ok,
        checks=r.check.checks,
        reason=r.check.reason,
        content=content,
        text=text,
        filtered=bool(labels),
        filter_labels=labels,
        byte_length=found.byte_length,
        body_hash="sha256:" + found.body_hash,
        chunks=[
            {
                "position": c.position,
                "offset": c.offset,
                "length": c.length,
                "hash": "sha256:" + c.hash,
            }
            for c in found.chunks.all()
        ],
        range=list(text_range) if text_range is not None else None,
        range_sha256=(
            "sha256:" + hashlib.sha256(sliced.encode("utf-8")).hexdigest()
            if sliced is not None
            else None
        ),
    )


def recovery_analyst(
    *,
    journal: Journal,
    question: str,
    model: AnalystModel | None | str = "auto",
    budget: Budget | None = None,
    clock: Callable[[], float] | None = None,
) -> Receipt:
    """The agent's bounded analyst: plan lexical queries, read, return checked claims.

    Same attempt as :func:`recovery_run` (budget, snapshot of the caller's journal at its
    head, hash-verified reads) driven by ``question`` instead of the trigger scan. Claims
    are in ``receipt.claims`` (``current``/``historical``/``reported``/``unresolved``, exact
    quotes with byte ranges); rejected ones, with the reason, in ``receipt.rejected_claims``.

    Raises:
        QueryInvalid: the question has nothing searchable.
    """
    if not any(plan_queries(question)):
        raise QueryInvalid(f"question {question!r} has nothing to search for")
    return recovery_run(journal=journal, question=question, model=model, budget=budget, clock=clock)
