"""API operations of the ledger (DESIGN.md section 5): state at any fold, facts with support,
folds with manifest and delta, verdicts, the P0 retirement review queue, fold tasks.

Thin: the scope comes from ``request.auth`` (:mod:`journal_app.auth`), states are read with
:func:`ledger_app.services.ledger_state`, reviews go through
:func:`ledger_app.services.ledger_review` and folds are queued with
:func:`ledger_app.runs.task_run_enqueue`. Errors are mapped once, in ``config/api.py``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404, HttpRequest
from ninja import Path, Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from journal_app import selectors
from journal_app.hashing import display
from journal_app.models import Entry, Journal
from journal_app.schemas import ERRORS, MAX_SEQ, NO_NUL, ScopePart, StrictIn
from ledger_app.facts import CATEGORIES, CONFIDENCES, LIFECYCLES, PRIORITIES, Fact
from ledger_app.models import Fold, RetirementRequest, TaskRun
from ledger_app.runs import task_run_enqueue
from ledger_app.services import ledger_review, ledger_state, ledger_verify
from ledger_app.tasks import fold_journal

router = Router(tags=["ledger"])

SCOPE = "/sessions/{session}/{lane}/{branch}"
#: Largest fold number (PositiveIntegerField).
MAX_FOLD = 2**31 - 1
FactId = Annotated[str, Path(pattern=r"^[A-Za-z0-9:._-]{1,100}$")]
FoldNumber = Annotated[int, Path(ge=1, le=MAX_FOLD)]
TaskId = Annotated[str, Path(pattern=r"^[A-Za-z0-9._-]{1,255}$")]
RetirementId = Annotated[int, Path(ge=1, le=MAX_SEQ)]
_FACT_FIELDS = (
    "id",
    "category",
    "priority",
    "lifecycle",
    "confidence",
    "text",
    "support",
    "pin",
    "author",
    "origin_fold",
)


class SupportOut(Schema):
    """One support item of a fact, resolved in the fact's scope.

    ``url`` reads the raw entry (``GET /api/v1/entries/{hash}``); ``resolved`` is false when
    the hash names no entry of this journal (never valid support, DESIGN.md 5.1).
    """

    entry: str
    url: str
    resolved: bool
    seq: int | None = None
    kind: str | None = None
    role: str | None = None
    quote: str | None = None
    chunk: int | None = None


class FactOut(Schema):
    """An atomic ledger fact (DESIGN.md 5.1); ``attributes`` holds the lifecycle's other fields
    (``superseded_by``, ``pending_retirement``, ``review``, ...)."""

    id: str
    category: str
    priority: str
    lifecycle: str
    confidence: str
    text: str
    support: list[SupportOut]
    pin: bool
    author: str | None
    origin_fold: int | None
    attributes: dict[str, Any]


class LedgerOut(Schema):
    """The ledger state after fold ``fold`` (``null``: no fold yet, the empty state)."""

    fold: int | None
    revision: int | None
    outcome: str | None
    state_hash: str | None
    total: int
    facts: list[FactOut]
    note: str | None


class FoldOut(Schema):
    number: int
    kind: str
    outcome: str
    seq_start: int | None
    seq_end: int | None
    revision: int
    range_hash: str
    state_hash: str
    writer: str
    verifier: str
    facts_added: int
    ops_rejected: int
    previous: int | None
    created_at: datetime


class VerdictOut(Schema):
    """The reducer's verdict on one op of a delta: ``accepted``, ``rejected`` (with the
    reason) or ``pending`` (a P0 retirement waiting for review)."""

    index: int
    op: str
    status: str
    reason: str
    fact_id: str | None


class FoldDetailOut(FoldOut):
    manifest: dict[str, Any]
    delta: dict[str, Any]
    verdicts: list[VerdictOut]


class LedgerVerifyOut(Schema):
    ok: bool
    folds: int
    mismatch: dict[str, Any] | None
    checks: list[str]


class RetirementOut(Schema):
    """A P0 retirement in the review queue, and its decision once made."""

    id: int
    scope: dict[str, str]
    fact_id: str
    fact_text: str
    requested_in: int
    evidence: list[str]
    reason: str
    status: str
    reviewer: str | None
    comment: str
    decided_at: datetime | None
    decided_in: int | None
    created_at: datetime


class ReviewIn(StrictIn):
    """A reviewer's decision on a pending P0 retirement."""

    decision: Literal["approve", "refuse"]
    comment: str = Field("", max_length=10_000, pattern=NO_NUL)


