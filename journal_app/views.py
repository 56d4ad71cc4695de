"""Operator UI pages of the journal (DESIGN.md section 8): thin function views.

Reads go through :mod:`journal_app.selectors` (tenant filter, ``Http404``); the hash badges
call :func:`journal_app.services.entry_check` and :func:`~journal_app.services.artifact_read`
at render time, so "hash verified" always means "recomputed for this response".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django_htmx.middleware import HtmxDetails

from journal_app import selectors
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


@login_required
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    """Sessions of the user's tenants, searchable by key/title, 25 per page."""
    q = request.GET.get("q", "").strip()
    sessions = selectors.sessions_for_user(request.user, q)
    page = Paginator(sessions, SESSIONS_PER_PAGE).get_page(_page_number(request))
    context = {
        "q": q,
        "page": page,
        "permalink": _permalink(request, request.get_full_path()),
    }
    template = "journal_app/session_list.html"
    if request.htmx and not request.htmx.boosted:
        template += "#session-table"
    return render(request, template, context)


@login_required
def session_detail(request: HttpRequest, tenant: str, session: str) -> HttpResponse:
    """Redirect to the session's main/main journal (or its first journal)."""
    s = selectors.get_session_for_user(request.user, tenant, session)
    journal = selectors.default_journal(s)
    if journal is None:
        raise Http404("this session has no journal")
    return redirect(_timeline_url(journal))


def _timeline_url(journal: Journal) -> str:
    return reverse(
        "journal:timeline",
        kwargs={
            "tenant": journal.session.tenant.slug,
            "session": journal.session.key,
            "lane": journal.lane,
            "branch": journal.branch,
        },
    )


@dataclass
class EntryRow:
    """One timeline row: the entry plus what the round says about it."""

    entry: Entry
    preview: str
    truncated: bool
    interrupted: bool = False


@dataclass
class RoundBlock:
    """The entries of one round that fall on the current page."""

    round: Round
    rows: list[EntryRow] = field(default_factory=list)
    continued: bool = False  # some of the round's entries are on another page


@login_required
def timeline(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """Entries of one scope, 100 per page, grouped by API round."""
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    entries = (
        Entry.objects.filter(journal=journal).select_related("artifact__tenant").order_by("seq")
    )
    page = Paginator(entries, ENTRIES_PER_PAGE).get_page(_page_number(request))
    page_entries = list(page.object_list)
    by_seq = {e.seq: e for e in page_entries}
    all_rounds = selectors.journal_rounds(journal)
    blocks: list[RoundBlock] = []
    for r in selectors.rounds_for_seqs(all_rounds, list(by_seq)):
        interrupted = set(r.interrupted_call_ids)
        block = RoundBlock(round=r, continued=any(s not in by_seq for s in r.seqs))
        for s in r.seqs:
            e = by_seq.get(s)
            if e is None:
                continue
            text = e.text
            block.rows.append(
                EntryRow(
                    entry=e,
                    preview=text[:PREVIEW_CHARS],
                    truncated=len(text) > PREVIEW_CHARS,
                    interrupted=e.kind == "tool_call" and e.tool_call_id in interrupted,
                )
            )
        blocks.append(block)
    context = {
        "journal": journal,
        "session": journal.session,
        "tenant": journal.session.tenant,
        "journals": list(journal.session.journals.order_by("lane", "branch")),
        "page": page,
        "blocks": blocks,
        "round_count": len(all_rounds),
        "permalink": _permalink(request, request.get_full_path()),
    }
    return render(request, "journal_app/timeline.html", context)


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


@login_required
def entry_detail(request: HttpRequest, entry_hash: str) -> HttpResponse:
    """One raw entry: fields, hashes, body, chunks, and the hash badge recomputed now.

    ``?chunk=N`` highlights chunk N of the body; ``?quote=...`` highlights the first
    occurrence of the quote in the entry's text (or in the raw body), or says it is absent.
    """
    entry = selectors.entry_for_user(request.user, entry_hash)
    problems = entry_check(entry, chain=True)
    checked_at = timezone.now()
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
    context = {
        "entry": entry,
        "journal": journal,
        "session": journal.session,
        "tenant": journal.session.tenant,
        "timeline_url": _timeline_url(journal)
        + f"?page={(entry.seq - 1) // ENTRIES_PER_PAGE + 1}#seq-{entry.seq}",
        "problems": problems,
        "verified": not problems,
        "checked_at": checked_at,
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
        "permalink": _permalink(request, reverse("journal:entry", args=[display(entry.entry_hash)]))
        + (("?" + request.GET.urlencode()) if request.GET else ""),
    }
    return render(request, "journal_app/entry.html", context)


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
