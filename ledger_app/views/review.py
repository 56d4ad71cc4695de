"""The P0 retirement review queue and one request's page (docs/design.md 5.2 and 8).

A decision goes through :func:`ledger_app.services.retirement_review`, the service the API
calls too: the same permission, comment rule, audit event and status codes (403, 400, 409,
422) on both.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from audit_app.roles import tenant_role
from journal_app import selectors as journal_selectors
from journal_app.views.htmx import HtmxHttpRequest, is_fragment_request, partial
from journal_app.views.scope_urls import scope_kwargs
from ledger_app import selectors
from ledger_app.models import RetirementRequest
from ledger_app.selectors import presenters
from ledger_app.services import ReviewError, ReviewForbidden, can_review, retirement_review
from ledger_app.views.scope import scope_context

REVIEWS_PER_PAGE = 25


@login_required
def review_list(request: HttpRequest) -> HttpResponse:
    """The P0 retirement review queue of the user's tenants: pending first, 25 per page.

    Every member sees the queue; only reviewers and admins can decide (enforced on POST).
    """
    tenant = request.GET.get("tenant", "")
    status = request.GET.get("status", "pending")
    if status not in (*RetirementRequest.Status.values, "all"):
        status = "pending"
    qs = selectors.retirements_for_user(request.user, tenant=tenant, status=status)
    page = Paginator(qs, REVIEWS_PER_PAGE).get_page(request.GET.get("page") or "1")
    context = {
        "page": page,
        "requests": list(page.object_list),
        "tenant": tenant,
        "status": status,
        "statuses": [*RetirementRequest.Status.values, "all"],
        "tenants": list(
            journal_selectors.tenants_for_user(request.user).values_list("slug", flat=True)
        ),
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(request, "ledger_app/reviews.html", context)


def _review_context(request: HttpRequest, req: RetirementRequest) -> dict[str, Any]:
    journal = req.journal
    evidence = presenters.evidence_fact(h for h in req.evidence if isinstance(h, str))
    known = selectors.entries_known(journal, presenters.support_hashes([evidence]))
    return {
        **scope_context(journal),
        "req": req,
        "evidence": presenters.support_links(evidence, known),
        "role": tenant_role(request.user, journal.session.tenant_id),
        "may_decide": can_review(request.user, journal),
        "deciders": selectors.retirement_deciders(journal.session.tenant_id),
        "fact_url": reverse("ledger:facts", kwargs=scope_kwargs(journal))
        + "?"
        + urlencode({"q": f'id:"{req.fact_id}"'}),
        "events": selectors.retirement_events(req),
        "permalink": request.build_absolute_uri(reverse("ledger:review", args=[req.pk])),
    }


@login_required
@require_http_methods(["GET", "POST"])
def review_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One retirement request; POST ``decision`` (approve/refuse) and ``comment`` decides it.

    The POST is CSRF-protected and calls :func:`retirement_review`; a refusal answers with
    the error's status, the same as the API's: 403 (not a reviewer of the tenant; a normal
    request gets Django's 403 page, an htmx one the fragment), 400 (no comment), 422 (no
    such decision), 409 (already decided). A decision records the user and time on the
    request, a review fold in the ledger and an audit event. After a POST a normal request
    is redirected here (PRG); an htmx one gets the ``#review-decision`` fragment.
    """
    req = selectors.retirement_for_user(request.user, pk)
    error = ""
    status_code = 200
    if request.method == "POST":
        decision = request.POST.get("decision", "")
        comment = request.POST.get("comment", "")
        try:
            fold = retirement_review(
                request=req, actor=request.user, decision=decision, comment=comment
            )
        except ReviewForbidden as exc:
            if not is_fragment_request(request):
                raise PermissionDenied(str(exc)) from exc
            error, status_code = f"Refused (403): {exc}. Nothing was changed.", exc.status
        except ReviewError as exc:
            error, status_code = str(exc), exc.status
        else:
            if not is_fragment_request(request):
                verb = "approved" if decision == "approve" else "refused"
                messages.success(
                    request,
                    f"Retirement of {req.fact_id} {verb}; review fold {fold.number} recorded.",
                )
                return redirect("ledger:review", pk=req.pk)
            req = selectors.retirement_for_user(request.user, pk)
    context = {
        **_review_context(request, req),
        "error": error,
        "comment": request.POST.get("comment", "") if error else "",
    }
    return render(
        request,
        partial(request, "ledger_app/review.html", "review-decision"),
        context,
        status=status_code,
    )
