"""Operator UI pages of the journal (DESIGN.md section 8): thin function views.

Reads go through :mod:`journal_app.selectors` (tenant filter, ``Http404``); the hash badges
call :func:`journal_app.services.entry_check` and :func:`~journal_app.services.artifact_read`
at render time, so "hash verified" always means "recomputed for this response". htmx
requests get the page's named partial (``page.html#region``); every htmx link and form
keeps a real ``href``/``action``, so the pages work without JavaScript (STYLE.md 4).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import rfc8785
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.middleware import HtmxDetails

from journal_app import privacy, selectors
from journal_app.filters import ENTRY_FIELDS, FilterError, describe, error_parts, parse_entries
from journal_app.hashing import display
from journal_app.models import Entry, Journal
from journal_app.pricing import CostTotal, cost_add, cost_sum, cost_text, source_model
from journal_app.rounds import Round, round_duration
from journal_app.services import artifact_read, entry_check
from journal_app.toolcall import call_parts, with_text
from journal_app.waterfall import BAR_WIDTH

ENTRIES_PER_PAGE = 100
PREVIEW_CHARS = 300
#: Characters filtered past a preview's cut (a secret straddling the cut is found whole).
PREVIEW_MARGIN = 400
ARTIFACT_PAGE_CHARS = 20_000


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _permalink(request: HttpRequest, path: str) -> str:
    return request.build_absolute_uri(path)


def _page_number(request: HttpRequest) -> str:
    return request.GET.get("page") or "1"


def is_fragment_request(request: HttpRequest) -> bool:
    """True for an htmx request that swaps a fragment: not boosted, and not a history restore
    (Back/Forward on a page htmx has not cached asks for the whole page with ``HX-Request``)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.boosted and not htmx.history_restore_request


def _partial(request: HttpRequest, template: str, region: str) -> str:
    """``template#region`` for a fragment request (:func:`is_fragment_request`), else ``template``."""
    return f"{template}#{region}" if is_fragment_request(request) else template


# Side panel -------------------------------------------------------------------------------

PANEL_ID = "side-panel"


def is_panel(request: HttpRequest) -> bool:
    """True when an htmx request targets the side panel (``hx-target="#side-panel"``): the view
    renders its page's ``#panel`` region (:func:`render_panel`) instead of the page."""
    return is_fragment_request(request) and request.htmx.target == PANEL_ID  # type: ignore[attr-defined]


def _local_path(url: str, request: HttpRequest) -> str:
    """Path and query of ``url`` when it is on this site, without ``panel``; else ``/``."""
    if not url or not url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return "/"
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "panel"]
    return (parts.path or "/") + ("?" + urlencode(query) if query else "")


def render_panel(request: HttpRequest, template: str, context: dict[str, Any]) -> HttpResponse:
    """The ``template#panel`` region for the side panel, with the URL state.

    The page hosting the panel (``HX-Current-URL``) gets ``?panel=<this request's path>``
    pushed (``HX-Push-Url``), so Back closes the panel and the URL reopens it; a panel loaded
    by the page itself (``?panel=`` already in the URL, trigger ``#side-panel``) pushes nothing.
    ``panel_close_url`` closes it (:func:`panel_close`); ``full_url`` is the page's permalink.
    """
    host = _local_path(request.htmx.current_url or "", request)  # type: ignore[attr-defined]
    context = {
        **context,
        "in_panel": True,
        "panel_close_url": reverse("journal:panel_close") + "?" + urlencode({"next": host}),
    }
    response = render(request, f"{template}#panel", context)
    if request.htmx.trigger != PANEL_ID:  # type: ignore[attr-defined]
        sep = "&" if "?" in host else "?"
        response["HX-Push-Url"] = host + sep + urlencode({"panel": request.get_full_path()})
    return response


@login_required
def panel_close(request: HtmxHttpRequest) -> HttpResponse:
    """Close the side panel: htmx gets the empty panel and ``HX-Push-Url`` of the page without
    ``panel``; a normal request is redirected there (``?next=``, a path on this site)."""
    target = _local_path(request.GET.get("next", ""), request)
    if not is_fragment_request(request):
        return redirect(target)
    response = HttpResponse(
        f'<aside id="{PANEL_ID}" class="side-panel" aria-label="Side panel"></aside>'
    )
    response["HX-Push-Url"] = target
    return response


def timeline_url(journal: Journal) -> str:
    """The timeline of ``journal`` (its scope in the path)."""
    return reverse("journal:timeline", kwargs=scope_kwargs(journal))


