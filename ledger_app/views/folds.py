"""The fold pages: history, one fold (manifest, delta, verdicts, loss), the diff between two
folds, the verifier page (proposals and both verdicts) and a fold's invariants panel."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from journal_app import selectors as journal_selectors
from journal_app.views.htmx import HtmxHttpRequest, partial
from journal_app.views.panel import is_panel, render_panel
from journal_app.views.scope_urls import scope_kwargs
from ledger_app import selectors
from ledger_app.model_writer import FALLBACK_NOTE, is_model_writer
from ledger_app.runs import BrokerUnavailable, task_run_enqueue
from ledger_app.selectors import presenters, ui
from ledger_app.services.context import fold_invariants
from ledger_app.services.context_records import ContextError
from ledger_app.services.full_check import ledger_warnings
from ledger_app.services.review import can_review
from ledger_app.tasks import fold_journal
from ledger_app.views.scope import scope_context

#: what the fold and facts pages say of a fallback fold (the writer's model was unreachable)
FALLBACK_NOTICE = "mechanical facts only: " + FALLBACK_NOTE
FOLDS_PER_PAGE = 50
DIFF_PER_PAGE = 100
#: ops (fold page, verifier page) and proposed items (verifier page) a page lists
OPS_PER_PAGE = 100
#: rejected ops the fold page's summary names (each linked to its page)
REJECTED_SHOWN = 100
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
    journal, role = journal_selectors.get_journal_with_role(
        request.user, tenant, session, lane, branch
    )
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
        "verify": ledger_warnings(journal=journal),
        "folds": [presenters.fold_out(f) for f in page.object_list],
        "page": page,
        "numbers": numbers,
        "show": show,
        "shows": ui.FOLD_SHOWS,
        "failed": [presenters.attempt_out(a) for a in failed],
        "compare_url": reverse("ledger:fold_compare", kwargs=scope_kwargs(journal)),
        "permalink": request.build_absolute_uri(request.get_full_path()),
        # offered by role (no query beyond the journal's); the POST checks the whole rule
        "may_fold": role in journal_selectors.FOLDING_ROLES,
        "fold_now_url": reverse("ledger:fold_now", kwargs=scope_kwargs(journal)),
    }
    return render(request, partial(request, "ledger_app/folds.html", "fold-list"), context)


@login_required
@require_POST
def fold_now(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """POST: queue :func:`ledger_app.tasks.fold_journal` for the scope, as the API's
    ``POST .../folds`` does (same task, same service; reviewers and admins only, 403 else).

    The fold's audit event (``fold.store``) names the UI and the user. In the embedded
    default the fold has run when the redirect to the folds page comes back.
    """
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    if not can_review(request.user, journal):
        raise PermissionDenied("only the tenant's reviewers and admins fold from the page")
    try:
        run = task_run_enqueue(
            task=fold_journal, journal=journal, journal_id=journal.pk, send_now=True
        )
    except BrokerUnavailable as exc:
        messages.error(request, f"The fold was not queued: {exc}")
    else:
        run.refresh_from_db()
        reason = (run.result or {}).get("reason") or f"fold queued (task {run.task_id})"
        messages.success(request, reason)
    return redirect(reverse("ledger:folds", kwargs=scope_kwargs(journal)))


def _ops_page(request: HttpRequest, total: int) -> tuple[Page, slice]:
    """Page ``?page=`` of ``total`` ops (:data:`OPS_PER_PAGE` a page) and its slice."""
    page = Paginator(range(total), OPS_PER_PAGE).get_page(request.GET.get("page") or "1")
    start = (page.number - 1) * OPS_PER_PAGE
    return page, slice(start, start + OPS_PER_PAGE)


def _rejected_shown(verdicts: presenters.OpVerdicts, page: Page) -> list[dict[str, Any]]:
    """The first :data:`REJECTED_SHOWN` rejected ops, each with the page that lists it."""
    return [
        {
            "index": i,
            "op": op,
            "fact_id": fact_id,
            "reason": reason,
            "page": i // OPS_PER_PAGE + 1,
            "here": i // OPS_PER_PAGE + 1 == page.number,
        }
        for i, op, fact_id, reason in verdicts.rejected[:REJECTED_SHOWN]
    ]


@login_required
def fold_detail(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str, number: int
) -> HttpResponse:
    """One fold: its manifest, its loss report and the ops of its delta with verdict and
    reason, :data:`OPS_PER_PAGE` a page (``?page=N``, a count and a permalink per page; the
    rejections summarised first over the whole delta). Queries do not grow with the number
    of ops: only the page's cited entries are read. An htmx request
    targeting ``#side-panel`` gets the ``#panel`` region."""
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    fold = selectors.fold_get(journal, number)
    delta = fold.delta_dict
    verdicts = presenters.op_verdicts(delta)
    page, window = _ops_page(request, verdicts.total)
    known = selectors.entries_known(journal, presenters.delta_hashes(delta, window))
    rows = presenters.op_rows(delta, known, selectors.fold_reviews(fold), window)
    neighbours = selectors.fold_neighbours(journal, number)
    kwargs = scope_kwargs(journal)
    covered = fold.manifest.get("covered")
    full_url = reverse("ledger:fold", kwargs={**kwargs, "number": fold.number})
    context = {
        **scope_context(journal),
        "verify": ledger_warnings(journal=journal),
        "fold": fold,
        "summary": presenters.fold_out(fold),
        "manifest": selectors.manifest_for_display(fold.manifest),
        "covered_count": covered.get("entries") if isinstance(covered, dict) else None,
        "writer_label": _writer_label(fold.manifest),
        "note": fold.manifest.get("note", ""),
        "loss": presenters.loss_out(fold),
        "rows": rows,
        "page": page,
        "ops_total": verdicts.total,
        "rejected": _rejected_shown(verdicts, page),
        "rejected_total": len(verdicts.rejected),
        "counts": verdicts.counts,
        "previous_number": number - 1 if number - 1 in neighbours else None,
        "next_number": number + 1 if number + 1 in neighbours else None,
        "fallback_notice": FALLBACK_NOTICE,
        "verifier_url": reverse("ledger:verdicts", kwargs={**kwargs, "number": fold.number}),
        "invariants_url": reverse(
            "ledger:fold_invariants", kwargs={**kwargs, "number": fold.number}
        ),
        "full_url": full_url,
        "permalink": request.build_absolute_uri(
            full_url + (f"?page={page.number}" if page.number > 1 else "")
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
    and removed, other fields before and after with hashes, folds and facts linked), 100 per
    page with a count, each with the fold its fact was born in. Fold 0 is the empty ledger
    before the first fold. ``?status=added``, ``changed`` or ``removed`` narrows it,
    ``?page=N`` pages it; an htmx request gets ``#diff-view``.

    Read from the stored fact versions (:func:`ledger_app.selectors.diff.fold_diff`): a
    fixed number of queries whatever the size of the ledger or of the diff.
    """
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    numbers = selectors.fold_numbers(journal)
    for n in (a, b):
        if n != 0 and n not in numbers:
            raise Http404(f"no fold {n}")
    status = request.GET.get("status", "")
    if status not in ui.DIFF_STATUSES:
        status = ""
    diff = selectors.fold_diff(journal, a, b, status=status)
    page = Paginator(diff, DIFF_PER_PAGE).get_page(request.GET.get("page") or "1")
    diff_rows = list(page.object_list)
    kwargs = scope_kwargs(journal)
    links = ui.ScopeLinks(kwargs)
    known = selectors.entries_known(
        journal, presenters.support_hashes(r.change.fact for r in diff_rows)
    )
    rows = [
        {
            "change": r.change,
            "born": r.born,
            "born_url": links.fold(r.born).url if r.born else "",
            "fields": ui.field_rows(r.change.changes, links),
            "support": presenters.support_links(r.change.fact, known),
            "dom_id": presenters.fact_dom_id(r.change.fact_id),
        }
        for r in diff_rows
    ]
    here = reverse("ledger:fold_diff", kwargs={**kwargs, "a": a, "b": b})
    context = {
        **scope_context(journal),
        "verify": ledger_warnings(journal=journal),
        "a": a,
        "b": b,
        "diff": diff,
        "counts": diff.counts,
        "status": status,
        "statuses": ui.DIFF_STATUSES,
        "rows": rows,
        "page": page,
        "numbers": numbers,
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
    """The verifier page of one fold (docs/design.md 5.3 and 8, "verifier verdicts and rejections").

    For each :class:`~ledger_app.models.FoldAttempt`: each writer answer (proposal, the one
    repair, the fallback) with each proposed item's claim, cited evidence (links to the raw
    entries, with the quote when there is one) and every judge's two verdicts (entailment and
    temporal) with reasons; the fallback reason and note. Then the reducer's verdicts on the
    fold's delta, rejected ops highlighted: for mechanical folds that is all there is, and
    the page says which writer ran. Proposed items and ops are paginated together,
    :data:`OPS_PER_PAGE` of each a page (``?page=N``, counts and a permalink per page).
    Bounded queries (no per-item query). The same data is
    ``GET .../folds/{n}/proposals``.
    """
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    fold = selectors.fold_get(journal, number)
    attempts, proposals, verdicts = selectors.fold_attempts(journal, fold)
    delta = fold.delta_dict
    op_verdicts = presenters.op_verdicts(delta)
    known = selectors.entries_known(journal, presenters.attempt_hashes(proposals, verdicts))
    rows_attempts = presenters.attempt_rows(attempts, proposals, verdicts, known)
    judged = any(p.items for a in rows_attempts for p in a.proposals)
    n_items = sum(len(p.items) for a in rows_attempts for p in a.proposals)
    page, window = _ops_page(request, max(n_items, op_verdicts.total))
    presenters.items_window(rows_attempts, window)
    items_shown = sum(len(p.items) for a in rows_attempts for p in a.proposals)
    known = selectors.entries_known(journal, presenters.delta_hashes(delta, window))
    rows = presenters.op_rows(delta, known, window=window)
    kwargs = scope_kwargs(journal)
    here = reverse("ledger:verdicts", kwargs={**kwargs, "number": fold.number})
    context = {
        **scope_context(journal),
        "fold": fold,
        "attempts": rows_attempts,
        "judged": judged,
        "model_writer": is_model_writer(fold.writer),
        "rows": rows,
        "page": page,
        "items_total": n_items,
        "ops_total": op_verdicts.total,
        "items_shown": items_shown,
        "items_first": window.start + 1,
        "items_last": window.start + items_shown,
        "ops_first": window.start + 1,
        "ops_last": window.start + len(rows),
        "rejected_total": len(op_verdicts.rejected),
        "writer_label": _writer_label(fold.manifest),
        "note": fold.manifest.get("note", ""),
        "fallback_notice": FALLBACK_NOTICE,
        "fold_url": reverse("ledger:fold", kwargs={**kwargs, "number": fold.number}),
        "verifier_url": here,
        "permalink": request.build_absolute_uri(
            here + (f"?page={page.number}" if page.number > 1 else "")
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
