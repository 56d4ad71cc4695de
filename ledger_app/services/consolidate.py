"""Consolidation into a checkpoint fold (docs/design.md 5.4)."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import transaction

from journal_app.models import Journal
from journal_app.tokens import count_tokens, source_label
from ledger_app.budget import plan_consolidation
from ledger_app.delta_manifest import delta_make, manifest_make
from ledger_app.model_writer import FALLBACK_NOTE as FALLBACK_NOTE  # re-exported: views
from ledger_app.models import Fold
from ledger_app.services.pins_check import instructions_check
from ledger_app.services.state import latest_fold, ledger_state
from ledger_app.services.store import FoldResult, active_tokens, delta_apply, fold_store, pins_count


def ledger_consolidate(
    *,
    journal: Journal,
    target_tokens: int | None = None,
    start_tokens: int | None = None,
) -> FoldResult:
    """Consolidate the ledger into a checkpoint when it has grown past the start figure.

    docs/design.md 5.4: consolidation starts at ``LEDGER_CONSOLIDATE_AT_TOKENS`` (67,500) and aims
    for ``LEDGER_CHECKPOINT_TARGET_TOKENS`` (20,000). It evicts P3, then P2 (they stay
    recoverable from the journal) and never a P0 or P1 fact; when those alone exceed the
    target the checkpoint is stored with outcome ``target_unreachable`` and the figures.
    The evictions are an ordinary delta (``evict`` ops) judged by the reducer, stored as a
    ``consolidation`` fold that is always a checkpoint (its full state is stored).

    Returns:
        :class:`FoldResult`; ``fold`` is ``None`` with a reason when no consolidation is due.
    """
    target = settings.LEDGER_CHECKPOINT_TARGET_TOKENS if target_tokens is None else target_tokens
    start = settings.LEDGER_CONSOLIDATE_AT_TOKENS if start_tokens is None else start_tokens
    with transaction.atomic():
        journal = Journal.objects.select_for_update().get(pk=journal.pk)
        previous = latest_fold(journal)
        if previous is None:
            return FoldResult(None, False, "nothing to consolidate: no fold yet")
        plan = plan_consolidation(
            ledger_state(journal),
            target_tokens=target,
            start_tokens=start,
            count=lambda t: count_tokens(t, settings.TOKEN_ENCODING),
        )
        if not plan.needed:
            return FoldResult(
                None, False, f"not needed: ledger {plan.before_tokens} tokens, below {start}"
            )
        if not plan.ops:
            # Nothing left to evict: another checkpoint would be the same state (a no-op loop).
            return FoldResult(
                None,
                False,
                f"target unreachable and nothing evictable: P0+P1 hold {plan.kept_p0_p1_tokens} "
                f"tokens, target {target}",
            )
        key = hashlib.sha256(f"consolidation:{previous.state_hash}:{target}".encode()).hexdigest()
        existing = Fold.objects.filter(journal=journal, range_hash=key).first()
        if existing is not None:
            return FoldResult(existing, False, "already consolidated")
        number = previous.number + 1
        delta = delta_make(fold=number, revision=journal.head_seq, ops=plan.ops)
        applied = delta_apply(journal, previous, delta)
        outcome = (
            Fold.Outcome.TARGET_UNREACHABLE
            if plan.outcome == "target_unreachable"
            else Fold.Outcome.ACCEPTED
        )
        fold = fold_store(
            journal=journal,
            applied=applied,
            checkpoint=True,
            kind=Fold.Kind.CONSOLIDATION,
            previous=previous,
            revision=journal.head_seq,
            range_hash=key,
            outcome=outcome,
            writer="consolidation",
            verifier="reducer-rules",
            manifest=manifest_make(
                consolidation=plan.figures(),
                outcome=outcome,
                previous_fold=previous.number,
                revision=journal.head_seq,
                writer="consolidation",
                verifier="reducer-rules",
                instructions=instructions_check(
                    journal, {"facts": {}}, pins_total=pins_count(journal, applied)
                ),
                tokens={
                    "ledger_active": active_tokens(journal, applied),
                    "source": source_label(settings.TOKEN_ENCODING),
                },
            ),
            ops_rejected=len(applied.reduction.rejected),
        )
    return FoldResult(fold, True)
