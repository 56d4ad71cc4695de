"""Celery task of recovery: a fold with recovery before it (thin, STYLE.md point 7).

Ids in; the journal is fetched again; a journal that is gone ends the run quietly; one
service call (:func:`recovery_app.services.recovery_fold`). Only the database's transient
errors are retried, with backoff and jitter. Redelivery is safe: the fold is idempotent by
its range hash, and a trigger fires once per message (a second run records
``not_triggered``).
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task
from django.db import InterfaceError, OperationalError

from journal_app.models import Journal
from recovery_app.services import recovery_fold

TRANSIENT = (OperationalError, InterfaceError)


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def fold_with_recovery(self: Task, journal_id: int, upto: int | None = None) -> dict[str, Any]:
    """Recover, then fold the journal's unfolded complete rounds (DESIGN.md sections 5.2, 7).

    Returns:
        ``{"receipt", "outcome", "fold", "created", "reason", "recovered"}``: the receipt's id
        and outcome, the fold's number (``None`` when nothing was foldable) and the ids of
        recovered facts that went to the verifier with it.
    """
    journal = Journal.objects.filter(pk=journal_id).first()
    if journal is None:
        return {"journal_id": journal_id, "reason": "journal gone"}
    out = recovery_fold(journal=journal, upto=upto)
    fold = out.fold.fold
    return {
        "receipt": out.receipt.pk if out.receipt is not None else None,
        "outcome": out.receipt.outcome if out.receipt is not None else None,
        "fold": fold.number if fold is not None else None,
        "created": out.fold.created,
        "reason": out.fold.reason,
        "recovered": out.entered,
    }
