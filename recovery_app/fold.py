"""Recovery before every fold (docs/design.md section 7): the hook the one fold service calls.

:func:`fold_recovery_prepare` is registered in :meth:`recovery_app.apps.RecoveryAppConfig.ready`
with :func:`ledger_app.hooks.fold_recovery_register`, so
:func:`ledger_app.services.ledger_fold` runs it before every fold, whoever asked for it
(import, append, task, API, ``compact``, the context builder, the UI). It runs one bounded
attempt (:func:`recovery_app.services.recovery_run`; a failed attempt is recorded and the fold
carries on) and hands the fold the recovered ``add`` ops of this attempt and of earlier
receipts that no fold took yet; the reducer judges them like any other op, each citing the
raw entry with its exact quote.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from journal_app.models import Journal
from ledger_app.hooks import FoldRecovery
from ledger_app.models import Fold
from recovery_app import services
from recovery_app.models import Receipt

log = logging.getLogger("ledgerkeep.recovery")


def fold_recovery_prepare(*, journal: Journal, **run: Any) -> FoldRecovery:
    """Run one recovery attempt for ``journal`` and say what the next fold should carry.

    Args:
        journal: the journal about to be folded.
        run: passed to :func:`recovery_app.services.recovery_run` (``model``, ``budget``,
            ``clock``).

    Returns:
        :class:`ledger_app.hooks.FoldRecovery`: ``ops`` (recovered adds waiting to enter the
        ledger), ``receipt`` (``None`` when not even a receipt could be written), ``finish``
        (marks the receipts as entered once the fold is stored, with the reducer's verdicts
        on their facts). Never raises: recovery failing never stops a fold.
    """
    try:
        receipt = services.recovery_run(journal=journal, **run)
    except Exception:  # not even a receipt could be written: fold without recovery
        log.exception("recovery before the fold of %s failed", journal.pk)
        return FoldRecovery(receipt=None)
    pending = list(
        Receipt.objects.filter(journal=journal, entered_fold__isnull=True)
        .exclude(recovered=[])
        .order_by("pk")
    )

    def finish(fold: Fold, proposed: Sequence[str]) -> None:
        verdicts = [v for v in fold.delta_dict.get("verdicts", []) if v.get("fact_id") in proposed]
        for r in pending:
            ids = {op["fact"]["id"] for op in r.recovered}
            r.entered_fold = fold
            r.verdicts = [v for v in verdicts if v["fact_id"] in ids]
            r.save(update_fields=["entered_fold", "verdicts"])
        receipt.refresh_from_db()

    return FoldRecovery(
        ops=[op for r in pending for op in r.recovered],
        receipt=receipt,
        note=", ".join(f"receipt {r.pk}" for r in pending),
        finish=finish if pending else None,
    )
