"""The request for the next model call, built in a controlled order (docs/design.md section 6).

Pure module: no Django, no database. :func:`build_context` runs the steps of the module
docstring of :mod:`ledger_app.context` on a :class:`~ledger_app.context.build_state.Builder`
(protect, project, shrink, fold, rebuild and validate, one recovery compaction, explicit
failure) and returns the model view and the debug trace as :class:`ContextBuild`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from journal_app.rounds import Round
from ledger_app import reducer
from ledger_app.context.build_state import Builder
from ledger_app.context.calibration import calibrate
from ledger_app.context.compaction import (
    cut,
    drop,
    leave_out_prefix,
    project,
    recover,
    shrink,
)
from ledger_app.context.entry_text import short
from ledger_app.context.final_request import fill_share, rebuild
from ledger_app.context.inputs import TARGETS, ArtifactResolver, ContextInputError, FoldCallback
from ledger_app.entry_view import EntryView, metadata_only
from ledger_app.validation import (
    ARTIFACT_CHECKS,
    BUDGET_CHECKS,
    Meter,
    ValidationReport,
    memo_counter,
)

#: Default protected tail: a quarter of the working budget.
TAIL_SHARE = 4


def tail_budget(working_budget: int, tail_tokens: int | None) -> int:
    """The protected tail, tokens: ``tail_tokens`` when given, else :data:`TAIL_SHARE`'s
    share of the working budget (at least 1)."""
    return tail_tokens if tail_tokens is not None else max(1, working_budget // TAIL_SHARE)


#: Passes of the compaction steps (a pass repeats only when the built request counted more
#: than its plan).
PASSES = 3


@dataclass
class ContextBuild:
    """Output of :func:`build_context`.

    Attributes:
        status: ``"ok"`` (``model_view`` validated) or ``"failed"`` (no request).
        model_view: ``{"format", "messages"}`` (OpenAI) or ``{"format", "system",
            "messages"}`` (Anthropic); ``None`` on failure.
        debug_trace: the final request (a separate copy), every decision with its reason and
            token effect, the budgets, token figures and the validation reports.
        failure: on failure, ``{"reason", "problems", "figures"}``.
        report: the last validation report of the model view.
        ledger / covered_upto: the ledger the build ended with (after any fold).
    """

    status: str
    model_view: dict[str, Any] | None
    debug_trace: dict[str, Any]
    failure: dict[str, Any] | None
    report: ValidationReport
    ledger: Mapping[str, Any] = field(default_factory=dict)
    covered_upto: int = 0


def build_context(
    *,
    entries: Sequence[EntryView],
    ledger: Mapping[str, Any] | None = None,
    covered_upto: int = 0,
    working_budget: int,
    hard_limit: int,
    tail_tokens: int | None = None,
    target_format: str = "openai",
    output_reserve: int = 0,
    receipts: Mapping[str, Mapping[str, Any]] | None = None,
    resolve_artifact: ArtifactResolver | None = None,
    fold: FoldCallback | None = None,
    meter: Meter | None = None,
    revision: int | None = None,
    token_counts: Mapping[str, int] | None = None,
    tools: Any = None,
    end_status: str = "",
    metadata_before: int = 0,
    rounds: Sequence[Round] | None = None,
) -> ContextBuild:
    """Build the request for the next model call (module docstring: contents and order).

    Args:
        entries: the journal's entries with ``seq <= revision``, in seq order.
        ledger: the reducer state to render (``{"facts": {...}}``); empty when ``None``.
        covered_upto: the last seq covered by the ledger's folds (0: none).
        working_budget: tokens the request should fit in (the compaction target).
        hard_limit: the model's context window, tokens; the request must fit in
            ``hard_limit - output_reserve`` (case 14).
        tail_tokens: the protected recent tail, tokens (default a quarter of the budget).
        target_format: ``"openai"`` or ``"anthropic"``.
        output_reserve: tokens kept free for the reply.
        receipts: entry hash -> artifact receipt (``Artifact.receipt()``) of oversized results.
        resolve_artifact: ``reference -> ArtifactInfo | None`` (the store; default: the
            receipts themselves are trusted).
        fold: ``fold(upto) -> (ledger, covered_upto)``: grows the ledger over the complete
            API rounds up to ``upto`` (the service runs ``ledger_fold``). An exception from it
            is recorded and the rounds stay verbatim (case 18: a failed summary never
            replaces history).
        meter: token counting (default tiktoken ``o200k_base``); memoized per build.
        revision: the revision the entries are as of (for the trace; default the last seq).
        token_counts: entry hash -> the entry's stored token count (``Entry.token_count``,
            counted by the same encoding as ``meter`` when the entry was appended): the text of
            a message or a result is then not counted again.
        tools: the ``tools`` (schema) input the runtime sends with the request (OpenAI
            ``tools`` or Anthropic ``tools``, any JSON); its tokens count against the budget.
        end_status: the source's own end status (``exit_status`` of a SWE-agent or
            mini-swe-agent run; ``""`` for none), stated in the continuation record.
        metadata_before: 0, or the first seq read whole when the service read the folded
            prefix as metadata only (:class:`ledger_app.entry_view.MetadataView`): the API
            rounds before it that ``covered_upto`` covers are left out whole, at once, and
            never shown again (:func:`~ledger_app.context.compaction.leave_out_prefix`,
            docs/design.md 6, "The folded prefix").
        rounds: ``entries`` grouped (:func:`journal_app.rounds.group_rounds`) when the caller
            grouped them already; grouped here when ``None``.

    Budget honesty: the plan counts the request as it will be sent (secrets
    redacted, call ids, notes and the tools schema counted); a last pass counts the built
    request and trims P2/P3 facts until it fits, then compacts again against the real figure.
    When the journal holds provider-reported usage (:func:`~ledger_app.context.calibration.provider_usage`) and the provider
    counted more than our estimate of the same request, the plan aims at the limit divided by
    that ratio (at most :data:`~ledger_app.context.calibration.MAX_CALIBRATION`); the trace's ``tokens.calibration`` names the
    source of the figures the decisions used.

    Returns:
        :class:`ContextBuild`. Deterministic for equal inputs.

    Raises:
        ContextInputError: a budget below 1, a hard limit not above the output reserve, an
            unknown target format.
    """
    if target_format not in TARGETS:
        raise ContextInputError(
            f"target_format must be one of {', '.join(TARGETS)}, got {target_format!r}",
            field="target_format",
        )
    if working_budget < 1 or hard_limit < 1:
        raise ContextInputError(
            "working_budget and hard_limit must be at least 1 token",
            field="working_budget" if working_budget < 1 else "hard_limit",
        )
    if output_reserve < 0 or output_reserve >= hard_limit:
        raise ContextInputError(
            f"output_reserve must be between 0 and hard_limit - 1, got {output_reserve}",
            field="output_reserve",
        )
    base = meter or Meter()
    seed: dict[str, int] = {}
    if token_counts:
        for e in entries:
            n = token_counts.get(e.entry_hash)
            if n is not None and e.kind in ("message", "tool_result") and not metadata_only(e):
                seed[e.text] = n
    memo = memo_counter(base.count, seed)
    lookups = [0]

    def count(text: str) -> int:
        lookups[0] += 1
        return memo(text)

    meter = Meter(
        count=count,
        per_message=base.per_message,
        per_request=base.per_request,
        per_image=base.per_image,
        label=base.label,
    )
    tail = tail_budget(working_budget, tail_tokens)
    if tail < 0:
        raise ContextInputError("tail_tokens must be at least 0", field="tail_tokens")
    b = Builder(
        entries=entries,
        ledger=ledger or copy.deepcopy(reducer.EMPTY_STATE),
        covered_upto=covered_upto,
        receipts=receipts or {},
        resolve=resolve_artifact,
        working=working_budget,
        hard=hard_limit,
        reserve=output_reserve,
        tail_tokens=tail,
        fmt=target_format,
        fold=fold,
        meter=meter,
        tools=tools,
        end_status=end_status,
        metadata_before=metadata_before,
        token_counts=token_counts,
        rounds=rounds,
    )
    journal_tokens = b.total()
    calibration = calibrate(b)
    limit = b.limit
    tail_plans = [p for p in b.plans if p.protected]
    b.decide(
        1,
        "protect",
        f"{len(b.pin_entries)} pins, the task state and the recent tail "
        f"({len(tail_plans)} rounds, {sum(p.cost for p in tail_plans)} tokens, limit {tail}) are "
        "never folded"
        + (
            f"; the unfinished round at seq {b.tail_round.first_seq}-{b.tail_round.last_seq} is left "
            "out and its calls are stated as task state"
            if b.tail_round is not None
            else ""
        ),
        journal_tokens,
        journal_tokens,
    )
    if b.harness["dropped"]:
        b.decide(
            1,
            "harness",
            f"{b.harness['dropped']} harness records left out of the rounds and the tail "
            f"({', '.join(f'{k}: {n}' for k, n in b.harness['by_kind'].items())}); only the "
            "latest of each kind is shown (journal_app.harness; they stay in the journal)",
            journal_tokens,
            journal_tokens,
            kept_seqs=b.harness["kept_seqs"],
        )
    leave_out_prefix(b, 4)
    tail_start = min(
        (p.round.first_seq for p in tail_plans), default=(b.entries[-1].seq + 1 if b.entries else 1)
    )
    outside = [p for p in b.plans if not p.protected]
    reports: list[dict[str, Any]] = []
    for i in range(PASSES):
        if b.total() > limit:
            project(b, outside, 2, limit)
            project(b, tail_plans, 2, limit)
        if b.total() > limit or b.cut_due:
            cut(b, 4, limit - fill_share(b), tail_start - 1)
        if b.total() > limit:
            shrink(b, outside, 3, limit, consumed_only=True)
        if b.total() > limit:
            drop(b, 4, limit, tail_start - 1, may_ask=not b.fold_attempts)
        before = b.total()
        if b.settle() and b.total() > limit and i < PASSES - 1:
            b.decide(
                5,
                "recount",
                "the rounds shown, counted with their secrets redacted as they will be sent, "
                "are over the limit: the compaction steps run again",
                before,
                b.total(),
            )
            continue
        if not any(d["step"] in (2, 3, 4) and d["effect"] for d in b.decisions):
            if b.total() <= limit:
                why = f"the request is {b.total()} tokens, within {limit}: nothing to compact"
            else:
                why = (
                    f"the request is {b.total()} tokens, over the limit {limit}, and no step "
                    f"could compact it: pins and task state {mandatory_tokens(b)} tokens, the "
                    f"protected tail {sum(p.cost for p in b.plans if p.protected)} tokens, "
                    f"{sum(1 for p in b.plans if p.round.kind == 'api' and not p.protected)} "
                    "older API rounds (validation and recovery follow)"
                )
            b.decide(1, "none", why, b.total(), b.total())
        planned = b.total()
        correction = b.correction
        view, a, left, report = rebuild(b)
        reports.append(report.to_dict())
        b.decide(
            5,
            "validate",
            ("rebuilt and validated: " if view is not None else "not rebuilt: ")
            + ("ok" if report.ok else "; ".join(p.check for p in report.problems)),
            planned,
            report.tokens or 0,
        )
        if view is None or b.correction == correction:
            break  # within the plan (or not built): another pass would change nothing
        b.decide(
            5,
            "recount",
            f"the built request counts {b.correction - correction} tokens more than planned: "
            "the compaction steps run again against the real figure",
            report.tokens or 0,
            b.total(),
        )
    recovered = False
    if not report.ok and all(p.check in BUDGET_CHECKS + ARTIFACT_CHECKS for p in report.problems):
        recovered = True
        before = report.tokens or 0
        recover(b, report, limit, tail_start)
        view, a, left, report = rebuild(b)
        reports.append(report.to_dict())
        b.decide(
            6,
            "recovery",
            "one controlled recovery compaction, validated again: "
            + ("ok" if report.ok else "; ".join(p.check for p in report.problems)),
            before,
            report.tokens or 0,
        )
    failure = None
    status = "ok" if report.ok else "failed"
    if not report.ok:
        mandatory = mandatory_tokens(b)
        failure = {
            "reason": "the request cannot be made valid: "
            + "; ".join(p.message for p in report.problems[:5])
            + (
                ""
                if recovered
                else " (not a budget or artifact problem: no recovery compaction applies)"
            ),
            "problems": [p.to_dict() for p in report.problems],
            "figures": {
                "request_tokens": report.tokens,
                "working_budget": b.working,
                "hard_limit": b.hard,
                "output_reserve": b.reserve,
                "pins_and_task_state_tokens": mandatory,
                "last_round_tokens": next((p.cost for p in reversed(b.plans) if not p.dropped), 0),
            },
        }
        b.decide(
            7,
            "fail",
            "validation still fails: explicit failure state, no request is returned",
            report.tokens or 0,
            0,
        )
        view = None
    if view is not None and left:
        b.decide(
            4,
            "omit",
            f"{len(left)} P2/P3 facts left out of this request for room: a view decision, "
            "the stored ledger keeps them (recoverable from the journal)",
            report.tokens or 0,
            report.tokens or 0,
            facts=list(left),
        )
    trace = {
        "revision": revision if revision is not None else (b.entries[-1].seq if b.entries else 0),
        "target_format": TARGETS[target_format],
        "status": status,
        "budgets": {
            "working_budget": working_budget,
            "hard_limit": hard_limit,
            "output_reserve": output_reserve,
            "tail_tokens": tail,
            "effective_limit": limit,
        },
        "tokens": {
            "journal_uncompacted": journal_tokens,
            "request": report.tokens,
            "tools": b.tools_cost,
            "source": f"{meter.label}, counted on the built request (a request not yet sent has no provider figure)",
            "provider_last_call": calibration["provider"],
            "calibration": calibration,
            "decisions_source": calibration["decisions_source"],
            "measured_texts": lookups[0],
        },
        "rounds": {
            "total": len(b.plans) + (1 if b.tail_round is not None else 0),
            "protected_tail": [p.round.first_seq for p in b.plans if p.protected][:1]
            + [p.round.last_seq for p in b.plans if p.protected][-1:],
            "folded_out": [[p.round.first_seq, p.round.last_seq] for p in b.plans if p.dropped],
            "unfinished_tail": [b.tail_round.first_seq, b.tail_round.last_seq]
            if b.tail_round is not None
            else None,
            "covered_upto": b.covered_upto,
        },
        "ledger": {
            "facts_left_out": left,
            "folds_asked": b.fold_attempts,
            "evicted": 0,
            "view_only": "facts left out of this request stay in the stored ledger: a "
            "context request never consolidates or evicts",
        },
        "artifacts": sorted(
            {
                p.reference
                for p in (part for plan in b.plans if not plan.dropped for part in plan.parts)
                if p.form == "receipt"
            }
        ),
        "redactions": b.redactions,
        "harness": b.harness,
        "continuation_record": b.facts.record.sections,
        "notes": b.notes,
        "decisions": b.decisions,
        "validation": reports,
        "request": copy.deepcopy(view),
        "sources": [[short(h) for h in s] for s in a.sources] if view is not None else [],
    }
    return ContextBuild(status, view, trace, failure, report, b.ledger, b.covered_upto)


def mandatory_tokens(b: Builder) -> int:
    """Tokens no compaction step removes: the request's primer, the message rounds (pins,
    harness records kept) and the task state."""
    return (
        b.meter.per_request
        + sum(p.cost for p in b.plans if not p.dropped and p.round.kind == "message")
        + b.text_cost(b.task_text)
    )
