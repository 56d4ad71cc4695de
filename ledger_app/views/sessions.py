"""The session pages: the sessions list (the site's front page) and one session's overview.

They show journal rows with the ledger's figures (folds, pending reviews, open obligations,
blockers, failed attempts), so they live with the ledger and read through
:mod:`ledger_app.selectors.sessions`; ``config/urls.py`` serves them in the ``journal``
namespace at their historical names and paths (``journal:session_list``, ``journal:session``;
docs/architecture.md, "Layers").
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from journal_app import selectors as journal_selectors
from journal_app.charts import FoldPoint, token_chart
from journal_app.models import Journal
from journal_app.pricing import CostTotal, cost_sum, cost_text
from journal_app.views.htmx import HtmxHttpRequest, partial
from ledger_app.selectors import sessions as session_reads

SESSIONS_PER_PAGE = 25


@login_required
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    """Sessions of the user's tenants: search (key, title, fact text), filters (tenant, lane,
    activity), sort (``?sort=``, :data:`ledger_app.selectors.sessions.SESSION_SORTS`), counts per row
    and totals over every matching session (entries, tokens, folds, open obligations,
    blockers). "Last activity" is the source's time of the newest entry when the source
    carries one, else the import time. An htmx request gets ``#session-table``.
    """
    q = request.GET.get("q", "").strip()
    tenant = request.GET.get("tenant", "").strip()
    lane = request.GET.get("lane", "").strip()
    activity = request.GET.get("activity", "")
    if activity not in session_reads.ACTIVITY_DAYS:
        activity = ""
    sort = request.GET.get("sort", "")
    if sort not in session_reads.SESSION_SORTS and sort != "cost":
        sort = ""
    sessions = session_reads.sessions_for_user(
        request.user, q, tenant=tenant, lane=lane, activity=activity, sort=sort or "newest"
    )
    priced = bool(journal_selectors.model_prices())
    listed: Any = sessions
    all_costs: dict[int, CostTotal] = {}
    if sort == "cost" and priced:  # computed in Python: costest first, without a call last
        listed = list(sessions)
        all_costs = journal_selectors.session_costs(listed)
        listed.sort(key=lambda s: -(all_costs[s.pk].usd if s.pk in all_costs else Decimal(-1)))
    page = Paginator(listed, SESSIONS_PER_PAGE).get_page(request.GET.get("page") or "1")
    rows = list(page.object_list)
    open_obligations = session_reads.open_obligations_by_session(rows)
    costs = all_costs or (journal_selectors.session_costs(rows) if priced else {})
    for s in rows:  # last activity: the source's time when it has one (sorted on the same)
        s.open_obligations = open_obligations.get(s.pk, 0)
        s.source_time = s.source_at
        s.cost = costs.get(s.pk)
        s.cost_text = cost_text(s.cost)
    filtered = bool(q or tenant or lane or activity)
    tenant_costs = journal_selectors.tenant_costs(sessions) if priced else []
    context = {
        "q": q,
        "tenant": tenant,
        "lane": lane,
        "activity": activity,
        "sort": sort,
        "sorts": {
            "newest": "newest import",
            "key": "key",
            "entries": "most entries",
            "tokens": "most tokens",
            "folds": "most folds",
            "activity": "latest activity",
            **({"cost": "highest cost (computed)"} if priced else {}),
        },
        "priced": priced,
        "tenant_costs": [(slug, cost_text(c)) for slug, c in tenant_costs],
        "totals_cost": cost_text(cost_sum(c for _, c in tenant_costs)),
        "filtered": filtered,
        "tenants": list(
            journal_selectors.tenants_for_user(request.user).values_list("slug", flat=True)
        ),
        "activities": session_reads.ACTIVITY_LABELS,
        "page": page,
        "rows": rows,
        "totals": session_reads.session_totals(sessions) if page.paginator.count else None,
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(
        request, partial(request, "ledger_app/session_list.html", "session-table"), context
    )


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
    """One session: its lanes and branches (revision, folds, reviews, fallbacks, folds with
    rejections, failed attempts), the failed fold attempts with their reason, a token chart
    with fold points (``?journal=lane/branch``; ``?scale=linear``, default logarithmic),
    annotations, the export link, and the audit-log link for the tenant's admins only."""
    s = journal_selectors.get_session_for_user(request.user, tenant, session)
    journals = session_reads.session_journals(s)
    chosen = _chart_journal(request, journals)
    scale = "linear" if request.GET.get("scale") == "linear" else "log"
    chart = None
    if chosen is not None:
        folds = session_reads.fold_points(chosen)
        chart = token_chart(
            journal_selectors.token_buckets(chosen),
            [
                FoldPoint(f["number"], f["seq"], f["ledger_active"], f["kind"], f["outcome"])
                for f in folds
            ],
            head_seq=chosen.head_seq,
            scale=scale,
        )
    failures = session_reads.failure_summary(s, journals)
    annotations = list(s.annotations.select_related("author").order_by("-created_at", "-pk")[:50])
    context = {
        "session": s,
        "tenant": s.tenant,
        "journals": journals,
        "chosen": chosen,
        "chart": chart,
        "scale": scale,
        "failures": failures,
        "may_read_audit": journal_selectors.may_read_audit_log(request.user, s.tenant),
        "may_export": journal_selectors.may_export(request.user, s.tenant),
        "annotations": annotations,
        # computed from the provider-reported usage and LEDGER_MODEL_PRICES ("": no call)
        "cost_text": cost_text(journal_selectors.session_costs([s]).get(s.pk), places=4),
        "verdicts": [("good", "good compaction example"), ("bad", "bad compaction example")],
        "meta": json.dumps(s.meta_dict, indent=2, ensure_ascii=False, sort_keys=True),
        "export_url": reverse("ledger:export", args=[s.tenant.slug, s.key]),
        "annotate_url": reverse("journal:annotate", args=[s.tenant.slug, s.key]),
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(request, "ledger_app/session.html", context)
