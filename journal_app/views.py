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
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django_htmx.middleware import HtmxDetails

from journal_app import selectors
from journal_app.charts import FoldPoint, token_chart
from journal_app.filters import ENTRY_FIELDS, FilterError, describe, error_parts, parse_entries
from journal_app.hashing import display
from journal_app.models import Entry, Journal
from journal_app.rounds import Round
from journal_app.services import artifact_read, entry_check

SESSIONS_PER_PAGE = 25
ENTRIES_PER_PAGE = 100
PREVIEW_CHARS = 300
ARTIFACT_PAGE_CHARS = 20_000


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _permalink(request: HttpRequest, path: str) -> str:
    return request.build_absolute_uri(path)


def _page_number(request: HttpRequest) -> str:
    return request.GET.get("page") or "1"


def _partial(request: HttpRequest, template: str, region: str) -> str:
    """``template#region`` for an htmx request that is not boosted, else ``template``."""
    htmx = getattr(request, "htmx", None)
    return f"{template}#{region}" if htmx and not htmx.boosted else template


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


# Sessions list ----------------------------------------------------------------------------


@login_required
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    """Sessions of the user's tenants: search, filters (tenant, lane, activity), counts.

    Counts per row: entries, folds, open obligations, pending reviews. A fixed number of
    queries for any page (no N+1): see :func:`journal_app.selectors.sessions_for_user`.
    """
    q = request.GET.get("q", "").strip()
    tenant = request.GET.get("tenant", "").strip()
    lane = request.GET.get("lane", "").strip()
    activity = request.GET.get("activity", "")
    if activity not in selectors.ACTIVITY_DAYS:
        activity = ""
    sessions = selectors.sessions_for_user(
        request.user, q, tenant=tenant, lane=lane, activity=activity
    )
    page = Paginator(sessions, SESSIONS_PER_PAGE).get_page(_page_number(request))
    rows = list(page.object_list)
    open_obligations = selectors.open_obligations_by_session(rows)
    for s in rows:
        s.open_obligations = open_obligations.get(s.pk, 0)
    filtered = bool(q or tenant or lane or activity)
    context = {
        "q": q,
        "tenant": tenant,
        "lane": lane,
        "activity": activity,
        "filtered": filtered,
        "tenants": list(selectors.tenants_for_user(request.user).values_list("slug", flat=True)),
        "activities": selectors.ACTIVITY_LABELS,
        "page": page,
        "rows": rows,
        "permalink": _permalink(request, request.get_full_path()),
    }
    return render(
        request, _partial(request, "journal_app/session_list.html", "session-table"), context
    )


# Session overview -------------------------------------------------------------------------


def _chart_journal(request: HttpRequest, journals: list[Journal]) -> Journal | None:
    wanted = request.GET.get("journal", "")
    for j in journals:
        if f"{j.lane}/{j.branch}" == wanted:
            return j
    if wanted:
        raise Http404("no such lane/branch in this session")
    for j in journals:
        if j.lane == "main" and j.branch == "main":
            return j
    return journals[0] if journals else None


@login_required
def session_overview(request: HttpRequest, tenant: str, session: str) -> HttpResponse:
    """One session: its lanes and branches (revision, folds, reviews), a token chart with
    fold points (``?journal=lane/branch``), annotations, the export link."""
    s = selectors.get_session_for_user(request.user, tenant, session)
    journals = selectors.session_journals(s)
    chosen = _chart_journal(request, journals)
    chart = None
    if chosen is not None:
        folds = selectors.fold_points(chosen)
        chart = token_chart(
            selectors.token_buckets(chosen),
            [
                FoldPoint(f["number"], f["seq"], f["ledger_active"], f["kind"], f["outcome"])
                for f in folds
            ],
            head_seq=chosen.head_seq,
        )
    annotations = list(s.annotations.select_related("author").order_by("-created_at", "-pk")[:50])
    context = {
        "session": s,
        "tenant": s.tenant,
        "journals": journals,
        "chosen": chosen,
        "chart": chart,
        "annotations": annotations,
        "verdicts": [("good", "good compaction example"), ("bad", "bad compaction example")],
        "meta": json.dumps(s.meta_dict, indent=2, ensure_ascii=False, sort_keys=True),
        "export_url": reverse("ledger:export", args=[s.tenant.slug, s.key]),
        "annotate_url": reverse("journal:annotate", args=[s.tenant.slug, s.key]),
        "permalink": _permalink(request, request.get_full_path()),
    }
    return render(request, "journal_app/session.html", context)


# Timeline ---------------------------------------------------------------------------------


@dataclass
class EntryRow:
    """One timeline row: the entry plus what the round says about it."""

    entry: Entry
    preview: str
    truncated: bool
    interrupted: bool = False
    comments: int = 0


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
    preface: list[EntryRow] = field(default_factory=list)  # parallel rounds: the non-call rows
    columns: list[CallColumn] = field(default_factory=list)  # parallel rounds: side by side