def scope_kwargs(journal: Journal) -> dict[str, str]:
    """URL kwargs of a journal's scope: tenant, session, lane, branch."""
    return {
        "tenant": journal.session.tenant.slug,
        "session": journal.session.key,
        "lane": journal.lane,
        "branch": journal.branch,
    }


# Timeline ---------------------------------------------------------------------------------


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
        row.at = selectors.entry_time(meta)
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
        preview=shown.text[:PREVIEW_CHARS],
        truncated=len(text) > PREVIEW_CHARS or len(shown.text) > PREVIEW_CHARS,
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
    jump = _parse_int(request.GET.get("seq"))
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
    page = Paginator(entries, ENTRIES_PER_PAGE).get_page(_page_number(request))
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
        "permalink": _permalink(request, request.get_full_path()),
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
    return render(request, _partial(request, "journal_app/timeline.html", "entry-list"), context)


# Entry ------------------------------------------------------------------------------------


@dataclass
class ChunkView:
    """One chunk row and its slice of the body (decoded on its own: cuts are at UTF-8 starts)."""

    position: int
    offset: int
    length: int
    hash: str
    text: str
    highlighted: bool


def _split_quote(text: str, quote: str) -> tuple[str, str, str] | None:
    at = text.find(quote) if quote else -1
    if at < 0:
        return None
    return text[:at], text[at : at + len(quote)], text[at + len(quote) :]


def _parse_int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def _parse_range(value: str | None) -> tuple[int, int] | None:
    """``"A-B"`` or ``"A"`` (whole numbers, ``A <= B``) as ``(A, B)``; anything else ``None``."""
    if not value:
        return None
    first, _, last = value.partition("-")
    a, b = _parse_int(first.strip()), _parse_int((last or first).strip())
    if a is None or b is None or a < 0 or b < a:
        return None
    return a, b


def cited_chunks(request: HttpRequest) -> set[int]:
    """The chunk positions a support link cites: ``?chunk=N`` and/or ``?chunks=A-B`` (a range)
    or ``?chunks=A,B,C``."""
    out: set[int] = set()
    one = _parse_int(request.GET.get("chunk"))
    if one is not None:
        out.add(one)
    raw = request.GET.get("chunks", "")
    for part in raw.split(","):
        r = _parse_range(part)
        if r is not None and r[1] - r[0] < 10_000:
            out.update(range(r[0], r[1] + 1))
    return out


def _body_spans(entry: Entry) -> list[tuple[int, int, str]]:
    """``(start, end, label)`` character spans of ``entry.body`` shown as marks: what
    :func:`journal_app.privacy.findings` finds in the canonical JSON, plus the JSON strings of
    typed reasoning blocks (``thinking``...); a reasoning entry, or a reasoning block that
    cannot be located in the body, hides the whole body."""
    body = entry.body
    whole = [(0, len(body), "reasoning")]
    if entry.kind == "reasoning":
        return whole
    spans = [
        (a, b, "reasoning" if cat == "reasoning" else f"secret: {k}")
        for a, b, k, cat in privacy.findings(body)
    ]
    for value in _reasoning_values(entry.content):
        encoded = json.dumps(value, ensure_ascii=False)
        at = body.find(encoded)
        if at < 0:
            return whole
        while at >= 0:
            spans.append((at + 1, at + len(encoded) - 1, "reasoning"))
            at = body.find(encoded, at + len(encoded))
    spans.sort(key=lambda x: (x[0], -x[1]))
    merged: list[tuple[int, int, str]] = []
    for a, b, label in spans:
        if merged and a < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]), merged[-1][2])
        else:
            merged.append((a, b, label))
    return merged


def _mark(label: str) -> str:
    if label == "reasoning":
        return privacy.REASONING_MARK
    return privacy.SECRET_MARK.format(kind=label.removeprefix("secret: "))


def _reasoning_values(value: Any) -> list[str]:
    """Strings of typed reasoning blocks and reasoning fields anywhere in ``value``."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            is_block = item.get("type") in privacy.REASONING_KINDS
            for k, v in item.items():
                if isinstance(v, str) and v and (is_block and k != "type"):
                    out.append(v)
                elif isinstance(v, str) and v and k in privacy.REASONING_FIELDS:
                    out.append(v)
                else:
                    stack.append(v)
        elif isinstance(item, list):
            stack.extend(item)
    return out


def _masked(text: str, start: int, spans: list[tuple[int, int, str]]) -> str:
    """``text`` (the body from character ``start``) with each labelled span replaced by its mark,
    written where the span starts; a span's continuation in a later slice is left out."""
    end = start + len(text)
    out: list[str] = []
    pos = start
    for a, b, label in spans:
        if b <= pos or a >= end:
            continue
        out.append(text[pos - start : max(a, pos) - start])
        if a >= start:
            out.append(_mark(label))
        pos = min(b, end)
    out.append(text[pos - start :])
    return "".join(out)


