"""The search page: entry content across a tenant's sessions (README "The UI", Search).

Thin: the tenant is one of the user's (:func:`journal_app.selectors.tenants_for_user`, else
404); the hits come from :func:`recovery_app.tenant_search.tenant_search`, whose snippets are
privacy-filtered like every other page.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from journal_app import selectors
from journal_app.hashing import display
from recovery_app.lexical import QueryInvalid
from recovery_app.tenant_search import PER_PAGE, tenant_search


@login_required
def content_search(request: HttpRequest) -> HttpResponse:
    """``/recovery/search/?tenant=&q=&session=&page=``: the filter state is the URL (its
    Permalink is the saved view). Without ``tenant``, the user's only tenant, or a choice."""
    tenants = list(selectors.tenants_for_user(request.user).order_by("slug"))
    slug = request.GET.get("tenant", "").strip()
    if not slug and len(tenants) == 1:
        slug = tenants[0].slug
    tenant = next((t for t in tenants if t.slug == slug), None)
    if slug and tenant is None:
        raise Http404("no such tenant")
    q = request.GET.get("q", "").strip()
    session_key = request.GET.get("session", "").strip()
    try:
        page = int(request.GET.get("page") or 1)
    except ValueError:
        page = 1
    result, error = None, ""
    if tenant is not None and q:
        try:
            result = tenant_search(tenant=tenant, raw_query=q, page=page, session_key=session_key)
        except QueryInvalid as exc:
            error = str(exc)
    hits = []
    for h in result.hits if result else []:
        j = h.journal
        hits.append(
            {
                "hit": h,
                "scope": f"{j.session.key}/{j.lane}/{j.branch}",
                "entry_url": reverse("journal:entry", args=[display(h.entry.entry_hash)]),
                "timeline_url": reverse(
                    "journal:timeline", args=[tenant.slug, j.session.key, j.lane, j.branch]
                )
                + f"?seq={h.entry.seq}",
            }
        )
    context = {
        "tenants": [t.slug for t in tenants],
        "tenant": slug,
        "q": q,
        "session_key": session_key,
        "result": result,
        "hits": hits,
        "error": error,
        "first_rank": (result.page - 1) * PER_PAGE + 1 if result else 0,
        "last_rank": (result.page - 1) * PER_PAGE + len(hits) if result else 0,
        "permalink": request.build_absolute_uri(request.get_full_path()) if q else "",
    }
    return render(request, "recovery_app/search.html", context, status=400 if error else 200)
