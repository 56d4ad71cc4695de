"""Operator UI pages of recovery (DESIGN.md sections 7 and 8): a journal's receipts, one receipt.

Thin function views. The scope is resolved by :func:`journal_app.selectors.get_journal_for_user`
(tenant filter, ``Http404``); a receipt is looked up inside that journal only, so another
tenant's receipt (or another scope's) answers 404 too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import F
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from journal_app import selectors
from journal_app.hashing import display
from journal_app.models import Journal
from journal_app.views import scope_kwargs
from recovery_app.models import Receipt
from recovery_app.snapshot import CHECKS

RECEIPTS_PER_PAGE = 25
#: the order of a read's checks on the page (recovery_app.snapshot.verify_read)
CHECK_ORDER = ("exists", *CHECKS)


def _scope_context(journal: Journal) -> dict[str, Any]:
    kwargs = scope_kwargs(journal)
    return {
        "journal": journal,
        "session": journal.session,
        "tenant": journal.session.tenant,
        "scope_kwargs": kwargs,
        "receipts_url": reverse("recovery:receipts", kwargs=kwargs),
        "scope_label": "/".join(kwargs.values()),
    }


def _entry_url(digest: str) -> str:
    return reverse("journal:entry", args=[display(digest)]) if digest else ""


@login_required
def receipt_list(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The recovery receipts of one journal, newest first, 25 per page (``?outcome=`` narrows).

    One row per attempt: when, kind, trigger reason, snapshot revision, queries, reads,
    sources, tokens, seconds, outcome. A fixed number of queries whatever the count (the
    claims and recovered ops are not read here).
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    outcome = request.GET.get("outcome", "")
    qs = (
        Receipt.objects.filter(journal=journal)
        .annotate(fold_number=F("fold__number"), entered_number=F("entered_fold__number"))
        .defer("claims", "rejected_claims", "recovered", "verdicts", "question")
        .order_by("-created_at", "-pk")
    )
    if outcome in Receipt.Outcome.values:
        qs = qs.filter(outcome=outcome)
    else:
        outcome = ""
    page = Paginator(qs, RECEIPTS_PER_PAGE).get_page(request.GET.get("page") or "1")
    context = {
        **_scope_context(journal),
        "page": page,
        "receipts": list(page.object_list),
        "outcome": outcome,
        "outcomes": Receipt.Outcome.values,
        "permalink": request.build_absolute_uri(
            reverse("recovery:receipts", kwargs=scope_kwargs(journal))
            + ("?" + urlencode({"outcome": outcome}) if outcome else "")
        ),
    }
    return render(request, "recovery_app/receipts.html", context)


@dataclass
class ReadRow:
    """One read of a receipt: the entry, each check ok or failed, and the verdict."""

    line: dict[str, Any]
    url: str
    checks: list[tuple[str, bool]]

    @property
    def ok(self) -> bool:
        return bool(self.line.get("ok"))

    @property
    def failed(self) -> list[str]:
        failed = self.line.get("failed")
        return [str(f) for f in failed] if isinstance(failed, list) else []


def _read_rows(reads: list[Any]) -> list[ReadRow]:
    rows = []
    for line in reads:
        if not isinstance(line, dict):
            continue
        checks = line.get("checks") if isinstance(line.get("checks"), dict) else {}
        failed = line.get("failed") if isinstance(line.get("failed"), list) else []
        names = [c for c in CHECK_ORDER if c in checks or c in failed]
        names += [c for c in [*checks, *failed] if c not in names]
        ordered = [(c, bool(checks.get(c, c not in failed)) and c not in failed) for c in names]
        rows.append(ReadRow(line, _entry_url(str(line.get("entry", ""))), ordered))
    return rows


@login_required
def receipt_detail(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str, receipt: int
) -> HttpResponse:
    """One recovery receipt: trigger, snapshot (scope, revision, head hash), each query with
    its leads, each read with every check (the failed ones named, with the reason), sources,
    claims and the ops proposed to the ledger, budget against use (tokens, seconds), outcome.
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    r = (
        Receipt.objects.filter(journal=journal, pk=receipt)
        .select_related("fold", "entered_fold")
        .defer("fold__delta", "fold__state", "entered_fold__delta", "entered_fold__state")
        .first()
    )
    if r is None:
        raise Http404("no such receipt in this journal")
    queries = [
        {
            **q,
            "leads": [
                {**lead, "url": _entry_url(str(lead.get("entry", "")))}
                for lead in q.get("leads", [])
                if isinstance(lead, dict)
            ],
        }
        for q in r.queries
        if isinstance(q, dict)
    ]
    sources = [
        {**s, "url": _entry_url(str(s.get("entry", "")))} for s in r.sources if isinstance(s, dict)
    ]
    budget = r.budget if isinstance(r.budget, dict) else {}
    usage = r.usage if isinstance(r.usage, dict) else {}
    limits = [
        (name, usage.get(name), budget.get(name)) for name in dict.fromkeys([*budget, *usage])
    ]
    kwargs = scope_kwargs(journal)
    context = {
        **_scope_context(journal),
        "r": r,
        "queries": queries,
        "reads": _read_rows(r.reads if isinstance(r.reads, list) else []),
        "sources": sources,
        "limits": limits,
        "fold_url": reverse("ledger:fold", kwargs={**kwargs, "number": r.fold.number})
        if r.fold
        else "",
        "entered_url": reverse("ledger:fold", kwargs={**kwargs, "number": r.entered_fold.number})
        if r.entered_fold
        else "",
        "permalink": request.build_absolute_uri(
            reverse("recovery:receipt", kwargs={**kwargs, "receipt": r.pk})
        ),
    }
    return render(request, "recovery_app/receipt.html", context)
