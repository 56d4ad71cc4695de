"""The waterfall page of one journal scope: its model calls and tool runs on a time axis."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse

from journal_app import selectors
from journal_app.views.htmx import HtmxHttpRequest, partial
from journal_app.views.scope_urls import scope_kwargs, timeline_url
from journal_app.views.timeline_page import span_text
from journal_app.waterfall import BAR_WIDTH


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
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(request, partial(request, "journal_app/waterfall.html", "waterfall"), context)
