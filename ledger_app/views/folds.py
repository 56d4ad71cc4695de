"""The fold pages: history, one fold (manifest, delta, verdicts, loss), the diff between two
folds, the verifier page (proposals and both verdicts) and a fold's invariants panel."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from journal_app import selectors as journal_selectors
from journal_app.views import HtmxHttpRequest, is_panel, render_panel, scope_kwargs
from ledger_app import selectors
from ledger_app.context_service import ContextError, fold_invariants
from ledger_app.diff import state_diff
from ledger_app.selectors import presenters, ui
from ledger_app.services.integrity import ledger_warnings
from ledger_app.views.common import FALLBACK_NOTICE, partial, scope_context

FOLDS_PER_PAGE = 50
DIFF_PER_PAGE = 100
FAILED_ATTEMPTS_SHOWN = 10


def _writer_label(manifest: dict[str, Any]) -> str:
    writer = manifest.get("writer")
    return str(writer.get("label", "")) if isinstance(writer, dict) else ""


@login_required
def fold_list(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """Every fold of the scope, 50 per page: range, outcome, writer, verifier, counts
    (``ops_rejected`` counts the reducer's rejections and the verifier's rejections of the
    proposal and repair), tokens; the failed attempts (no fold stored) with their reason; and
    a form comparing any two folds. Same rows as ``GET .../folds``.

    ``?show=rejections|fallbacks|failures`` (:data:`ledger_app.selectors.ui.FOLD_SHOWS`)
    narrows the list; an htmx request gets ``#fold-list``.
    """
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    show = request.GET.get("show", "")
    if show not in ui.FOLD_SHOWS:
        show = ""
    numbers = list(selectors.fold_numbers(journal))
    rows = ui.folds_shown(selectors.fold_rows(journal), show)
    page = Paginator(rows, FOLDS_PER_PAGE).get_page(request.GET.get("page") or "1")
    failed = selectors.failed_attempts(
        journal, limit=None if show == "failures" else FAILED_ATTEMPTS_SHOWN
    )
    context = {
        **scope_context(journal),
        "folds": [presenters.fold_out(f) for f in page.object_list],
        "page": page,
        "numbers": numbers,
        "show": show,
        "shows": ui.FOLD_SHOWS,
        "failed": [presenters.attempt_out(a) for a in failed],
        "compare_url": reverse("ledger:fold_compare", kwargs=scope_kwargs(journal)),
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(request, partial(request, "ledger_app/folds.html", "fold-list"), context)


@login_required
def fold_detail(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str, number: int
) -> HttpResponse:
    """One fold: its manifest, its loss report and every op of its delta with verdict and
    reason (rejections first in the summary). An htmx request targeting ``#side-panel`` gets
    the ``#panel`` region."""
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    fold = selectors.fold_get(journal, number)
    delta = fold.delta_dict
    known = selectors.entries_known(journal, presenters.delta_hashes(delta))
    rows = presenters.op_rows(delta, known, selectors.fold_reviews(fold))
    counts = {s: sum(1 for r in rows if r.status == s) for s in ("accepted", "rejected", "pending")}
    neighbours = selectors.fold_neighbours(journal, number)
    kwargs = scope_kwargs(journal)
    covered = fold.manifest.get("covered")
    context = {
        **scope_context(journal),
        "verify_problems": ledger_warnings(journal=journal),
        "fold": fold,
        "summary": presenters.fold_out(fold),
        "manifest": selectors.manifest_for_display(fold.manifest),
        "covered_count": covered.get("entries") if isinstance(covered, dict) else None,
        "writer_label": _writer_label(fold.manifest),
        "note": fold.manifest.get("note", ""),
        "loss": presenters.loss_out(fold),
        "rows": rows,
        "rejected": [r for r in rows if r.status == "rejected"],
        "counts": counts,
        "previous_number": number - 1 if number - 1 in neighbours else None,
        "next_number": number + 1 if number + 1 in neighbours else None,
        "fallback_notice": FALLBACK_NOTICE,
        "verifier_url": reverse("ledger:verdicts", kwargs={**kwargs, "number": fold.number}),
        "invariants_url": reverse(
            "ledger:fold_invariants", kwargs={**kwargs, "number": fold.number}
        ),
        "full_url": reverse("ledger:fold", kwargs={**kwargs, "number": fold.number}),
        "permalink": request.build_absolute_uri(
            reverse("ledger:fold", kwargs={**kwargs, "number": fold.number})
        ),
    }
    if is_panel(request):
        return render_panel(request, "ledger_app/fold.html", context)
    return render(request, "ledger_app/fold.html", context)