def entry_context(request: HttpRequest, entry: Entry) -> dict[str, Any]:
    """Everything the entry page shows but its comments (the audit app's: the page,
    :func:`audit_app.views.entry_detail`, and the comment view's re-render add them).

    Text, body, chunks and metadata are shown filtered by :mod:`journal_app.privacy` (secrets
    and hidden reasoning replaced by marks; ``filter_labels`` say why); the hash badge is over
    the stored bytes. Tenant admins have a link to the unfiltered bytes (an audited read).
    """
    problems = entry_check(entry, chain=True)
    raw = entry.body.encode("utf-8", errors="surrogatepass")
    shown = privacy.filter_entry(
        kind=entry.kind, content=entry.content, text=entry.text, metadata=entry.meta_dict
    )
    spans = _body_spans(entry)
    chunk_no = _parse_int(request.GET.get("chunk"))
    wanted_chunks = cited_chunks(request)
    byte_range = _parse_range(request.GET.get("bytes"))
    if byte_range is not None:  # "A-B" is end-exclusive, as support ranges are; "A" one byte
        byte_range = (byte_range[0], max(byte_range[1], byte_range[0] + 1))
    chunks = []
    char_at = 0
    for c in entry.chunks.order_by("position"):
        piece = raw[c.offset : c.offset + c.length].decode("utf-8", errors="replace")
        in_bytes = (
            byte_range is not None
            and c.offset < byte_range[1]
            and byte_range[0] < (c.offset + c.length)
        )
        chunks.append(
            ChunkView(
                position=c.position,
                offset=c.offset,
                length=c.length,
                hash=c.hash,
                text=_masked(piece, char_at, spans) if spans else piece,
                highlighted=c.position in wanted_chunks or in_bytes,
            )
        )
        char_at += len(piece)
    labels = list(shown.labels)
    labels += [x for x in dict.fromkeys(label for _, _, label in spans) if x not in labels]
    body_shown = _masked(entry.body, 0, spans) if spans else entry.body
    quote = request.GET.get("quote", "")
    text = shown.text
    quote_in_text = _split_quote(text, quote)
    quote_in_body = None if quote_in_text else _split_quote(body_shown, quote)
    if quote and not quote_in_text and not quote_in_body:
        # a quote is text inside one JSON string of the body (a support item's ``quote``):
        # in the stored bytes its quotes, tabs and backslashes are escaped
        quote_in_body = _split_quote(body_shown, rfc8785.dumps(quote).decode("utf-8")[1:-1])
    # an exact byte range of the body ([start, end), the support item's ``range``), shown
    # exactly when nothing is masked
    bytes_in_body = None
    if byte_range is not None and not spans and not quote_in_body and byte_range[0] < len(raw):
        start, end = byte_range[0], min(byte_range[1], len(raw))
        bytes_in_body = (
            raw[:start].decode("utf-8", errors="replace"),
            raw[start:end].decode("utf-8", errors="replace"),
            raw[end:].decode("utf-8", errors="replace"),
        )
    finer = bool(wanted_chunks or byte_range or quote)
    cited_whole = request.GET.get("cited") == "entry" and not finer
    previous_hash, next_hash = selectors.neighbour_hashes(entry)
    journal = entry.journal
    return {
        "entry": entry,
        "journal": journal,
        "session": journal.session,
        "tenant": journal.session.tenant,
        "timeline_url": timeline_url(journal)
        + f"?page={(entry.seq - 1) // ENTRIES_PER_PAGE + 1}#seq-{entry.seq}",
        "problems": problems,
        "verified": not problems,
        "checked_at": timezone.now(),
        "text": text,
        "filtered": bool(labels),
        "filter_labels": labels,
        "metadata": json.dumps(shown.metadata, indent=2, ensure_ascii=False, sort_keys=True),
        "chunks": chunks,
        "chunk_no": chunk_no,
        "cited_chunks": sorted(wanted_chunks),
        "chunk_missing": bool(wanted_chunks) and not any(c.highlighted for c in chunks),
        "byte_range": byte_range,
        "bytes_in_body": bytes_in_body,
        "cited_whole": cited_whole,
        "full_url": reverse("journal:entry", args=[display(entry.entry_hash)])
        + (("?" + request.GET.urlencode()) if request.GET else ""),
        "quote": quote,
        "quote_in_text": quote_in_text,
        "quote_in_body": quote_in_body,
        "previous_hash": display(previous_hash) if previous_hash else None,
        "next_hash": display(next_hash) if next_hash else None,
        "comment_url": reverse("journal:entry_comment", args=[display(entry.entry_hash)]),
        "permalink": _permalink(request, reverse("journal:entry", args=[display(entry.entry_hash)]))
        + (("?" + request.GET.urlencode()) if request.GET else ""),
    }