class FoldIn(StrictIn):
    """Queue a fold of the scope's unfolded complete API rounds up to ``upto`` (default: head)."""

    upto: int | None = Field(None, ge=1, le=MAX_SEQ)


class TaskOut(Schema):
    """The latest execution record of a queued task (:class:`~ledger_app.models.TaskRun`).

    ``status``: ``queued``, ``running``, ``retrying``, ``succeeded``, ``failed``; ``result``
    for a fold: ``{"fold": n | null, "created": bool, "reason": str}``. ``executions`` counts
    the runs recorded for this task id (retries and redeliveries add rows).
    """

    task_id: str
    task_name: str
    status: str
    attempt: int
    executions: int
    scope: dict[str, str] | None
    result: dict[str, Any]
    error: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


def _scope(journal: Journal) -> dict[str, str]:
    return {"session": journal.session.key, "lane": journal.lane, "branch": journal.branch}


def _support(fact: Fact, known: dict[str, Entry]) -> list[dict[str, Any]]:
    out = []
    for item in fact.get("support", []):
        if not isinstance(item, dict):
            continue
        digest = str(item.get("entry", ""))
        entry = known.get(digest)
        chunk = item.get("chunk")
        if chunk is None and isinstance(item.get("chunks"), list) and item["chunks"]:
            chunk = item["chunks"][0]
        out.append(
            {
                "entry": display(digest),
                "url": f"/api/v1/entries/{display(digest)}",
                "resolved": entry is not None,
                "seq": entry.seq if entry else None,
                "kind": entry.kind if entry else None,
                "role": entry.role if entry else None,
                "quote": item.get("quote") if isinstance(item.get("quote"), str) else None,
                "chunk": chunk if isinstance(chunk, int) else None,
            }
        )
    return out


def fact_out(fact: Fact, known: dict[str, Entry]) -> dict[str, Any]:
    """A state's fact as :class:`FactOut` data; ``known`` maps hex hashes to their entries."""
    return {
        "id": str(fact.get("id", "")),
        "category": str(fact.get("category", "")),
        "priority": str(fact.get("priority", "")),
        "lifecycle": str(fact.get("lifecycle", "")),
        "confidence": str(fact.get("confidence", "")),
        "text": str(fact.get("text", "")),
        "support": _support(fact, known),
        "pin": bool(fact.get("pin", False)),
        "author": fact.get("author"),
        "origin_fold": fact.get("origin_fold"),
        "attributes": {k: v for k, v in fact.items() if k not in _FACT_FIELDS},
    }


def _known(journal: Journal, facts: list[Fact]) -> dict[str, Entry]:
    hashes = [
        str(s.get("entry", "")) for f in facts for s in f.get("support", []) if isinstance(s, dict)
    ]
    return selectors.entries_by_hash(journal, hashes)


def _fold_numbered(journal: Journal, number: int) -> Fold:
    fold = Fold.objects.filter(journal=journal, number=number).select_related("previous").first()
    if fold is None:
        raise Http404(f"no fold {number}")
    return fold


def _fold(journal: Journal, number: int | None) -> Fold | None:
    """Fold ``number`` (``Http404`` if absent), or the latest (``None`` before any fold)."""
    if number is None:
        return Fold.objects.filter(journal=journal).order_by("-number").first()
    return _fold_numbered(journal, number)


def _fold_out(fold: Fold) -> dict[str, Any]:
    return {
        "number": fold.number,
        "kind": fold.kind,
        "outcome": fold.outcome,
        "seq_start": fold.seq_start,
        "seq_end": fold.seq_end,
        "revision": fold.revision,
        "range_hash": display(fold.range_hash),
        "state_hash": display(fold.state_hash),
        "writer": fold.writer,
        "verifier": fold.verifier,
        "facts_added": fold.facts_added,
        "ops_rejected": fold.ops_rejected,
        "previous": fold.previous.number if fold.previous_id else None,
        "created_at": fold.created_at,
    }