@login_required
def fold_compare(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The compare form's target: redirect ``?a=N&b=M`` to the diff's permalink."""
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    try:
        a, b = int(request.GET.get("a", "")), int(request.GET.get("b", ""))
    except ValueError:
        messages.error(request, "Pick two folds to compare.")
        return redirect("ledger:folds", **scope_kwargs(journal))
    return redirect("ledger:fold_diff", **scope_kwargs(journal), a=a, b=b)


@login_required
def fold_diff(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str, a: int, b: int
) -> HttpResponse:
    """The ledger's difference from the state after fold ``a`` to the state after fold ``b``:
    facts added, removed (evicted) and changed (a word diff of the text, support hashes added
    and removed, other fields before and after), 100 per page, with the fold each fact was born
    in (``origin_fold``). Fold 0 is the empty ledger before the first fold. ``?status=added``,
    ``changed`` or ``removed`` narrows it; an htmx request gets ``#diff-view``."""
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    folds = {f.number: f for f in selectors.fold_choices(journal)}
    for n in (a, b):
        if n != 0 and n not in folds:
            raise Http404(f"no fold {n}")
    status = request.GET.get("status", "")
    if status not in ui.DIFF_STATUSES:
        status = ""
    diff = state_diff(selectors.state_at(folds.get(a)), selectors.state_at(folds.get(b)))
    shown = [c for c in diff.changes if not status or c.status == status]
    page = Paginator(shown, DIFF_PER_PAGE).get_page(request.GET.get("page") or "1")
    changes = list(page.object_list)
    fields = {id(c): ui.field_rows(c.changes) for c in changes}
    known = selectors.entries_known(journal, presenters.support_hashes(c.fact for c in changes))
    rows = [
        {
            "change": c,
            "fields": fields[id(c)],
            "support": presenters.support_links(c.fact, known),
            "dom_id": presenters.fact_dom_id(c.fact_id),
        }
        for c in changes
    ]
    kwargs = scope_kwargs(journal)
    here = reverse("ledger:fold_diff", kwargs={**kwargs, "a": a, "b": b})
    context = {
        **scope_context(journal),
        "a": a,
        "b": b,
        "fold_a": folds.get(a),
        "fold_b": folds.get(b),
        "diff": diff,
        "counts": diff.counts,
        "status": status,
        "statuses": ui.DIFF_STATUSES,
        "rows": rows,
        "page": page,
        "numbers": sorted(folds),
        "diff_url": here,
        "compare_url": reverse("ledger:fold_compare", kwargs=kwargs),
        "swap_url": reverse("ledger:fold_diff", kwargs={**kwargs, "a": b, "b": a}),
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(request, partial(request, "ledger_app/diff.html", "diff-view"), context)


@login_required
def fold_verdicts(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str, number: int
) -> HttpResponse:
    """The verifier page of one fold (DESIGN.md 5.3 and 8, "verifier verdicts and rejections").

    For each :class:`~ledger_app.models.FoldAttempt`: each writer answer (proposal, the one
    repair, the fallback) with each proposed item's claim, cited evidence (links to the raw
    entries, with the quote when there is one) and every judge's two verdicts (entailment and
    temporal) with reasons; the fallback reason and note. Then the reducer's verdicts on the
    fold's delta, rejected ops highlighted: for mechanical folds that is all there is, and
    the page says which writer ran. Bounded queries (no per-item query). The same data is
    ``GET .../folds/{n}/proposals``.
    """
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    fold = selectors.fold_get(journal, number)
    attempts, proposals, verdicts = selectors.fold_attempts(journal, fold)
    delta = fold.delta_dict
    known = selectors.entries_known(
        journal, presenters.attempt_hashes(proposals, verdicts) + presenters.delta_hashes(delta)
    )
    rows_attempts = presenters.attempt_rows(attempts, proposals, verdicts, known)
    rows = presenters.op_rows(delta, known)
    kwargs = scope_kwargs(journal)
    context = {
        **scope_context(journal),
        "fold": fold,
        "attempts": rows_attempts,
        "judged": any(p.items for a in rows_attempts for p in a.proposals),
        "rows": rows,
        "rejected": [r for r in rows if r.status == "rejected"],
        "writer_label": _writer_label(fold.manifest),
        "note": fold.manifest.get("note", ""),
        "fallback_notice": FALLBACK_NOTICE,
        "fold_url": reverse("ledger:fold", kwargs={**kwargs, "number": fold.number}),
        "permalink": request.build_absolute_uri(
            reverse("ledger:verdicts", kwargs={**kwargs, "number": fold.number})
        ),
    }
    return render(request, "ledger_app/verdicts.html", context)


@login_required
def fold_invariants_panel(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str, number: int
) -> HttpResponse:
    """The invariants of the context as of one fold (:func:`fold_invariants`, read-only; the
    budgets are the settings' defaults, as on the context page). Same as
    ``GET .../folds/{n}/invariants``.

    The fold page loads it with htmx (``#invariants``) so the fold page itself stays a
    fixed number of queries; without JavaScript its link opens this page whole.
    """
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    fold = selectors.fold_get(journal, number)
    error = ""
    panel: dict[str, Any] = {}
    try:
        panel = fold_invariants(fold=fold)
    except ContextError as exc:
        error = str(exc)
    kwargs = scope_kwargs(journal)
    context = {
        **scope_context(journal),
        "fold": fold,
        "panel": panel,
        "error": error,
        "reports": presenters.reports({k: panel[k] for k in ("model", "frontend") if k in panel}),
        "fold_url": reverse("ledger:fold", kwargs={**kwargs, "number": fold.number}),
        "permalink": request.build_absolute_uri(
            reverse("ledger:fold_invariants", kwargs={**kwargs, "number": fold.number})
        ),
    }
    return render(request, partial(request, "ledger_app/invariants.html", "invariants"), context)
