"""API schemas of the ledger: typed responses for everything an operator's page shows.

docs/design.md sections 5 and 8. The data comes from :mod:`ledger_app.selectors.presenters`, the
same shaping the htmx pages render, so an API client can audit what an operator can: the
ledger at any fold, folds with manifest and verdicts, the writer's proposals with both
verdicts of every judge, failed fold attempts, a fold's invariants and loss report, the P0
retirement queue. Hashes are written ``sha256:<hex>``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Schema
from pydantic import Field

from journal_app.schemas import MAX_SEQ, StrictIn


class SupportOut(Schema):
    """One support item of a fact, resolved in the fact's scope.

    ``url`` reads the raw entry (``GET /api/v1/entries/{hash}``); ``resolved`` is false when
    the hash names no entry of this journal (never valid support, docs/design.md 5.1).
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
    """An atomic ledger fact (docs/design.md 5.1); ``attributes`` holds the lifecycle's other fields
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
    """The ledger state after fold ``fold`` (``null``: no fold yet, the empty state).

    ``total`` counts the facts before filtering; ``facts`` are the matching ones in the
    facts page's order (priority, first cited seq, id).
    """

    fold: int | None
    revision: int | None
    outcome: str | None
    state_hash: str | None
    total: int
    facts: list[FactOut]
    note: str | None


class FoldOut(Schema):
    """One fold's summary, as on the folds page.

    ``ops_rejected`` counts everything rejected on the way to the fold:
    ``reducer_rejected`` (ops of the delta the reducer refused) plus ``proposals_rejected``
    (items the verifier or its rules rejected in the writer's proposal and repair, and
    answers that did not validate). Token figures come from the manifest (``null`` if none).
    """

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
    reducer_rejected: int
    proposals_rejected: int
    tokens_covered: int | None
    tokens_ledger: int | None
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
    """``verify_ledger`` over the API: the replay's first mismatch (else the first integrity
    problem) in ``mismatch``, and every integrity problem found in ``problems``."""

    ok: bool
    folds: int
    mismatch: dict[str, Any] | None
    checks: list[str]
    problems: list[dict[str, Any]] = []


class JudgeVerdictOut(Schema):
    """One judge's two verdicts on a proposed item (docs/design.md 5.3): does the cited evidence
    entail the claim, is its temporal effect valid. ``judge``: ``verifier`` (the model),
    ``rules``, ``reducer`` or ``parser``."""

    judge: str
    label: str
    entailment: str
    entailment_reason: str
    temporal: str
    temporal_reason: str
    accepted: bool


class ProposalItemOut(Schema):
    """One item of a writer answer: claim, cited evidence, every judge's verdicts;
    ``accepted`` only when every judge accepted it."""

    key: str
    op: str
    claim: str
    accepted: bool
    support: list[SupportOut]
    verdicts: list[JudgeVerdictOut]


class ProposalOut(Schema):
    """One writer answer: round 0 the proposal, 1 the one repair, 2 the mechanical fallback
    (``kind``: ``proposal``, ``repair``, ``fallback``, ``offline``)."""

    round: int
    kind: str
    label: str
    error: str
    verifier_error: str
    raw: str
    verifier_raw: str
    ops: list[Any]
    items: list[ProposalItemOut]
    rejected: int


class AttemptSummaryOut(Schema):
    """One fold attempt (:class:`~ledger_app.models.FoldAttempt`): ``fold`` is the fold it
    stored, ``null`` for a failed attempt (the model was unreachable; nothing stored)."""

    id: int
    number: int
    fold: int | None
    outcome: str
    seq_start: int
    seq_end: int
    revision: int
    range_hash: str
    writer: str
    writer_label: str
    verifier: str
    error: str
    note: str
    fallback_reason: str
    model_calls: list[dict[str, Any]]
    model_usage: dict[str, Any]
    created_at: datetime


class AttemptOut(AttemptSummaryOut):
    """An attempt with every writer answer and every judge's verdicts."""

    proposals: list[ProposalOut]


class InvariantCheckOut(Schema):
    check: str
    ok: bool
    problems: list[dict[str, Any]]


class InvariantReportOut(Schema):
    """One view's validation (``model`` or ``frontend``): each invariant, ok or its problems."""

    name: str
    ok: bool
    checks: list[InvariantCheckOut]


class InvariantsOut(Schema):
    """The context as of the fold, built read-only with the settings' default budgets and
    validated (docs/design.md 6): the fold page's invariants panel."""

    fold: int
    status: str
    revision: int
    reports: list[InvariantReportOut]
    failure: dict[str, Any] | None


class LostOut(Schema):
    kind: str
    value: str
    entry: str
    seq: int | None


class LossOut(Schema):
    """The fold's loss report (``manifest.loss``): identifiers of the covered entries the
    ledger text dropped, each with the first entry holding it. ``recorded`` is false for
    folds that record none (reviews, checkpoints)."""

    fold: int
    recorded: bool
    total: int
    kept: int
    lost_count: int
    lost: list[LostOut]
    lost_truncated: int
    by_kind: dict[str, dict[str, int]]


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
    """A reviewer's decision on a pending P0 retirement.

    ``comment`` is required by the review service (400 ``invalid_comment`` when empty, over
    10,000 characters or holding NUL), exactly as in the UI.
    """

    decision: Literal["approve", "refuse"]
    comment: str = ""


class FoldIn(StrictIn):
    """Queue a fold of the scope's unfolded complete API rounds up to ``upto`` (default: head)."""

    upto: int | None = Field(None, ge=1, le=MAX_SEQ)
    writer: Literal["offline", "model", "mechanical"] | None = Field(
        None,
        description=(
            "default: the configured model when OPENAI_BASE_URL and WRITER_MODEL are set, "
            "else offline; 'model' with no model configured is a 422 naming this field"
        ),
    )


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
