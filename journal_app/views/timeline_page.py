"""The timeline of one journal scope: entries 100 per page, grouped by API round.

The page itself is the audit app's (:func:`audit_app.views.timeline`), which adds the
comment counts it owns; this module builds everything else (:func:`timeline_context`),
jumps to a seq (:func:`timeline_jump`) and renders (:func:`timeline_render`). Previews are
shown filtered by :mod:`journal_app.privacy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from journal_app import privacy, selectors
from journal_app.content import without_terminal_escapes
from journal_app.filters import ENTRY_FIELDS, FilterError, describe, error_parts, parse_entries
from journal_app.models import Entry, Journal
from journal_app.pricing import CostTotal, cost_add, cost_sum, cost_text, source_model
from journal_app.rounds import Round, round_duration
from journal_app.times import entry_time
from journal_app.toolcall import call_parts, with_text
from journal_app.views.htmx import is_fragment_request, partial
from journal_app.views.query_params import page_number, parse_int
from journal_app.views.scope_urls import timeline_url

ENTRIES_PER_PAGE = 100
PREVIEW_CHARS = 300
#: Characters filtered past a preview's cut (a secret straddling the cut is found whole).
PREVIEW_MARGIN = 400


@dataclass
class EntryRow:
    """One timeline row: the entry plus what the round says about it."""

    entry: Entry
    preview: str
    truncated: bool
    interrupted: bool = False
    comments: int = 0
    filter_labels: list[str] = field(default_factory=list)  # why the preview was filtered
    receipt_preview: str = ""  # the artifact receipt's preview, filtered
    call_parts: list[Any] = field(default_factory=list)  # tool calls: toolcall.Part, filtered
    at: datetime | None = None  # the source's time of the entry (metadata), if it has one
    started: datetime | None = None  # when its work began (selectors.entry_started)
    since_start: str = ""  # "+1h02m" from the journal's first timed entry
    gap: str = ""  # a long pause before this entry ("4 min"), from the previous timed entry
    usage: dict[str, int] = field(default_factory=dict)  # provider-reported token figures
    model: str = ""  # the model named by the source
    cost: Any = None  # Decimal, from settings.LEDGER_MODEL_PRICES when the model has a price
    call: CostTotal = CostTotal()  # this entry's call: priced, unpriced, or no call


@dataclass
class CallColumn:
    """One call of a parallel round, with its result (``None``: on another page or never)."""

    call: EntryRow | None
    result: EntryRow | None
    call_id: str
    interrupted: bool


@dataclass
class RoundBlock:
    """The entries of one round that fall on the current page."""

    round: Round
    rows: list[EntryRow] = field(default_factory=list)
    continued: bool = False  # some of the round's entries are on another page
    duration: str = ""  # from the round's start (rounds.round_duration) to its last timed entry
    cost: str = ""  # the computed cost of the round's calls on this page (pricing.cost_text)
    preface: list[EntryRow] = field(default_factory=list)  # parallel rounds: the non-call rows
    columns: list[CallColumn] = field(default_factory=list)  # parallel rounds: side by side


#: a pause between two timed entries longer than this is shown as a gap on the timeline
GAP_SHOWN = timedelta(minutes=1)
_USAGE_KEYS = {
    "input_tokens": ("input_tokens", "prompt_tokens"),
    "output_tokens": ("output_tokens", "completion_tokens"),
    "cached_input_tokens": ("cached_input_tokens", "cache_read_input_tokens"),
    # Anthropic's cache writes: beside input_tokens, charged at the input price
    "cache_write_input_tokens": ("cache_creation_input_tokens",),
    "reasoning_output_tokens": ("reasoning_output_tokens",),
}


def span_text(delta: timedelta) -> str:
    """A duration for people: ``"850 ms"``, ``"42 s"``, ``"4 min"``, ``"2 h 05 min"``,
    ``"3 d 4 h"``."""
    seconds = delta.total_seconds()
    if seconds < 1:
        return f"{max(seconds, 0) * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min"
    if seconds < 86400:
        return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:02.0f} min"
    return f"{seconds // 86400:.0f} d {seconds % 86400 // 3600:.0f} h"


def provider_usage(meta: dict[str, Any]) -> dict[str, int]:
    """The provider-reported token figures of an entry (``usage`` in its metadata), under one
    set of names (``input_tokens``, ``output_tokens``, ``cached_input_tokens``,
    ``reasoning_output_tokens``); empty when the source reported none."""
    usage = meta.get("usage")
    if not isinstance(usage, dict):
        return {}
    out = {}
    for name, keys in _USAGE_KEYS.items():
        for k in keys:
            v = usage.get(k)
            if isinstance(v, int) and not isinstance(v, bool):
                out[name] = v
                break
    return out


def _timed(rows: list[EntryRow], start: datetime | None, prices: dict[str, Any]) -> None:
    """Fill times, gaps, provider figures and cost of the rows (in seq order)."""
    previous: datetime | None = None
    for row in rows:
        meta = row.entry.meta_dict
        row.at = entry_time(meta)
        row.started = selectors.entry_started(meta)
        row.usage = provider_usage(meta)
        row.model = source_model(meta)
        row.call = cost_add(CostTotal(), prices, meta) if prices else CostTotal()
        row.cost = row.call.usd if row.call.priced else None
        if row.at is not None:
            if start is not None and row.at > start:
                row.since_start = "+" + span_text(row.at - start)
            elif start is not None and row.at == start:
                row.since_start = "start"
            if previous is not None and row.at - previous > GAP_SHOWN:
                row.gap = span_text(row.at - previous)
            previous = row.at


def _row(e: Entry, interrupted: set[str], comments: dict[int, int]) -> EntryRow:
    text = e.text
    # filter a margin past the cut, so a secret straddling it is still recognised whole
    shown = privacy.filter_text(text[: PREVIEW_CHARS + PREVIEW_MARGIN], kind=e.kind)
    receipt = e.artifact.receipt() if e.artifact is not None else None
    receipt_preview = privacy.filter_text(str(receipt.get("preview", ""))) if receipt else None
    labels = list(shown.labels)
    if receipt_preview is not None:
        labels += [x for x in receipt_preview.labels if x not in labels]
    parts = []
    if e.kind == "tool_call":
        for part in call_parts(e.content):
            filtered = privacy.filter_text(part.text, kind=e.kind)
            labels += [x for x in filtered.labels if x not in labels]
            parts.append(with_text(part, filtered.text))
    return EntryRow(
        entry=e,
        call_parts=parts,
        # escapes out first: a cut through one would leave half of it on the page
        preview=(readable := without_terminal_escapes(shown.text))[:PREVIEW_CHARS],
        truncated=len(text) > PREVIEW_CHARS or len(readable) > PREVIEW_CHARS,
        interrupted=e.kind == "tool_call" and e.tool_call_id in interrupted,
        comments=comments.get(e.pk, 0),
        filter_labels=labels,
        receipt_preview=receipt_preview.text if receipt_preview is not None else "",
    )


def _side_by_side(block: RoundBlock) -> None:
    """Split a parallel round's rows into the preface and one column per call."""
    by_call: dict[str, CallColumn] = {
        c: CallColumn(None, None, c, c in block.round.interrupted_call_ids)
        for c in block.round.call_ids
    }
    for row in block.rows:
        e = row.entry
        column = by_call.get(e.tool_call_id) if e.kind in ("tool_call", "tool_result") else None
        if column is None:
            block.preface.append(row)
        elif e.kind == "tool_call":
            column.call = row
        else:
            column.result = row
    block.columns = [c for c in by_call.values() if c.call or c.result]


