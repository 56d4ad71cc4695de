"""Operator UI pages of recovery (docs/design.md sections 7 and 8): a journal's receipts, one receipt.

Thin function views. The scope is resolved by :func:`journal_app.selectors.get_journal_for_user`
(tenant filter, ``Http404``); a receipt is looked up inside that journal only, so another
tenant's receipt (or another scope's) answers 404 too.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from journal_app import selectors
from journal_app.hashing import display
from journal_app.models import Journal
from journal_app.views.htmx import is_fragment_request
from journal_app.views.scope_urls import scope_kwargs
from ledger_app.views.scope import scope_context
from recovery_app import selectors as recovery_selectors
from recovery_app.models import Receipt

RECEIPTS_PER_PAGE = 25


def _scope_context(journal: Journal) -> dict[str, Any]:
    """The ledger's scope links (:func:`ledger_app.views.scope.scope_context`) and the
    receipts list's own."""
    shared = scope_context(journal)
    kwargs = shared["scope_kwargs"]
    return {
        **shared,
        "receipts_url": reverse("recovery:receipts", kwargs=kwargs),
        "scope_label": "/".join(kwargs.values()),
    }


def _entry_url(digest: str) -> str:
    return reverse("journal:entry", args=[display(digest)]) if digest else ""


@login_required
def receipt_list(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The recovery receipts of one journal, newest first, 25 per page (``?outcome=`` narrows;
    by default the attempts whose trigger fired, ``?outcome=all`` for every one).

    One row per attempt: when, kind, trigger reason, snapshot revision, queries, reads,
    sources, tokens, seconds, outcome. A fixed number of queries whatever the count (the
    claims and recovered ops are not read here). The same rows as
    ``GET /api/v1/.../recovery/receipts`` (:func:`recovery_app.selectors.receipts_for_journal`).
    An htmx request (the filter, the pages) gets ``#receipt-list``.
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    outcome = request.GET.get("outcome", "") or recovery_selectors.TRIGGERED
    if outcome not in Receipt.Outcome.values and outcome != "all":
        outcome = recovery_selectors.TRIGGERED
    qs = recovery_selectors.receipts_for_journal(journal, outcome=outcome)
    page = Paginator(qs, RECEIPTS_PER_PAGE).get_page(request.GET.get("page") or "1")
    context = {
        **_scope_context(journal),
        "page": page,
        "receipts": list(page.object_list),
        "outcome": outcome,
        "outcomes": Receipt.Outcome.values,
        "any_receipt": bool(page.paginator.count)
        or recovery_selectors.receipts_for_journal(journal).exists(),
        "permalink": request.build_absolute_uri(
            reverse("recovery:receipts", kwargs=scope_kwargs(journal))
            + ("?" + urlencode({"outcome": outcome}) if outcome != "triggered" else "")
        ),
    }
    template = "recovery_app/receipts.html"
    if is_fragment_request(request):
        template += "#receipt-list"
    return render(request, template, context)


@login_required
def receipt_detail(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str, receipt: int
) -> HttpResponse:
    """One recovery receipt: trigger, snapshot (scope, revision, head hash), each query with
    its leads, each read with every check (the failed ones named, with the reason), sources,
    claims and the ops proposed to the ledger, budget against use (tokens, seconds), outcome.
    Shaped by :func:`recovery_app.selectors.receipt_detail`, as
    ``GET /api/v1/.../recovery/receipts/{id}``.
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    r = recovery_selectors.receipt_get(journal, receipt)
    detail = recovery_selectors.receipt_detail(r, _entry_url)
    raw_reads = [line for line in r.reads if isinstance(line, dict)]
    raw_sources = [s for s in r.sources if isinstance(s, dict)]
    kwargs = scope_kwargs(journal)
    fold_number = getattr(r, "fold_number", None)
    entered_number = getattr(r, "entered_number", None)
    context = {
        **_scope_context(journal),
        "r": r,
        "queries": detail["queries"],
        "reads": [
            {
                "line": line,
                "url": read["url"],
                "checks": [(c["check"], c["ok"]) for c in read["checks"]],
                "ok": read["ok"],
                "failed": read["failed"],
            }
            for line, read in zip(raw_reads, detail["reads"], strict=True)
        ],
        "sources": [
            {**raw, "url": shown["url"]}
            for raw, shown in zip(raw_sources, detail["sources"], strict=True)
        ],
        "limits": [(x["name"], x["used"], x["limit"]) for x in detail["limits"]],
        "fold_url": reverse("ledger:fold", kwargs={**kwargs, "number": fold_number})
        if fold_number
        else "",
        "entered_url": reverse("ledger:fold", kwargs={**kwargs, "number": entered_number})
        if entered_number
        else "",
        "permalink": request.build_absolute_uri(
            reverse("recovery:receipt", kwargs={**kwargs, "receipt": r.pk})
        ),
    }
    return render(request, "recovery_app/receipt.html", context)
