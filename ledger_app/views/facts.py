"""The facts pages: the ledger state after any fold, filtered, and one fact with its history."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from audit_app.selectors import comment_counts
from journal_app import selectors as journal_selectors
from journal_app.views.htmx import HtmxHttpRequest, partial
from journal_app.views.panel import is_panel, render_panel
from journal_app.views.scope_urls import scope_kwargs
from ledger_app import selectors
from ledger_app.filters import FACT_FIELDS, describe, error_parts
from ledger_app.selectors import presenters
from ledger_app.services.full_check import ledger_warnings
from ledger_app.views.folds import FALLBACK_NOTICE
from ledger_app.views.scope import scope_context

FACTS_PER_PAGE = 100


def _fold_number(request: HttpRequest) -> int | None:
    """``?fold=N`` as a number, ``None`` when absent; ``Http404`` when not a number."""
    value = request.GET.get("fold", "")
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise Http404("fold must be a number") from None


@login_required
def facts(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The ledger state after fold ``?fold=N`` (default: latest), filterable, 100 per page.

    Filters are GET parameters ``category``, ``priority``, ``lifecycle``, ``confidence``
    (unknown values are ignored) and ``q``, a filter expression
    (:data:`ledger_app.filters.FACT_FIELDS`; a bad one is shown with its position and
    filters nothing): :func:`ledger_app.selectors.presenters.facts_select`, the same as
    ``GET /api/v1/.../ledger``. An htmx request gets only ``#fact-table``.
    """
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    folds = selectors.fold_choices(journal)
    number = _fold_number(request)
    selected = folds[-1] if folds else None
    if number is not None:
        selected = next((f for f in folds if f.number == number), None)
        if selected is None:
            raise Http404("no such fold")
    selection = selectors.facts_at(
        journal,
        selected,
        chosen={name: request.GET.get(name, "") for name in presenters.FACT_FILTERS},
        q=request.GET.get("q", ""),
    )
    page = Paginator(selection.shown, FACTS_PER_PAGE).get_page(request.GET.get("page") or "1")
    shown = list(page.object_list)
    known = selectors.entries_known(journal, presenters.support_hashes(shown))
    rows = presenters.fact_rows(shown, known)
    counts = comment_counts(journal=journal)
    kwargs = scope_kwargs(journal)
    fact_base = reverse("ledger:fact", kwargs={**kwargs, "fact_id": "_"})[:-2]
    for r in rows:
        fact_id = str(r.fact.get("id", ""))
        r.comments = counts.get(fact_id, 0)
        r.url = fact_base + quote(fact_id, safe=":@!$&'()*+,;=-._~") + "/"
    chosen, q, error = selection.chosen, selection.q, selection.error
    permalink_query = {
        **chosen,
        **({"q": q} if q else {}),
        **({"fold": selected.number} if selected else {}),
    }
    context = {
        **scope_context(journal),
        "verify": ledger_warnings(journal=journal),
        "folds": folds,
        "selected": selected,
        "latest": folds[-1] if folds else None,
        "rows": rows,
        "page": page,
        "matched": len(selection.shown),
        "total": selection.total,
        "filters": [
            {"name": name, "choices": allowed, "value": chosen.get(name, "")}
            for name, allowed in presenters.FACT_FILTERS.items()
        ],
        "chosen": chosen,
        "q": q,
        "error": error,
        "error_parts": error_parts(q, error) if error else None,
        "fields": describe(FACT_FIELDS),
        "fallback_notice": FALLBACK_NOTICE,
        "here": request.get_full_path(),
        "permalink": request.build_absolute_uri(
            reverse("ledger:facts", kwargs=kwargs)
            + ("?" + urlencode(permalink_query) if permalink_query else "")
        ),
    }
    return render(request, partial(request, "ledger_app/facts.html", "fact-table"), context)


@login_required
def fact_detail(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str, fact_id: str
) -> HttpResponse:
    """One fact: its version after ``?fold=N`` (default latest), support, history (every op
    of every delta about it, with verdicts), retirement requests, and comments. An htmx
    request targeting ``#side-panel`` gets the ``#panel`` region."""
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    folds = selectors.fold_choices(journal)
    number = _fold_number(request)
    selected = folds[-1] if folds else None
    if number is not None:
        selected = next((f for f in folds if f.number == number), None)
    if selected is None:
        raise Http404("no such fold")
    fact = selectors.fact_at(journal, selected, fact_id)
    history = presenters.fact_events(selectors.fact_deltas(journal, fact_id), fact_id)
    if fact is None and not history:
        raise Http404("no such fact in this ledger")
    known = selectors.entries_known(journal, presenters.support_hashes([fact] if fact else []))
    here = request.get_full_path()
    context = {
        **scope_context(journal),
        "fact_id": fact_id,
        "fact": presenters.fact_shown(fact) if fact else fact,
        "selected": selected,
        "support": presenters.support_links(fact, known),
        "history": history,
        "retirements": list(
            reversed(
                selectors.retirements_for_tenant(
                    journal.session.tenant, journal=journal, fact_id=fact_id
                )
            )
        ),
        "comments": selectors.fact_comments(journal, fact_id),
        "dom_id": presenters.fact_dom_id(fact_id),
        "here": here,
        "open": True,
        "full_url": here,
        "permalink": request.build_absolute_uri(here),
    }
    if is_panel(request):
        return render_panel(request, "ledger_app/fact.html", context)
    return render(request, "ledger_app/fact.html", context)
