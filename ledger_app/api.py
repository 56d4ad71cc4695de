"""API operations of the ledger (docs/design.md sections 5 and 8): state at any fold, facts with
support, folds with manifest and delta, verdicts, the writer's proposals with both verdicts,
failed fold attempts, a fold's invariants and loss report, the P0 retirement review queue,
fold tasks.

Thin: the scope comes from ``request.auth`` (:mod:`journal_app.auth`); reads go through
:mod:`ledger_app.selectors` and are shaped by its presenters, the same the htmx pages use;
reviews go through :func:`ledger_app.services.retirement_review` (as in the UI) and folds are
queued with :func:`ledger_app.runs.task_run_enqueue`. Errors are mapped once, in
``config/api.py``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from django.http import Http404, HttpRequest
from ninja import Path, Query, Router
from ninja.responses import Status

from journal_app.hashing import display
from journal_app.schemas import ERRORS, MAX_SEQ, ScopePart
from ledger_app import selectors
from ledger_app.facts import CATEGORIES, CONFIDENCES, LIFECYCLES, PRIORITIES
from ledger_app.models import TaskRun
from ledger_app.runs import task_run_enqueue
from ledger_app.schemas import (
    AttemptOut,
    AttemptSummaryOut,
    FactOut,
    FoldDetailOut,
    FoldIn,
    FoldOut,
    InvariantsOut,
    LedgerOut,
    LedgerVerifyOut,
    LossOut,
    RetirementOut,
    ReviewIn,
    TaskOut,
    VerdictOut,
)
from ledger_app.selectors import presenters
from ledger_app.services import ledger_verify, retirement_review, writer_resolve
from ledger_app.services.context import fold_invariants
from ledger_app.tasks import fold_journal

router = Router(tags=["ledger"])

SCOPE = "/sessions/{session}/{lane}/{branch}"
#: Largest fold number (PositiveIntegerField).
MAX_FOLD = 2**31 - 1
FactId = Annotated[str, Path(pattern=r"^[A-Za-z0-9:._-]{1,100}$")]
FoldNumber = Annotated[int, Path(ge=1, le=MAX_FOLD)]
TaskId = Annotated[str, Path(pattern=r"^[A-Za-z0-9._-]{1,255}$")]
RetirementId = Annotated[int, Path(ge=1, le=MAX_SEQ)]


def task_out(run: TaskRun, executions: int | None = None) -> dict[str, Any]:
    """A :class:`TaskRun` as :class:`TaskOut` data (``executions`` counted when not given)."""
    if executions is None:
        executions = selectors.task_executions([run.task_id]).get(run.task_id, 1)
    return {
        "task_id": run.task_id,
        "task_name": run.task_name,
        "status": run.status,
        "attempt": run.attempt,
        "executions": executions,
        "scope": (
            {
                "session": run.journal.session.key,
                "lane": run.journal.lane,
                "branch": run.journal.branch,
            }
            if run.journal_id
            else None
        ),
        "result": run.result,
        "error": run.error,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


@router.get(SCOPE + "/ledger", response={200: LedgerOut, **ERRORS}, summary="Ledger state")
def ledger_read(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    fold: Annotated[int | None, Query(ge=1, le=MAX_FOLD)] = None,
    category: Annotated[Literal[CATEGORIES] | None, Query()] = None,  # type: ignore[valid-type]
    priority: Annotated[Literal[PRIORITIES] | None, Query()] = None,  # type: ignore[valid-type]
    lifecycle: Annotated[Literal[LIFECYCLES] | None, Query()] = None,  # type: ignore[valid-type]
    confidence: Annotated[Literal[CONFIDENCES] | None, Query()] = None,  # type: ignore[valid-type]
    q: Annotated[str, Query(max_length=2000, pattern=r"^[^\x00]*$")] = "",
) -> Any:
    """The ledger after fold ``fold`` (default: the latest), every fact with its support
    resolved to raw entries. Filters match exactly; ``q`` is the facts page's filter
    expression (``pin:true text:"migration"``; a bad one is 422 ``invalid_filter``);
    ``total`` counts facts before filtering; the order is the facts page's. The ledger is
    secondary: a fact is orientation, its support entries are the evidence.
    """
    journal = request.auth.journal(session, lane, branch)
    selected = selectors.fold_at(journal, fold)
    selection = selectors.facts_at(
        journal,
        selected,
        chosen={
            "category": category,
            "priority": priority,
            "lifecycle": lifecycle,
            "confidence": confidence,
        },
        q=q,
    )
    selection.raise_error()
    known = selectors.entries_known(journal, presenters.support_hashes(selection.shown))
    return {
        "fold": selected.number if selected else None,
        "revision": selected.revision if selected else None,
        "outcome": selected.outcome if selected else None,
        "state_hash": display(selected.state_hash) if selected else None,
        "total": selection.total,
        "facts": [
            presenters.fact_out(r.fact, known) for r in presenters.fact_rows(selection.shown, known)
        ],
        "note": (selected.manifest.get("note") or None) if selected else None,
    }


@router.get(
    SCOPE + "/ledger/facts/{fact_id}", response={200: FactOut, **ERRORS}, summary="Read a fact"
)
def fact_read(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    fact_id: FactId,
    fold: Annotated[int | None, Query(ge=1, le=MAX_FOLD)] = None,
) -> Any:
    """One fact of the ledger after fold ``fold`` (default: latest), support resolved."""
    journal = request.auth.journal(session, lane, branch)
    fact = selectors.fact_at(journal, selectors.fold_at(journal, fold), fact_id)
    if fact is None:
        raise Http404(f"no fact {fact_id!r} in this ledger")
    return presenters.fact_out(
        fact, selectors.entries_known(journal, presenters.support_hashes([fact]))
    )


@router.get(
    SCOPE + "/ledger/verify", response={200: LedgerVerifyOut, **ERRORS}, summary="Verify a ledger"
)
def ledger_verify_read(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart
) -> Any:
    """Replay every delta from scratch and compare with every stored state (docs/design.md 5.2),
    then check the ledger against the journal and the reviews (manifests, ranges,
    pins, support, retirements, the journal head). ``mismatch`` is the replay's first
    mismatch, else the first integrity problem (``check``, ``fold``, ``fact``, ``entry``,
    ``detail``); ``checks`` lists every check run."""
    from ledger_app.services.integrity import CHECKS, ledger_integrity

    journal = request.auth.journal(session, lane, branch)
    report = ledger_verify(journal=journal)
    problems = ledger_integrity(journal=journal)
    return {
        "ok": report.ok and not problems,
        "folds": report.folds,
        "mismatch": report.mismatch or (problems[0].to_dict() if problems else None),
        "checks": [*report.checks, *CHECKS],
        "problems": [p.to_dict() for p in problems],
    }


@router.get(SCOPE + "/folds", response={200: list[FoldOut], **ERRORS}, summary="List folds")
def fold_list(request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart) -> Any:
    """Every fold of the scope in order: range, outcome, writer, verifier, counts (the
    verifier's rejections included in ``ops_rejected``), tokens."""
    journal = request.auth.journal(session, lane, branch)
    return [presenters.fold_out(f) for f in selectors.fold_rows(journal)]


@router.post(SCOPE + "/folds", response={202: TaskOut, **ERRORS}, summary="Queue a fold")
def fold_queue(
    request: HttpRequest, payload: FoldIn, session: ScopePart, lane: ScopePart, branch: ScopePart
) -> Any:
    """Queue :func:`ledger_app.tasks.fold_journal` for this scope; poll ``/tasks/{task_id}``.

    Idempotent by construction: a fold of a range already folded stores nothing new (the
    task's result says ``created: false``). In the embedded default the task runs before
    this answer, so the status is already final.
    """
    journal = request.auth.journal(session, lane, branch)
    writer_resolve(payload.writer)  # a bad writer is refused before anything is queued
    run = task_run_enqueue(
        task=fold_journal,
        journal=journal,
        journal_id=journal.pk,
        upto=payload.upto,
        writer=payload.writer,
        send_now=True,  # 503 broker_unavailable when the broker is down, never queued forever
    )
    run.refresh_from_db()
    return Status(202, task_out(run))


@router.get(
    SCOPE + "/folds/{number}", response={200: FoldDetailOut, **ERRORS}, summary="Read a fold"
)
def fold_read(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart, number: FoldNumber
) -> Any:
    """One fold: manifest (covered hashes, previous fold, models, tokens, outcome, loss), the
    delta's ops and the reducer's verdict on each."""
    journal = request.auth.journal(session, lane, branch)
    fold = selectors.fold_get(journal, number)
    delta = presenters.delta_shown(fold.delta_dict)
    verdicts = [r.to_dict() for r in presenters.op_rows(delta, {})]
    delta.pop("verdicts", None)
    return {
        **presenters.fold_out(fold),
        "manifest": fold.manifest,
        "delta": delta,
        "verdicts": verdicts,
    }


@router.get(
    SCOPE + "/folds/{number}/verdicts",
    response={200: list[VerdictOut], **ERRORS},
    summary="Verdicts of a fold",
)
def fold_verdicts(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart, number: FoldNumber
) -> Any:
    """The reducer's verdict on every op of the fold's delta, rejections with their reasons."""
    journal = request.auth.journal(session, lane, branch)
    return [
        r.to_dict() for r in presenters.op_rows(selectors.fold_get(journal, number).delta_dict, {})
    ]


@router.get(
    SCOPE + "/folds/{number}/proposals",
    response={200: list[AttemptOut], **ERRORS},
    summary="Proposals and verdicts of a fold",
)
def fold_proposals(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart, number: FoldNumber
) -> Any:
    """The verifier page of a fold (docs/design.md 5.3): every attempt at it (the one that stored
    it, failed ones before it), each writer answer (proposal, the one repair, the fallback)
    with each proposed item's claim, cited evidence and every judge's two verdicts
    (entailment, temporal) with reasons. Empty for a mechanical or review fold."""
    journal = request.auth.journal(session, lane, branch)
    fold = selectors.fold_get(journal, number)
    attempts, proposals, verdicts = selectors.fold_attempts(journal, fold)
    known = selectors.entries_known(journal, presenters.attempt_hashes(proposals, verdicts))
    return [a.to_dict() for a in presenters.attempt_rows(attempts, proposals, verdicts, known)]


@router.get(
    SCOPE + "/folds/{number}/invariants",
    response={200: InvariantsOut, **ERRORS},
    summary="Invariants of the context at a fold",
)
def fold_invariants_read(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart, number: FoldNumber
) -> Any:
    """The context as of the fold, built as a preview (nothing enters the ledger) with the
    settings' default budgets, and each invariant of its model and frontend views (docs/design.md
    6). The panel is a property of the fold: the first read computes and stores it
    (:func:`ledger_app.services.context.fold_invariants`), later reads are served from it."""
    journal = request.auth.journal(session, lane, branch)
    fold = selectors.fold_get(journal, number)
    return presenters.invariants_out(fold, fold_invariants(fold=fold))


@router.get(
    SCOPE + "/folds/{number}/loss",
    response={200: LossOut, **ERRORS},
    summary="Loss report of a fold",
)
def fold_loss(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart, number: FoldNumber
) -> Any:
    """Which identifiers (paths, commands, hashes, numbers...) of the covered entries the
    ledger text dropped, each with the first entry that holds it (recoverable there)."""
    journal = request.auth.journal(session, lane, branch)
    return presenters.loss_out(selectors.fold_get(journal, number))


@router.get(
    SCOPE + "/fold-attempts",
    response={200: list[AttemptSummaryOut], **ERRORS},
    summary="Failed fold attempts",
)
def fold_attempts_failed(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Any:
    """Fold attempts of the scope that failed (the writer's or verifier's model could not be
    reached; nothing was stored), newest first, with the error and the model calls made."""
    journal = request.auth.journal(session, lane, branch)
    return [presenters.attempt_out(a) for a in selectors.failed_attempts(journal, limit=limit)]


@router.get(
    SCOPE + "/retirements",
    response={200: list[RetirementOut], **ERRORS},
    summary="Review queue",
)
def retirement_list(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    status: Annotated[Literal["pending", "approved", "refused"] | None, Query()] = None,
) -> Any:
    """P0 retirements of the scope awaiting (or past) review, newest first."""
    journal = request.auth.journal(session, lane, branch)
    rows = selectors.retirements_for_tenant(request.auth.tenant, journal=journal, status=status)
    return [presenters.retirement_out(r) for r in rows]


@router.get(
    "/retirements/{retirement_id}",
    response={200: RetirementOut, **ERRORS},
    summary="Read a retirement request",
)
def retirement_read(request: HttpRequest, retirement_id: RetirementId) -> Any:
    """One retirement request of the key's tenant, with its decision once made."""
    return presenters.retirement_out(
        selectors.retirement_for_tenant(request.auth.tenant, retirement_id)
    )


@router.post(
    "/retirements/{retirement_id}/review",
    response={200: RetirementOut, **ERRORS},
    summary="Approve or refuse a P0 retirement",
    operation_id="ledger_app_api_retirement_review",
)
def retirement_review_decide(
    request: HttpRequest, retirement_id: RetirementId, payload: ReviewIn
) -> Any:
    """Decide a pending P0 retirement (docs/design.md 5.2) through the review service the UI uses.

    A reviewer key acts as its user, who must be a reviewer or admin of the tenant (403
    ``forbidden`` otherwise, and for client keys); ``comment`` is required (400
    ``invalid_comment``); a request already decided is 409 ``review_conflict``. Applied to
    the ledger as a ``review`` fold and logged as ``review.approve`` / ``review.refuse``.
    """
    r = selectors.retirement_for_tenant(request.auth.tenant, retirement_id)
    retirement_review(
        request=r, actor=request.auth, decision=payload.decision, comment=payload.comment
    )
    return presenters.retirement_out(selectors.retirement_for_tenant(request.auth.tenant, r.pk))


@router.get(SCOPE + "/tasks", response={200: list[TaskOut], **ERRORS}, summary="Tasks of a journal")
def task_list(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Any:
    """Task runs of the scope (queued by the API or by the auto-scheduler), newest first."""
    journal = request.auth.journal(session, lane, branch)
    runs = selectors.task_runs(journal, limit=limit)
    counts = selectors.task_executions(r.task_id for r in runs)
    return [task_out(r, counts.get(r.task_id, 1)) for r in runs]


@router.get("/tasks/{task_id}", response={200: TaskOut, **ERRORS}, summary="Task status")
def task_read(request: HttpRequest, task_id: TaskId) -> Any:
    """The latest execution record of ``task_id``, in the key's tenant only."""
    return task_out(selectors.task_run_for_tenant(request.auth.tenant, task_id))