def _verdicts(fold: Fold) -> list[dict[str, Any]]:
    return [
        {
            "index": v.get("index", i),
            "op": str(v.get("op", "")),
            "status": str(v.get("status", "")),
            "reason": str(v.get("reason", "")),
            "fact_id": v.get("fact_id") or None,
        }
        for i, v in enumerate(fold.delta_dict.get("verdicts", []))
    ]


def _retirement_out(r: RetirementRequest) -> dict[str, Any]:
    return {
        "id": r.pk,
        "scope": _scope(r.journal),
        "fact_id": r.fact_id,
        "fact_text": r.fact_text,
        "requested_in": r.requested_in.number,
        "evidence": [display(h) for h in r.evidence],
        "reason": r.reason,
        "status": r.status,
        "reviewer": r.reviewer.get_username() if r.reviewer_id else None,
        "comment": r.comment,
        "decided_at": r.decided_at,
        "decided_in": r.decided_in.number if r.decided_in_id else None,
        "created_at": r.created_at,
    }


def _retirements(request: HttpRequest) -> Any:
    return RetirementRequest.objects.filter(
        journal__session__tenant=request.auth.tenant
    ).select_related("journal__session", "requested_in", "decided_in", "reviewer")


def _executions(task_ids: list[str]) -> dict[str, int]:
    rows = (
        TaskRun.objects.filter(task_id__in=task_ids)
        .order_by()
        .values("task_id")
        .annotate(n=Count("pk"))
        .values_list("task_id", "n")
    )
    return dict(rows)


