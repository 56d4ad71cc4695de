"""Reads of a journal's entries for the pages: the timeline's page of entries and its API
rounds, the filter expression as SQL, times, token buckets, neighbours, entries by hash.

Each read names its query count; none reads more rows than the page shows, plus a bounded
window (:data:`ROUND_WINDOW`), whatever the journal's size. The caller has resolved the
journal through the tenant filter (:mod:`journal_app.selectors.access`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F, Max, Q, Sum, Value

from journal_app.models import Entry, Journal
from journal_app.rounds import Round, group_rounds
from journal_app.times import entry_time


def journal_start(journal: Journal) -> datetime | None:
    """The source's time of the journal's first timed entry (looks at the first 20 entries),
    the origin of the timeline's relative times; ``None`` when the source has no times."""
    for meta in (
        Entry.objects.filter(journal=journal).order_by("seq").values_list("meta", flat=True)[:20]
    ):
        at = entry_time(json.loads(meta or "{}"))
        if at is not None:
            return at
    return None


def entry_started(meta: dict[str, Any]) -> datetime | None:
    """When the work an entry records began: the earliest of its own time
    (:func:`entry_time`) and the time of the ``turn_context`` attached to it. Codex writes a
    ``turn_context`` record before every model call and the call's items (reasoning, tool
    call, output) afterwards under one timestamp; the importer attaches that record to the
    call's first entry (:mod:`journal_app.formats.codex`), so it dates the round's start.
    ``None`` when neither is known."""
    times = [entry_time(meta)]
    context = meta.get("turn_context")
    if isinstance(context, dict):
        times.append(entry_time(context))
    known = [t for t in times if t is not None]
    return min(known) if known else None


