"""Celery tasks of the ledger: thin wrappers around one service each (STYLE.md point 7).

Ids in; the journal is fetched again; a journal that is gone ends the run quietly; one
service call; every execution leaves a :class:`~ledger_app.models.TaskRun`. Only the
database's transient errors are retried, with exponential backoff and jitter. Idempotency
comes from the data (the fold's range hash under the journal row lock), which is what makes
``acks_late`` safe: a message redelivered after a worker crash folds nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Task, shared_task
from django.db import InterfaceError, OperationalError

from journal_app.models import Journal
from ledger_app import services
from ledger_app.models import TaskRun
from ledger_app.runs import task_run_finish, task_run_start

#: Errors worth another attempt: a dropped connection, a lock timeout, a failover.
TRANSIENT = (OperationalError, InterfaceError)


def _will_retry(task: Task, exc: Exception) -> bool:
    if not isinstance(exc, TRANSIENT) or task.request.retries >= task.max_retries:
        return False
    # Eager with propagation, Celery raises Retry to the caller instead of running again.
    return not (task.request.is_eager and task.app.conf.task_eager_propagates)


def _summary(outcome: Any) -> dict[str, Any]:
    if isinstance(outcome, services.CompactReport):
        made = outcome.folds
        return {
            "fold": made[-1].number if made else None,
            "created": bool(made),
            "reason": outcome.summary(),
            "folds": [f.number for f in made],
            "writer": outcome.writer,
            "receipts": [r.receipt.pk for r in outcome.rows if r.receipt is not None],
            "recovered": [i for r in outcome.rows for i in r.recovered],
        }
    fold = getattr(outcome, "fold", None)
    return {
        "fold": fold.number if fold is not None else None,
        "created": bool(getattr(outcome, "created", False)),
        "reason": getattr(outcome, "reason", ""),
    }


def _recorded(
    task: Task, journal_id: int, service: Callable[..., Any], **kwargs: Any
) -> dict[str, Any]:
    """Fetch the journal, record the run around ``service(journal=..., **kwargs)``."""
    journal = Journal.objects.filter(pk=journal_id).first()
    run = task_run_start(
        task_name=task.name,
        task_id=task.request.id or "",
        journal=journal,
        attempt=task.request.retries + 1,
    )
    if journal is None:
        result = {"journal_id": journal_id, "reason": "journal gone"}
        return task_run_finish(run, status=TaskRun.Status.SUCCEEDED, result=result).result
    try:
        outcome = service(journal=journal, **kwargs)
    except Exception as exc:
        status = TaskRun.Status.RETRYING if _will_retry(task, exc) else TaskRun.Status.FAILED
        task_run_finish(run, status=status, error=f"{type(exc).__name__}: {exc}")
        raise
    return task_run_finish(run, status=TaskRun.Status.SUCCEEDED, result=_summary(outcome)).result


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def fold_journal(
    self: Task, journal_id: int, upto: int | None = None, writer: str | None = None
) -> dict[str, Any]:
    """Fold the journal's unfolded complete API rounds (DESIGN.md sections 5.2 and 9).

    One call of :func:`ledger_app.services.ledger_compact`: folds in slices of about
    ``LEDGER_FOLD_THRESHOLD_TOKENS`` covered tokens through the one fold service (the
    configured writer, the recovery scan, the same manifest as every other fold), then
    consolidation when the ledger is past its start figure.

    Args:
        journal_id: primary key of the :class:`~journal_app.models.Journal`.
        upto: highest seq the folds may cover; ``None`` means the head at run time.
        writer: a writer name, or ``None`` for the configured default.

    Returns:
        The run's result: ``{"fold": last fold number | None, "created": bool, "reason":
        what was folded and by which writer, "folds": [numbers], "writer": writer id}``, or
        ``{"journal_id": id, "reason": "journal gone"}`` when the journal no longer exists.

    Idempotent: the fold service locks the journal row and keys each fold by scope + covered
    range hash, so a second delivery records a run with ``created: False`` and adds no fold.
    Retries: :data:`TRANSIENT` errors only, up to 5 times with exponential backoff and
    jitter; each attempt is a ``TaskRun`` (``retrying``, then ``succeeded`` or ``failed``).
    Any other error is recorded ``failed`` and raised. Eager with
    ``CELERY_TASK_EAGER_PROPAGATES`` (the embedded default) Celery runs no retries: the run
    is recorded ``failed`` and ``celery.exceptions.Retry`` reaches the caller.
    """
    return _recorded(self, journal_id, services.ledger_compact, upto=upto, writer=writer)


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def consolidate_journal(self: Task, journal_id: int) -> dict[str, Any]:
    """Consolidate the journal's ledger into a checkpoint (DESIGN.md sections 5.4 and 9).

    Args:
        journal_id: primary key of the :class:`~journal_app.models.Journal`.

    Returns:
        The run's result, shaped as :func:`fold_journal`'s (the service's ``fold``,
        ``created`` and ``reason``).

    Idempotency and retries as :func:`fold_journal`; the service owns the idempotency key.
    """
    return _recorded(self, journal_id, services.ledger_consolidate)