def _row(e: Entry, interrupted: set[str], comments: dict[int, int]) -> EntryRow:
    text = e.text
    return EntryRow(
        entry=e,
        preview=text[:PREVIEW_CHARS],
        truncated=len(text) > PREVIEW_CHARS,
        interrupted=e.kind == "tool_call" and e.tool_call_id in interrupted,
        comments=comments.get(e.pk, 0),
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


@login_required
def timeline(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """Entries of one scope, 100 per page, grouped by API round.

    Parallel calls are laid out side by side with their results; interrupted calls are
    flagged; artifact receipts expand in place. ``?q=`` takes an entry filter expression
    (:data:`ledger_app.filters.ENTRY_FIELDS`): the matching entries, flat, paginated.
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
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
    comments = selectors.comment_counts(entry_ids=[e.pk for e in page_entries])
    by_seq = {e.seq: e for e in page_entries}
    blocks: list[RoundBlock] = []
    matches: list[EntryRow] = []
    if q:
        unanswered = selectors.unanswered_calls(
            journal, [e.tool_call_id for e in page_entries if e.kind == "tool_call"]
        )
        matches = [_row(e, unanswered, comments) for e in page_entries]
    elif page_entries:
        rounds = selectors.page_rounds(journal, page_entries[0].seq, page_entries[-1].seq)
        for r in rounds:
            interrupted = set(r.interrupted_call_ids)
            block = RoundBlock(round=r, continued=any(s not in by_seq for s in r.seqs))
            block.rows = [_row(by_seq[s], interrupted, comments) for s in r.seqs if s in by_seq]
            if r.parallel:
                _side_by_side(block)
            blocks.append(block)
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
        "permalink": _permalink(request, request.get_full_path()),
    }
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


def entry_context(request: HttpRequest, entry: Entry) -> dict[str, Any]:
    """Everything the entry page shows (shared with the comment view's re-render)."""
    problems = entry_check(entry, chain=True)
    raw = entry.body.encode("utf-8", errors="surrogatepass")
    chunk_no = _parse_int(request.GET.get("chunk"))
    chunks = [
        ChunkView(
            position=c.position,
            offset=c.offset,
            length=c.length,
            hash=c.hash,
            text=raw[c.offset : c.offset + c.length].decode("utf-8", errors="replace"),
            highlighted=c.position == chunk_no,
        )
        for c in entry.chunks.order_by("position")
    ]
    quote = request.GET.get("quote", "")
    text = entry.text
    quote_in_text = _split_quote(text, quote)
    quote_in_body = None if quote_in_text else _split_quote(entry.body, quote)
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
        "metadata": json.dumps(entry.meta_dict, indent=2, ensure_ascii=False, sort_keys=True),
        "chunks": chunks,
        "chunk_no": chunk_no,
        "chunk_missing": chunk_no is not None and not any(c.highlighted for c in chunks),
        "quote": quote,
        "quote_in_text": quote_in_text,
        "quote_in_body": quote_in_body,
        "previous_hash": display(previous_hash) if previous_hash else None,
        "next_hash": display(next_hash) if next_hash else None,
        "comments": list(entry.comments.select_related("author").order_by("created_at", "pk")),
        "comment_url": reverse("journal:entry_comment", args=[display(entry.entry_hash)]),
        "permalink": _permalink(request, reverse("journal:entry", args=[display(entry.entry_hash)]))
        + (("?" + request.GET.urlencode()) if request.GET else ""),
    }


@login_required
def entry_detail(request: HttpRequest, entry_hash: str) -> HttpResponse:
    """One raw entry: fields, hashes, body, chunks, comments, and the hash badge recomputed now.

    ``?chunk=N`` highlights chunk N of the body; ``?quote=...`` highlights the first
    occurrence of the quote in the entry's text (or in the raw body), or says it is absent.
    """
    entry = selectors.entry_for_user(request.user, entry_hash)
    return render(request, "journal_app/entry.html", entry_context(request, entry))


# Artifact ---------------------------------------------------------------------------------


@login_required
def artifact_detail(request: HttpRequest, tenant: str, content_hash: str) -> HttpResponse:
    """An artifact: receipt, preview, content 20,000 characters per page, hash recomputed."""
    artifact = selectors.artifact_for_user(request.user, tenant, content_hash)
    try:
        content, matched = artifact_read(artifact=artifact)
        missing = False
    except OSError:
        content, matched, missing = "", False, True
    pages = [
        content[i : i + ARTIFACT_PAGE_CHARS] for i in range(0, len(content), ARTIFACT_PAGE_CHARS)
    ]
    page = Paginator(pages or [""], 1).get_page(_page_number(request))
    page_text = page.object_list[0]
    start = (page.number - 1) * ARTIFACT_PAGE_CHARS
    context: dict[str, Any] = {
        "artifact": artifact,
        "tenant": artifact.tenant,
        "receipt": artifact.receipt(),
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