def token_buckets(journal: Journal, buckets: int = 300) -> list[tuple[int, int]]:
    """``(last_seq, tokens)`` for about ``buckets`` equal seq ranges of the journal.

    One grouped query; the database sums ``token_count`` per range, so a journal of
    100,000 entries still sends a few hundred rows.
    """
    size = max(1, -(-journal.head_seq // buckets))
    rows = (
        Entry.objects.filter(journal=journal)
        .annotate(bucket=(F("seq") - 1) / Value(size))
        .values("bucket")
        .annotate(last=Max("seq"), tokens=Sum("token_count"))
        .order_by("bucket")
        .values_list("last", "tokens")
    )
    return [(int(last), int(tokens or 0)) for last, tokens in rows]


def entry_filter(query: Any) -> Q:
    """A database filter for a parsed entry expression (:func:`journal_app.filters.parse_entries`).

    ``text`` searches the raw body (canonical JSON text) case-insensitively, ``tool`` and
    ``call`` the tool name and call id, ``hash`` the entry hash prefix.
    """
    out = Q()
    for t in query.terms:
        if t.field in ("kind", "role"):
            cond = Q(**{f"{t.field}__in": list(t.values)})
        elif t.field == "text":
            cond = Q(body__icontains=t.values[0])
        elif t.field == "tool":
            cond = Q(tool_name__icontains=t.values[0])
        elif t.field == "call":
            cond = Q(tool_call_id__icontains=t.values[0])
        elif t.field in ("error", "derived"):
            cond = Q(**{"is_error" if t.field == "error" else "derived": t.values[0]})
        elif t.field == "hash":
            cond = Q()
            for prefix in t.values:
                cond |= Q(entry_hash__startswith=prefix)
        elif t.field in ("seq", "tokens"):
            column = "seq" if t.field == "seq" else "token_count"
            if t.op == "range":
                cond = Q(**{f"{column}__gte": t.values[0], f"{column}__lte": t.values[1]})
            else:
                lookup = {"eq": "exact", "lt": "lt", "le": "lte", "gt": "gt", "ge": "gte"}[t.op]
                cond = Q(**{f"{column}__{lookup}": t.values[0]})
        else:
            raise ValueError(f"no entry filter for field {t.field!r}")
        out &= ~cond if t.negate else cond
    return out


def neighbour_hashes(entry: Entry) -> tuple[str | None, str | None]:
    """``(previous, next)`` entry hashes in the entry's journal (``None`` at either end)."""
    rows = dict(
        Entry.objects.filter(
            journal_id=entry.journal_id, seq__in=[entry.seq - 1, entry.seq + 1]
        ).values_list("seq", "entry_hash")
    )
    return rows.get(entry.seq - 1), rows.get(entry.seq + 1)


def paired_entries(entry: Entry) -> list[tuple[int, str, str]]:
    """The other side of a tool call's pairing, ``[(seq, entry hash, kind)]`` in seq order:
    the call of a ``tool_result`` (same ``tool_call_id``), the results of a ``tool_call``;
    ``[]`` for other entries or when there is none (an interrupted call). One query."""
    other = {"tool_call": "tool_result", "tool_result": "tool_call"}.get(entry.kind)
    if other is None or not entry.tool_call_id:
        return []
    rows = (
        Entry.objects.filter(
            journal_id=entry.journal_id, kind=other, tool_call_id=entry.tool_call_id
        )
        .order_by("seq")
        .values_list("seq", "entry_hash", "kind")
    )
    return [(seq, entry_hash, kind) for seq, entry_hash, kind in rows[:20]]


@dataclass(frozen=True)
class _Row:
    seq: int
    kind: str
    role: str
    tool_call_id: str


#: how far the timeline looks before and after a page to find its rounds' edges (entries)
ROUND_WINDOW = 500


def page_rounds(journal: Journal, first_seq: int, last_seq: int) -> list[Round]:
    """The API rounds holding entries ``first_seq``..``last_seq``, grouped from a window.

    Grouping the whole journal costs a read of every row (100,000 rows for a long run); a
    page needs only its neighbourhood. The window starts at the last authoritative message
    at or before the page (it always opens a round, docs/design.md 4), at most
    :data:`ROUND_WINDOW` entries back, and ends :data:`ROUND_WINDOW` entries after the page
    (or at the head), so a call whose result sits on the next page is not "interrupted".
    Two queries, at most ``100 + 2 * ROUND_WINDOW`` small rows, whatever the journal's size.
    ``Round.index`` counts within the window; ``at_tail`` holds only when the window
    reaches the head. A round longer than the window may be split at its edge.
    """
    anchor = (
        Entry.objects.filter(
            journal=journal,
            kind="message",
            role__in=("system", "developer", "user"),
            seq__lte=first_seq,
            seq__gte=max(1, first_seq - ROUND_WINDOW),
        )
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    start = anchor or max(1, first_seq - ROUND_WINDOW)
    end = last_seq + ROUND_WINDOW
    rows = (
        Entry.objects.filter(journal=journal, seq__gte=start, seq__lte=end)
        .order_by("seq")
        .values_list("seq", "kind", "role", "tool_call_id")
    )
    rounds = group_rounds(_Row(*r) for r in rows)
    if rounds and rounds[-1].last_seq < journal.head_seq:
        rounds[-1].at_tail = False
    return rounds_for_seqs(rounds, range(first_seq, last_seq + 1))


class JournalEntries:
    """A journal's entries as a sequence for :class:`django.core.paginator.Paginator`.

    seq is gapless from 1 (docs/design.md 4), so the count is the head and a page is a seq range
    read through the ``(journal, seq)`` index: page 500 of a 100,000-entry journal costs the
    same as page 1 (no ``COUNT(*)``, no ``OFFSET`` scan).
    """

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def count(self) -> int:
        return self.journal.head_seq

    def __len__(self) -> int:
        return self.journal.head_seq

    def __getitem__(self, index: slice) -> list[Entry]:
        if not isinstance(index, slice):
            raise TypeError("JournalEntries supports slices only")
        start, stop = index.start or 0, index.stop or self.journal.head_seq
        return list(
            Entry.objects.filter(journal=self.journal, seq__gt=start, seq__lte=stop)
            .select_related("artifact__tenant")
            .order_by("seq")
        )


def unanswered_calls(journal: Journal, call_ids: Sequence[str]) -> set[str]:
    """The tool call ids among ``call_ids`` that have no result in the journal (one query)."""
    if not call_ids:
        return set()
    answered = set(
        Entry.objects.filter(
            journal=journal, kind="tool_result", tool_call_id__in=set(call_ids)
        ).values_list("tool_call_id", flat=True)
    )
    return set(call_ids) - answered


def rounds_for_seqs(rounds: Sequence[Round], seqs: Sequence[int]) -> list[Round]:
    """The rounds holding at least one of ``seqs``, in round order."""
    wanted = set(seqs)
    return [r for r in rounds if wanted.intersection(r.seqs)]


def entries_by_hash(journal: Journal, hashes: Sequence[str]) -> dict[str, Entry]:
    """Entries of ``journal`` among ``hashes`` (hex), keyed by hash; one query, no bodies.

    The query names only the hashes (each a unique-index lookup) and the journal is checked
    on the rows: ``entry_hash`` is unique across journals, so that is the same answer, and
    the planner cannot pick the ``journal_id`` index instead (with stale statistics after a
    bulk load it did: a heap scan of the journal's every entry, 100 ms at 100,000 entries,
    for the 100 support links of a facts page).
    """
    if not hashes:
        return {}
    rows = Entry.objects.filter(entry_hash__in=set(hashes)).only(
        "entry_hash", "seq", "kind", "role", "derived", "journal_id"
    )
    return {e.entry_hash: e for e in rows if e.journal_id == journal.pk}