# Artifact ---------------------------------------------------------------------------------


@login_required
def artifact_detail(request: HttpRequest, tenant: str, content_hash: str) -> HttpResponse:
    """An artifact: receipt, preview, content 20,000 characters per page, hash recomputed
    over the stored bytes; preview and content shown filtered (:mod:`journal_app.privacy`)."""
    artifact = selectors.artifact_for_user(request.user, tenant, content_hash)
    try:
        content, matched = artifact_read(artifact=artifact)
        missing = False
    except OSError:
        content, matched, missing = "", False, True
    # the hash was checked over the stored bytes above; what is shown is filtered
    shown = privacy.filter_text(content, kind="tool_result")
    receipt = artifact.receipt()
    preview = privacy.filter_text(str(receipt.get("preview", "")), kind="tool_result")
    content = shown.text
    labels = shown.labels + [x for x in preview.labels if x not in shown.labels]
    pages = [
        content[i : i + ARTIFACT_PAGE_CHARS] for i in range(0, len(content), ARTIFACT_PAGE_CHARS)
    ]
    page = Paginator(pages or [""], 1).get_page(_page_number(request))
    page_text = page.object_list[0]
    start = (page.number - 1) * ARTIFACT_PAGE_CHARS
    context: dict[str, Any] = {
        "artifact": artifact,
        "tenant": artifact.tenant,
        "receipt": receipt,
        "preview": preview.text,
        "filtered": bool(labels),
        "filter_labels": labels,
        "matched": matched,
        "missing": missing,
        "checked_at": timezone.now(),
        "page": page,
        "page_text": page_text,
        "page_start": start + 1 if page_text else 0,
        "page_end": start + len(page_text),
        "content_chars": len(content),
        "entries": list(
            artifact.entries.select_related("journal__session__tenant").order_by("pk")[:50]
        ),
        "permalink": _permalink(request, request.get_full_path()),
    }
    return render(request, "journal_app/artifact.html", context)


# Waterfall --------------------------------------------------------------------------------


@login_required
def waterfall_view(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The scope's model calls and tool runs as a waterfall, 300 entries a page
    (:func:`journal_app.selectors.journal_waterfall`): one row per span with its start
    (relative to the page's first), duration, provider tokens and computed cost, and a bar on
    the page's time axis (server-rendered SVG). ``?page=N``; an htmx request gets
    ``#waterfall``. README "The UI" (Waterfall).
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    try:
        asked = int(request.GET.get("page") or 1)
    except ValueError:
        asked = 1
    built, page, pages = selectors.journal_waterfall(journal, asked)
    spans = built.spans
    for s in spans:
        s.duration_text = span_text(s.duration) if s.duration is not None else ""
        s.offset_text = "+" + span_text(s.offset) if s.offset is not None else ""
    first = (page - 1) * selectors.WATERFALL_ENTRIES + 1
    slowest = sorted(
        (s for s in spans if s.duration is not None), key=lambda s: s.duration, reverse=True
    )[:3]
    context = {
        "journal": journal,
        "session": journal.session,
        "tenant": journal.session.tenant,
        "waterfall": built,
        "spans": spans,
        "slowest": slowest,
        "total_text": span_text(built.total) if built.total is not None else "",
        "bar_width": BAR_WIDTH,
        "page_number": page,
        "pages": pages,
        "first_seq": first,
        "last_seq": min(journal.head_seq, first + selectors.WATERFALL_ENTRIES - 1),
        "calls": sum(1 for s in spans if s.kind == "call"),
        "tools": sum(1 for s in spans if s.kind == "tool"),
        "failed": sum(1 for s in spans if s.failed),
        "timeline_url": timeline_url(journal),
        "waterfall_url": reverse("journal:waterfall", kwargs=scope_kwargs(journal)),
        "permalink": _permalink(request, request.get_full_path()),
    }
    return render(request, _partial(request, "journal_app/waterfall.html", "waterfall"), context)
