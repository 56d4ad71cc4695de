"""Context for the next model call, from the journal, the ledger and the artifacts (docs/design.md 6).

``context_build`` is the one function the API and the UI call. It reads the journal as of a
revision, the ledger valid at that revision (:func:`ledger_app.selectors.context_ledger`)
and the artifact receipts of oversized results, runs the pure builder
(:func:`ledger_app.context.build_context`) and returns the three views. When the builder
needs rounds folded it calls :func:`ledger_app.services.ledger_fold` (one fold, up to the
protected tail); on an explicit failure it folds what is foldable (the latest fold is the
checkpoint) and returns the failure state, never a request. A context request never
consolidates: what it leaves out is a view decision listed in its debug trace, and the stored
ledger keeps every fact (a read never destroys state); consolidation runs on the fold
path, when the ledger passes ``LEDGER_CONSOLIDATE_AT_TOKENS``. Artifacts are deduplicated by
:func:`journal_app.services.artifact_store` (seed 001: an agent that reloads an artifact gets
the same reference back), and every reference the model view carries is re-read from the
store and re-hashed before the view is returned.

The frontend view filters every text it shows through :mod:`journal_app.privacy`; its check
(:func:`ledger_app.validation.validate_frontend`) uses the same functions, and an item the
check still refuses is withheld, saying so. Default budgets come from settings through
:func:`~ledger_app.services.context_records.context_budgets`, the one place the UI and the invariants panel read them.

The request's records (errors, budgets, result) are :mod:`.context_records`; what the build
reads is :mod:`.context_reads`. This module writes: :func:`context_build` may fold (unless
``write=False``) and :func:`fold_invariants` stores each fold's invariants panel.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit_app.services import journal_event
from journal_app.models import Journal
from ledger_app import selectors
from ledger_app.context import (
    ContextBuild,
    ContextInputError,
    budget_limit,
    build_context,
    frontend_view,
    tail_budget,
)
from ledger_app.entry_view import metadata_only
from ledger_app.errors import LedgerError
from ledger_app.models import Fold, FoldInvariants
from ledger_app.reducer.apply import gc_paused
from ledger_app.services.compact import ledger_compact
from ledger_app.services.context_explain import context_failure_explain
from ledger_app.services.context_reads import (
    ArtifactLookup,
    SharedCounts,
    covered_end,
    end_status,
    fold_at,
    read_entries,
    read_for_build,
    session_pins,
    token_meter,
)
from ledger_app.services.context_records import (
    VIEWS,
    ContextError,
    ContextResult,
    ValidateRequestInvalid,
    context_budgets,
)
from ledger_app.services.fold import ledger_fold
from ledger_app.services.state import latest_fold
from ledger_app.validation import (
    Expectations,
    Meter,
    ValidationReport,
    memo_findings,
    validate_frontend,
    validate_request,
)

WITHHELD = "[withheld: this item failed the privacy check]"


def _checkpoint(
    journal: Journal, revision: int, may_fold: bool, deadline: float | None = None
) -> dict[str, Any]:
    """Fold what is foldable; the latest fold is the checkpoint (docs/design.md 6, step 7).
    With a ``deadline`` (a :func:`time.monotonic` value) in slices, none started after it.

    Never consolidates: a failed request at a small budget must not evict P2/P3
    facts from the stored ledger; consolidation belongs to the fold path and its 67,500-token
    start."""
    if not may_fold:
        return {
            "fold": None,
            "reason": "no checkpoint: the ledger has moved past this revision (or read-only)",
        }
    created = False
    try:
        if deadline is None:
            folded = ledger_fold(journal=journal, upto=revision)
            created = bool(folded and folded.created)
        else:
            report = ledger_compact(
                journal=journal, upto=revision, deadline=deadline, consolidate=False
            )
            created = any(r.created and r.fold is not None for r in report.rows)
    except LedgerError as exc:
        return {"fold": None, "reason": f"no checkpoint: the fold was refused: {exc}"}
    fold = latest_fold(journal)
    if fold is None:
        reason = "no checkpoint: nothing could be folded"
    else:
        reason = (
            f"fold {fold.number} {'written' if created else 'stands'} as the checkpoint; "
            "nothing consolidated or evicted (a context request only reads the ledger)"
        )
    return {
        "fold": fold.number if fold is not None else None,
        "kind": fold.kind if fold is not None else None,
        "outcome": fold.outcome if fold is not None else None,
        "consolidated": False,
        "folded": created,
        "reason": reason,
    }


def context_build(
    *,
    journal: Journal,
    revision: int | None = None,
    working_budget: int,
    hard_limit: int,
    tail_tokens: int | None = None,
    target_format: str = "openai",
    output_reserve: int = 0,
    write: bool = True,
    fold: Fold | None = None,
    tools: Any = None,
    views: tuple[str, ...] = VIEWS,
    fold_deadline: float | None = None,
    record_failure: bool = True,
) -> ContextResult:
    """Build the request for the agent's next model call, and its two other views.

    Args:
        journal: the scope.
        revision: the journal head seq to build as of (default: the current head).
        working_budget: tokens the request should fit in.
        hard_limit: the model's window, tokens; the request must fit in
            ``hard_limit - output_reserve``.
        tail_tokens: the protected recent tail, tokens (default: a quarter of the budget).
        target_format: ``"openai"`` (Chat Completions) or ``"anthropic"`` (Messages).
        output_reserve: tokens kept for the reply (case 14).
        write: when ``False`` nothing is written: no fold, no checkpoint (UI previews, the
            fold page's invariants panel). Either way the texts the build counted go to the
            cache (:class:`~ledger_app.services.context_reads.SharedCounts`), not the database.
        fold: build with the ledger as of this fold (default: the latest valid at revision).
        tools: the ``tools`` (schema) input the runtime sends with the request; counted
            against the budget.
        views: the views wanted (:data:`VIEWS`); the frontend view and its check are built
            only when ``"frontend"`` is named (they read and scan every entry of the session:
            a caller that needs only the request does not pay for them). The model view and
            the debug trace are one build and always made.
        fold_deadline: a :func:`time.monotonic` value: when the build must fold, it folds in
            slices (:func:`ledger_app.services.ledger_compact`) and starts none after it, then
            builds with what was folded (the proxy's ``PROXY_FOLD_SECONDS``). ``None``: one
            fold up to what the build needs, however long it takes.
        record_failure: record a failed build that may write (:func:`context_failure_record`);
            ``False`` for a caller that records the one failure it answers with itself.

    Returns:
        :class:`ContextResult`. Idempotent in effect: a second call at the same revision finds
        the rounds already folded and the same checkpoint. A failed build that may write
        (``write=True``: the API, the proxy) says in ``failure["next_step"]`` ``{"cause",
        "working_budget", "hard_limit" (budgets that would fit, ``None`` when none is known
        or the one given would do), "fold"}`` and, with ``record_failure``, is recorded
        (:func:`context_failure_record`: listed on the session's overview).

    Raises:
        ContextError: a revision beyond the head or below 0; budgets or format the builder
            refuses (the message names the field).
    """
    # the collector paused for the build, as for a replay (ledger_app.reducer.apply): a
    # build of a long journal makes some 10^5 objects that live until it returns (views,
    # rounds, parts), and each generation-2 pass walked them all again, a fifth to a third
    # of a 20,000-entry build (a fold the build asks for runs paused too: it ends with the build)
    with gc_paused():
        return _build(
            journal=journal,
            revision=revision,
            working_budget=working_budget,
            hard_limit=hard_limit,
            tail_tokens=tail_tokens,
            target_format=target_format,
            output_reserve=output_reserve,
            write=write,
            fold=fold,
            tools=tools,
            views=views,
            fold_deadline=fold_deadline,
            record_failure=record_failure,
        )


def _build(
    *,
    journal: Journal,
    revision: int | None,
    working_budget: int,
    hard_limit: int,
    tail_tokens: int | None,
    target_format: str,
    output_reserve: int,
    write: bool,
    fold: Fold | None,
    tools: Any,
    views: tuple[str, ...],
    fold_deadline: float | None,
    record_failure: bool,
) -> ContextResult:
    """:func:`context_build`'s work (its arguments, result and errors)."""
    journal = Journal.objects.select_related("session__tenant").get(pk=journal.pk)
    head = journal.head_seq
    rev = head if revision is None else revision
    if rev < 0 or rev > head:
        raise ContextError(f"revision {rev} is not between 0 and the head {head}", "revision")
    base = fold if fold is not None else fold_at(journal, rev)
    covered = covered_end(journal, base)
    # the request is built from the same read whatever views are asked for (the frontend
    # view reads every entry whole, on its own below)
    reads = read_for_build(
        journal,
        rev,
        covered_upto=covered,
        tail_tokens=tail_budget(working_budget, tail_tokens),
        limit=budget_limit(working_budget, hard_limit, output_reserve),
    )
    entry_views, stored, receipts = reads.views, reads.stored, reads.receipts
    latest = latest_fold(journal)
    may_fold = (
        write and fold is None and (latest is None or base is not None and base.pk == latest.pk)
    )

    def fold_more(upto: int) -> tuple[Mapping[str, Any], int]:
        if not may_fold:
            raise ContextError("folding is not possible here: read-only, or a later fold exists")
        if fold_deadline is None:
            ledger_fold(journal=journal, upto=min(upto, rev))
        else:
            ledger_compact(journal=journal, upto=min(upto, rev), deadline=fold_deadline)
        newest = latest_fold(journal)
        return selectors.context_ledger(journal, newest), covered_end(journal, newest)

    counts = SharedCounts(journal.pk)
    meter = token_meter(counts)
    try:
        build: ContextBuild = build_context(
            entries=entry_views,
            ledger=selectors.context_ledger(journal, base) if base is not None else None,
            covered_upto=covered,
            working_budget=working_budget,
            hard_limit=hard_limit,
            tail_tokens=tail_tokens,
            target_format=target_format,
            output_reserve=output_reserve,
            receipts=receipts,
            resolve_artifact=ArtifactLookup(journal),
            fold=fold_more if may_fold else None,
            meter=meter,
            revision=rev,
            token_counts=stored,
            tools=tools,
            end_status=end_status(journal),
            metadata_before=reads.metadata_before,
            rounds=reads.rounds,
        )
    except ContextInputError as exc:
        raise ContextError(str(exc), exc.field or "") from exc
    frontend, front_report = None, None
    if "frontend" in views:
        whole, _, all_receipts = (
            read_entries(journal, rev) if reads.metadata_before else (entry_views, None, receipts)
        )
        frontend, front_report = _frontend(whole, all_receipts, meter)
    counts.save()
    trace = build.debug_trace
    failure = build.failure
    if build.status == "failed":
        failure = dict(failure or {})
        failure["checkpoint"] = _checkpoint(journal, rev, may_fold, fold_deadline)
        if write:
            failure["next_step"] = _next_step(journal, rev, failure, build.debug_trace)
        trace["decisions"].append(
            {
                "step": 7,
                "action": "checkpoint",
                "reason": failure["checkpoint"]["reason"],
                "tokens_before": 0,
                "tokens_after": 0,
                "effect": 0,
                "fold": failure["checkpoint"]["fold"],
            }
        )
    trace["ledger"]["fold"] = base.number if base is not None else None
    #: how the build read the journal (docs/design.md 6, "The folded prefix")
    trace["reads"] = {
        "entries": len(entry_views),
        "metadata_only": sum(1 for v in entry_views if metadata_only(v)),
        "read_whole_from": reads.metadata_before or None,
        "loaded_after": len(reads.loaded),
    }
    validation = {"model": build.report.to_dict()}
    if front_report is not None:
        validation["frontend"] = front_report.to_dict()
    result = ContextResult(
        status=build.status,
        revision=rev,
        model_view=build.model_view,
        frontend_view=frontend,
        debug_trace=trace,
        failure=failure,
        validation=validation,
    )
    if result.status == "failed" and write and record_failure:
        context_failure_record(journal=journal, result=result, target_format=target_format)
    return result


def _next_step(
    journal: Journal, revision: int, failure: dict[str, Any], trace: dict[str, Any]
) -> dict[str, Any]:
    """The ``next_step`` of a failed context
    (:func:`~ledger_app.services.context_explain.context_failure_explain`): ``{"cause",
    "working_budget", "hard_limit", "fold"}``, a budget ``None`` when none is known or the
    one given would do (the hard limit suggested when the one given cannot hold the working
    budget that would fit, the request's own or the suggested one)."""
    scale = ((trace.get("tokens") or {}).get("calibration") or {}).get("scale")
    explained = (
        context_failure_explain(
            journal=journal, revision=revision, failure=failure, scale=float(scale or 1.0)
        )
        or {}
    )
    return {
        "cause": explained.get("cause", ""),
        "working_budget": explained.get("budget"),
        "hard_limit": explained.get("hard_limit"),
        "fold": explained.get("fold"),
    }


def context_failure_record(*, journal: Journal, result: ContextResult, target_format: str) -> None:
    """Record a failed context request as the audit event ``context.failed`` on its journal:
    the surface that asked (:func:`audit_app.origin.origin_current`), the revision, the
    budgets, the cause and the budgets that would fit (``result.failure["next_step"]``), so
    an operator finds it afterwards on the session's overview (README "Context views").
    :func:`context_build` records its own failures unless told not to
    (``record_failure=False``: the proxy, which tries a budget with headroom first, records
    only the failure it answers with)."""
    failure = result.failure or {}
    step = failure.get("next_step") or {}
    budgets = result.debug_trace.get("budgets") or {}
    journal_event(
        journal=journal,
        action="context.failed",
        revision=result.revision,
        details={
            "target_format": target_format,
            "working_budget": budgets.get("working_budget"),
            "hard_limit": budgets.get("hard_limit"),
            "output_reserve": budgets.get("output_reserve"),
            "tail_tokens": budgets.get("tail_tokens"),
            "request_tokens": (failure.get("figures") or {}).get("request_tokens"),
            "cause": str(step.get("cause") or "")[:500],
            "suggested_working_budget": step.get("working_budget"),
            "suggested_hard_limit": step.get("hard_limit"),
            "fold": step.get("fold"),
        },
    )


def _frontend(
    views: list[Any], receipts: Mapping[str, Mapping[str, Any]], meter: Meter
) -> tuple[dict[str, Any], ValidationReport]:
    """The frontend view and its check; an item the check still refuses is withheld (the
    module docstring). Each text is scanned for secrets and reasoning once
    (:func:`ledger_app.validation.memo_findings` shared by the filter and the check)."""
    find = memo_findings()
    frontend = frontend_view(views, receipts=receipts, count=meter.count, findings=find)
    reasoning = [v.text for v in views if v.kind == "reasoning"]
    entry_of = {v.seq: v.entry_hash for v in views}
    front_report = validate_frontend(
        frontend, reasoning=reasoning, entry_of=entry_of, findings=find
    )
    if not front_report.ok:
        # a last guard: an item the privacy filter let through but the check refuses is withheld
        bad: dict[int, list[str]] = {}
        for p in front_report.problems:
            if p.index is not None and f"withheld: {p.check}" not in bad.setdefault(p.index, []):
                bad[p.index].append(f"withheld: {p.check}")
        for i, labels in bad.items():
            item = frontend["items"][i]
            frontend["items"][i] = {
                "seq": item.get("seq"),
                "role": item.get("role"),
                "kind": item.get("kind"),
                "text": WITHHELD,
                "filtered": True,
                "labels": labels,
            }
        first = front_report
        front_report = validate_frontend(
            frontend, reasoning=reasoning, entry_of=entry_of, findings=find
        )
        front_report.checks.append(f"withheld {len(bad)} items ({len(first.problems)} problems)")
    return frontend, front_report


def request_validate(
    *,
    request: Any,
    fmt: str | None = None,
    working_budget: int | None = None,
    hard_limit: int | None = None,
    output_reserve: int = 0,
    check_secrets: bool = False,
    tools: Any = None,
    journal: Journal | None = None,
    revision: int | None = None,
) -> ValidationReport:
    """Check a request a runtime is about to send (``POST /validate``).

    Args:
        request: ``{"messages", "system"?}`` (either format).
        fmt: ``"openai"``, ``"anthropic"`` or ``None`` (detected).
        working_budget / hard_limit / output_reserve: tokens; see
            :func:`ledger_app.validation.validate_request`.
        check_secrets: also look for secrets.
        tools: the ``tools`` (schema) input sent with it: counted against the budgets.
        journal / revision: with a scope, every pin the session requires
            (:func:`session_pins`) must be present verbatim (``pin_verbatim``), and every
            ``artifact://`` reference must resolve in the scope's store with its hash.

    Returns:
        :class:`ValidationReport` (view ``"request"``).

    Raises:
        ValidateRequestInvalid: an output reserve not below the hard limit (field
            ``output_reserve``), as a context request refuses it.
        ContextError: a revision outside the journal.
    """
    if hard_limit is not None and output_reserve >= hard_limit:
        raise ValidateRequestInvalid(
            f"output_reserve: {output_reserve} leaves no room in the hard limit {hard_limit}",
            "output_reserve",
        )
    expect = None
    resolve = None
    if journal is not None:
        journal = Journal.objects.select_related("session__tenant").get(pk=journal.pk)
        expect = Expectations(pins=session_pins(journal=journal, revision=revision))
        resolve = ArtifactLookup(journal)
    return validate_request(
        request,
        fmt=fmt,
        working_budget=working_budget,
        hard_limit=hard_limit,
        output_reserve=output_reserve,
        meter=token_meter(),
        expect=expect,
        resolve_artifact=resolve,
        check_secrets=check_secrets,
        view="request",
        tools=tools,
    )


def context_preview(
    *, journal: Journal, revision: int | None = None, fold: Fold | None = None, **budgets: Any
) -> ContextResult:
    """:func:`context_build` without writing anything (no fold, no checkpoint), for the UI.

    Budgets not given default to :func:`context_budgets` (a working budget given alone is
    checked against the default hard limit; a hard limit given alone caps the working budget).
    """
    default = context_budgets()
    budgets.setdefault("hard_limit", default.hard_limit)
    budgets.setdefault("working_budget", min(default.working_budget, budgets["hard_limit"]))
    return context_build(journal=journal, revision=revision, fold=fold, write=False, **budgets)


def fold_invariants(*, fold: Fold, recompute: bool = False) -> dict[str, Any]:
    """The invariants panel of one fold: the context as of the fold, validated.

    Builds nothing into the ledger (a preview, ``write=False``) but **writes** the panel: a
    property of the fold, computed once at the default budgets
    (:func:`~ledger_app.services.context_records.context_budgets`) and stored with the fold (:class:`ledger_app.models.FoldInvariants`),
    then read; a fold without one (older than the table, or never shown) gets it computed and
    saved on its first read. A change of the default budgets, or ``recompute``, computes it
    again. Two readers racing on a fold both compute; the second write wins with the same
    value (the panel is deterministic: the journal is append-only and the fold immutable).

    Returns:
        ``{"status", "revision", "model": report, "frontend": report, "failure",
        "stored": bool}`` (``stored``: read from the fold's row, not computed now).
    """
    budgets = context_budgets()
    key = budgets.as_kwargs()
    stored = FoldInvariants.objects.filter(fold=fold).first()
    if stored is not None and stored.budgets == key and not recompute:
        return {**stored.panel, "stored": True}
    result = context_preview(journal=fold.journal, revision=fold.revision, fold=fold, **key)
    panel = {
        "status": result.status,
        "revision": result.revision,
        "model": result.validation["model"],
        "frontend": result.validation["frontend"],
        "failure": result.failure,
    }
    FoldInvariants.objects.update_or_create(fold=fold, defaults={"budgets": key, "panel": panel})
    return {**panel, "stored": False}
