"""The one fold service: every fold, whoever asks, runs here.

:func:`ledger_fold` runs the stages of :mod:`ledger_app.services.fold_stages` in order
(plan -> compose -> judge -> reduce -> store; docs/architecture.md, "Data flow of a fold"),
then a consolidation when one is due (:func:`consolidation_due`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from journal_app.models import Journal
from ledger_app import hooks
from ledger_app.mechanical_writer import Writer
from ledger_app.model_writer import ModelWriter
from ledger_app.services import fold_stages as stages
from ledger_app.services.consolidate import ledger_consolidate
from ledger_app.services.store import FoldResult
from ledger_app.services.writer_registry import writer_resolve


def ledger_fold(
    *,
    journal: Journal,
    upto: int | None = None,
    writer: str | Writer | ModelWriter | None = None,
    recover: bool = True,
    recovery_options: dict[str, Any] | None = None,
) -> FoldResult:
    """THE fold service: folds the unfolded complete API rounds of ``journal`` up to ``upto``.

    Called by every entry point (docs/architecture.md, "The five state changes"). One
    recovery attempt first, then the stages of :mod:`~ledger_app.services.fold_stages`:
    plan, compose, judge, reduce, store. One fold at a time per branch (the journal row is
    locked); a model writer plans and composes before the lock, and under it the plan must
    match again or nothing is stored. A fold covering exactly the same entries as an
    existing one returns that fold (idempotency key: the covered range hash).

    Args:
        journal: the scope to fold.
        upto: highest seq the fold may cover (default: head).
        writer: ``None`` for the configured default, a name (``"offline"``, ``"model"``,
            ``"mechanical"``), or a writer object
            (:func:`~ledger_app.services.writer_registry.writer_resolve`).
        recover: ``False`` skips the recovery hook.
        recovery_options: passed to the hook (``model``, ``budget``, ``clock``).

    Returns:
        :class:`FoldResult`; ``fold`` is ``None`` with a ``reason`` when nothing is foldable.

    Raises:
        FoldFailed: the model failed; a ``failed`` FoldAttempt is stored, nothing else.
        FoldRefused: a pin missing, altered or no longer matching its entry; nothing stored.
        WriterUnknown / ModelNotConfigured: a bad writer name; nothing stored.
    """
    w = writer_resolve(writer)
    recovery = _recover(journal, recover, recovery_options)
    first: stages.Plan | None = None
    composed = None
    if stages.calls_models(w):  # the models work outside the lock
        journal = Journal.objects.select_related("session__tenant").get(pk=journal.pk)
        planned = stages.plan(journal, upto, w)
        if isinstance(planned, FoldResult):
            return _with_receipt(planned, recovery)
        first, composed = planned, stages.compose(journal, planned, w)
    with transaction.atomic():
        journal = (
            Journal.objects.select_for_update().select_related("session__tenant").get(pk=journal.pk)
        )
        plan = stages.plan(journal, first.end if first is not None else upto, w)
        if isinstance(plan, FoldResult):
            return _with_receipt(plan, recovery)
        if first is not None and not plan.matches(first):
            reason = "another fold changed the ledger while the models were working; fold again"
            return FoldResult(None, False, reason)
        if composed is None:
            composed = stages.compose(journal, plan, w)
        judged = stages.judge(journal, plan, composed, recovery)
        manifest = stages.reduce(journal, plan, composed, judged, recovery)
        result = stages.store(
            journal, plan, composed, judged, manifest, writer_id=w.id, recovery=recovery
        )
    if result.created and result.fold is not None and consolidation_due(result.fold.manifest):
        result.consolidation = ledger_consolidate(journal=journal).fold
    return result


def _recover(
    journal: Journal, run: bool, options: dict[str, Any] | None
) -> hooks.FoldRecovery | None:
    # the recovery registered for every fold (ledger_app.hooks), run once before it; the
    # hook writes its receipt
    hook = hooks.fold_recovery() if run else None
    return hook(journal=journal, **(options or {})) if hook is not None else None


def _with_receipt(result: FoldResult, recovery: hooks.FoldRecovery | None) -> FoldResult:
    # a run that stored no fold still names the receipt of its recovery attempt
    result.receipt = recovery.receipt if recovery is not None else None
    return result


def consolidation_due(manifest: dict[str, Any]) -> bool:
    """Whether a fold with this manifest is followed by a consolidation.

    Consolidation starts by itself once the ledger passes ``LEDGER_CONSOLIDATE_AT_TOKENS``
    (67,500 tokens of active fact text, ``manifest["tokens"]["ledger_active"]``), as a fold
    of its own, when there is something to evict (P2/P3 facts,
    ``manifest["storage"]["evictable_tokens"]`` > 0), and when it is worth a whole-ledger
    pass: the evictable facts hold at least what an ordinary consolidation frees (the start
    minus ``LEDGER_CHECKPOINT_TARGET_TOKENS``: 47,500 tokens), or the ledger has grown by
    that much since the last consolidation (``storage["consolidated_at"]``, 0 before the
    first). All three figures are carried from fold to fold, so the gate reads no ledger.
    A ledger below the target after consolidating behaves as before (it grows by 47,500
    tokens before the start); one whose P0/P1 facts alone pass the start
    (``target_unreachable``) used to be rebuilt and re-planned after every fold, evicting
    one fold's P2 facts at a time: now once per 47,500 tokens of growth (a fold's cost
    does not depend on the ledger's size). ``compact`` still runs the full check at its end.
    """
    start = settings.LEDGER_CONSOLIDATE_AT_TOKENS
    active = int((manifest.get("tokens") or {}).get("ledger_active") or 0)
    storage = manifest.get("storage") or {}
    if active < start:
        return False
    if "evictable_tokens" not in storage:
        return True  # a fold stored before these figures were kept: as before
    evictable = int(storage["evictable_tokens"])
    floor = max(1, start - settings.LEDGER_CHECKPOINT_TARGET_TOKENS)
    grown = active - int(storage.get("consolidated_at") or 0)
    return evictable > 0 and (evictable >= floor or grown >= floor)