def timeline_jump(request: HttpRequest, journal: Journal) -> HttpResponse | None:
    """``?seq=N`` (without ``?q=``) on the timeline: the redirect to the page holding seq N,
    at its row (``HX-Redirect`` for an htmx request); ``None`` when no jump is asked."""
    jump = parse_int(request.GET.get("seq"))
    if jump is None or request.GET.get("q"):
        return None
    # jump to a seq: its page, scrolled to its row (a real redirect: the URL names it)
    seq = min(max(jump, 1), max(journal.head_seq, 1))
    page_no = (seq - 1) // ENTRIES_PER_PAGE + 1
    target = timeline_url(journal) + f"?page={page_no}#seq-{seq}"
    if is_fragment_request(request):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = target
        return response
    return redirect(target)


def timeline_context(request: HttpRequest, journal: Journal) -> dict[str, Any]:
    """What the timeline of ``journal`` shows: entries 100 per page, grouped by API round.

    Parallel calls are laid out side by side with their results; interrupted calls are
    flagged; artifact receipts expand in place. ``?q=`` takes an entry filter expression
    (:data:`journal_app.filters.ENTRY_FIELDS`): the matching entries, flat, paginated. Each
    row shows the source's time (absolute, and relative to the journal's first timed entry),
    pauses over a minute, the provider-reported token figures next to ours and, with a price
    table (``settings.LEDGER_MODEL_PRICES``), the cost; each round its duration.

    The rows' ``comments`` are 0 here: comments are the audit app's, and the page
    (:func:`audit_app.views.timeline`) counts them for :func:`timeline_rows`.
    """
    q = request.GET.get("q", "").strip()
    error: FilterError | None = None
    query = None
    if q:
        try:
            query = parse_entries(q)
        except FilterError as exc:
            error = exc
    entries: Any = selectors.JournalEntries(journal)
    if q:
        entries = Entry.objects.filter(journal=journal).select_related("artifact__tenant")
        entries = entries.filter(selectors.entry_filter(query)) if query else entries.none()
        entries = entries.order_by("seq")
    page = Paginator(entries, ENTRIES_PER_PAGE).get_page(page_number(request))
    page_entries = list(page.object_list)
    comments: dict[int, int] = {}  # counted by the page (audit_app.views.timeline)
    by_seq = {e.seq: e for e in page_entries}
    blocks: list[RoundBlock] = []
    matches: list[EntryRow] = []
    start = selectors.journal_start(journal) if page_entries else None
    prices = selectors.model_prices()
    if q:
        unanswered = selectors.unanswered_calls(
            journal, [e.tool_call_id for e in page_entries if e.kind == "tool_call"]
        )
        matches = [_row(e, unanswered, comments) for e in page_entries]
        _timed(matches, start, prices)
    elif page_entries:
        rounds = selectors.page_rounds(journal, page_entries[0].seq, page_entries[-1].seq)
        for r in rounds:
            interrupted = set(r.interrupted_call_ids)
            block = RoundBlock(round=r, continued=any(s not in by_seq for s in r.seqs))
            block.rows = [_row(by_seq[s], interrupted, comments) for s in r.seqs if s in by_seq]
            blocks.append(block)
        _timed([row for b in blocks for row in b.rows], start, prices)
        for block in blocks:
            times = [row.at for row in block.rows if row.at is not None]
            first = block.rows[0] if block.rows else None
            started = first.started if first and first.entry.seq == block.round.first_seq else None
            took = round_duration(started, times)
            if took is not None:
                block.duration = span_text(took)
            block.cost = cost_text(cost_sum(row.call for row in block.rows), places=4)
            if block.round.parallel:
                _side_by_side(block)
    context = {
        "journal": journal,
        "session": journal.session,
        "tenant": journal.session.tenant,
        "journals": list(journal.session.journals.order_by("lane", "branch")),
        "page": page,
        "blocks": blocks,
        "matches": matches,
        "q": q,
        "error": error,
        "error_parts": error_parts(q, error) if error else None,
        "fields": describe(ENTRY_FIELDS),
        "timeline_url": timeline_url(journal),
        "start": start,
        "priced": bool(prices),
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    if prices and not is_fragment_request(request):
        journal_cost = selectors.journal_costs([journal.pk], prices).get(journal.pk)
        session_cost = selectors.session_costs([journal.session]).get(journal.session_id)
        context["journal_cost"] = cost_text(journal_cost, places=4)
        context["session_cost"] = cost_text(session_cost, places=4)
    return context


def timeline_rows(context: dict[str, Any]) -> list[EntryRow]:
    """Every row of a :func:`timeline_context`: the filter's matches, or the rounds' rows
    (a parallel round's preface and columns hold the same row objects)."""
    return [*context["matches"], *(row for block in context["blocks"] for row in block.rows)]


def timeline_render(request: HttpRequest, context: dict[str, Any]) -> HttpResponse:
    """The timeline page of a :func:`timeline_context`; an htmx request (filter,
    pagination) gets ``#entry-list``."""
    return render(request, partial(request, "journal_app/timeline.html", "entry-list"), context)