def task_out(run: TaskRun, executions: int | None = None) -> dict[str, Any]:
    """A :class:`TaskRun` as :class:`TaskOut` data (``executions`` counted when not given)."""
    if executions is None:
        executions = _executions([run.task_id]).get(run.task_id, 1)
    return {
        "task_id": run.task_id,
        "task_name": run.task_name,
        "status": run.status,
        "attempt": run.attempt,
        "executions": executions,
        "scope": _scope(run.journal) if run.journal_id else None,
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
) -> Any:
    """The ledger after fold ``fold`` (default: the latest), every fact with its support
    resolved to raw entries. Filters match exactly; ``total`` counts facts before filtering.
    The ledger is secondary: a fact is orientation, its support entries are the evidence.
    """
    journal = request.auth.journal(session, lane, branch)
    selected = _fold(journal, fold)
    state = ledger_state(journal, selected)
    facts: list[Fact] = list(state.get("facts", {}).values())
    wanted = {
        "category": category,
        "priority": priority,
        "lifecycle": lifecycle,
        "confidence": confidence,
    }
    shown = [f for f in facts if all(v is None or f.get(k) == v for k, v in wanted.items())]
    known = _known(journal, shown)
    return {
        "fold": selected.number if selected else None,
        "revision": selected.revision if selected else None,
        "outcome": selected.outcome if selected else None,
        "state_hash": display(selected.state_hash) if selected else None,
        "total": len(facts),
        "facts": [fact_out(f, known) for f in shown],
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
    state = ledger_state(journal, _fold(journal, fold))
    fact = state.get("facts", {}).get(fact_id)
    if fact is None:
        raise Http404(f"no fact {fact_id!r} in this ledger")
    return fact_out(fact, _known(journal, [fact]))


@router.get(
    SCOPE + "/ledger/verify", response={200: LedgerVerifyOut, **ERRORS}, summary="Verify a ledger"
)
def ledger_verify_read(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart
) -> Any:
    """Replay every delta from scratch and compare with every stored state (DESIGN.md 5.2)."""
    report = ledger_verify(journal=request.auth.journal(session, lane, branch))
    return {
        "ok": report.ok,
        "folds": report.folds,
        "mismatch": report.mismatch,
        "checks": report.checks,
    }


@router.get(SCOPE + "/folds", response={200: list[FoldOut], **ERRORS}, summary="List folds")
def fold_list(request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart) -> Any:
    """Every fold of the scope in order: range, outcome, writer, verifier, counts."""
    journal = request.auth.journal(session, lane, branch)
    folds = (
        Fold.objects.filter(journal=journal)
        .select_related("previous")
        .defer("delta", "state", "manifest", "previous__delta", "previous__state")
        .order_by("number")
    )
    return [_fold_out(f) for f in folds]


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
    run = task_run_enqueue(
        task=fold_journal, journal=journal, journal_id=journal.pk, upto=payload.upto
    )
    run.refresh_from_db()
    return Status(202, task_out(run))


@router.get(
    SCOPE + "/folds/{number}", response={200: FoldDetailOut, **ERRORS}, summary="Read a fold"
)
def fold_read(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart, number: FoldNumber
) -> Any:
    """One fold: manifest (covered hashes, previous fold, models, tokens, outcome), the delta's
    ops and the reducer's verdict on each."""
    journal = request.auth.journal(session, lane, branch)
    fold = _fold_numbered(journal, number)
    delta = fold.delta_dict
    delta.pop("verdicts", None)
    return {
        **_fold_out(fold),
        "manifest": fold.manifest,
        "delta": delta,
        "verdicts": _verdicts(fold),
    }


@router.get(
    SCOPE + "/folds/{number}/verdicts",
    response={200: list[VerdictOut], **ERRORS},
    summary="Verdicts of a fold",
)
def fold_verdicts(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart, number: FoldNumber
) -> Any:
    """The verdict on every op of the fold's delta, rejections with their reasons."""
    journal = request.auth.journal(session, lane, branch)
    fold = _fold_numbered(journal, number)
    return _verdicts(fold)


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
    rows = _retirements(request).filter(journal=journal)
    if status is not None:
        rows = rows.filter(status=status)
    return [_retirement_out(r) for r in rows.order_by("-created_at", "-pk")]


@router.get(
    "/retirements/{retirement_id}",
    response={200: RetirementOut, **ERRORS},
    summary="Read a retirement request",
)
def retirement_read(request: HttpRequest, retirement_id: RetirementId) -> Any:
    """One retirement request of the key's tenant, with its decision once made."""
    r = _retirements(request).filter(pk=retirement_id).first()
    if r is None:
        raise Http404("no such retirement request")
    return _retirement_out(r)


@router.post(
    "/retirements/{retirement_id}/review",
    response={200: RetirementOut, **ERRORS},
    summary="Approve or refuse a P0 retirement",
)
def retirement_review(request: HttpRequest, retirement_id: RetirementId, payload: ReviewIn) -> Any:
    """Decide a pending P0 retirement (DESIGN.md 5.2): reviewer keys only (403 otherwise).

    Applied to the ledger as a ``review`` fold, recorded under the key's user. A request
    already decided is ``409 review_conflict``.
    """
    r = _retirements(request).filter(pk=retirement_id).first()
    if r is None:
        raise Http404("no such retirement request")
    request.auth.require_reviewer()
    reviewer = request.auth.key.user
    if reviewer is None:
        raise PermissionDenied("this reviewer key names no user to record the decision under")
    ledger_review(request=r, reviewer=reviewer, decision=payload.decision, comment=payload.comment)
    return _retirement_out(_retirements(request).get(pk=r.pk))


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
    runs = list(
        TaskRun.objects.filter(journal=journal)
        .select_related("journal__session")
        .order_by("-created_at", "-pk")[:limit]
    )
    counts = _executions([r.task_id for r in runs])
    return [task_out(r, counts.get(r.task_id, 1)) for r in runs]


@router.get("/tasks/{task_id}", response={200: TaskOut, **ERRORS}, summary="Task status")
def task_read(request: HttpRequest, task_id: TaskId) -> Any:
    """The latest execution record of ``task_id``, in the key's tenant only."""
    run = (
        TaskRun.objects.filter(task_id=task_id, journal__session__tenant=request.auth.tenant)
        .select_related("journal__session")
        .order_by("-created_at", "-pk")
        .first()
    )
    if run is None:
        raise Http404("no such task")
    return task_out(run)
