"""The dashboard across a tenant's sessions: tokens, computed cost, folds, fallbacks, failed
fold attempts and blockers, as server-rendered bar charts and a sortable table."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from journal_app import selectors as journal_selectors
from ledger_app.bars import bar_chart
from ledger_app.selectors.dashboard import DASHBOARD_SORTS, SessionRow, tenant_dashboard
from ledger_app.selectors.sessions import ACTIVITY_DAYS, ACTIVITY_LABELS


def _link(row: SessionRow) -> str:
    return reverse("journal:session", args=[row.session.tenant.slug, row.session.key])


def _label(row: SessionRow, tenant: str) -> str:
    return row.session.key if tenant else f"{row.session.tenant.slug}/{row.session.key}"


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """``/ledger/dashboard/?tenant=&activity=&sort=``: every filter is in the URL, so the
    page's address is its saved view (the Permalink). Reads
    :func:`ledger_app.selectors.dashboard.tenant_dashboard`."""
    tenant = request.GET.get("tenant", "").strip()
    activity = request.GET.get("activity", "")
    if activity not in ACTIVITY_DAYS:
        activity = ""
    sort = request.GET.get("sort", "tokens")
    if sort not in DASHBOARD_SORTS:
        sort = "tokens"
    board = tenant_dashboard(user=request.user, tenant=tenant, activity=activity, sort=sort)

    def counted(key: str) -> Any:
        return lambda r: f"{getattr(r, key):,}"

    # (title, the value a bar is drawn from, the words shown beside it)
    metrics = [
        ("Tokens (ours)", "tokens", counted("tokens")),
        ("Folds", "folds", counted("folds")),
        ("Fallback folds (mechanical facts)", "fallbacks", counted("fallbacks")),
        ("Failed fold attempts", "failed", counted("failed")),
        ("Active blockers", "blockers", counted("blockers")),
    ]
    if board.priced:  # a partial cost says so, as the table does ("$1.23 + 4 unpriced calls")
        metrics.insert(1, ("Cost (computed, USD)", "cost", lambda r: r.cost_short))
    charts = [
        bar_chart(
            title,
            [
                (_label(r, tenant), getattr(r, key), shown(r), _link(r))
                for r in board.rows
                if getattr(r, key)
            ],
        )
        for title, key, shown in metrics
    ]
    context = {
        "board": board,
        "rows": [(r, _link(r)) for r in board.rows],
        "charts": charts,
        "tenant": tenant,
        "activity": activity,
        "sort": sort,
        "sorts": {
            "tokens": "most tokens",
            **({"cost": "highest cost (computed)"} if board.priced else {}),
            "folds": "most folds",
            "fallbacks": "most fallbacks",
            "failed": "most failed attempts",
            "blockers": "most blockers",
        },
        "tenants": list(
            journal_selectors.tenants_for_user(request.user).values_list("slug", flat=True)
        ),
        "activities": ACTIVITY_LABELS,
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(request, "ledger_app/dashboard.html", context)
