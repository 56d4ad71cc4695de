"""Celery tasks of the ledger: thin wrappers around one service each (STYLE.md point 7).

Ids in; the journal is fetched again; a journal that is gone ends the run quietly; one
service call; every execution leaves a :class:`~ledger_app.models.TaskRun`. Only the
database's transient errors are retried, with exponential backoff and jitter. Idempotency
comes from the data (the fold's range hash under the journal row lock), which is what makes
``acks_late`` safe: a message redelivered after a worker crash folds nothing twice.

The run a crashed worker left ``running`` is marked ``lost`` (:func:`mark_lost_task_runs`):
by every worker as it starts (the ``worker_ready`` signal) and periodically by Celery beat
(``CELERY_BEAT_SCHEDULE`` in the settings).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from celery import Task, current_app, shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import InterfaceError, OperationalError

from journal_app.models import Journal
from ledger_app import services
from ledger_app.models import TaskRun
from ledger_app.runs import task_run_finish, task_run_start, task_runs_mark_lost

log = logging.getLogger("ledgerkeep.tasks")
#: Seconds to wait for the workers' answers to a ping.
PING_TIMEOUT = 2.0

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
        worker=task.request.hostname or "",
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
    """Fold the journal's unfolded complete API rounds (docs/design.md sections 5.2 and 9).

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


def _live_workers(me: str) -> set[str] | None:
    """Node names answering a ping (``me`` included), or ``None`` when nobody can be asked."""
    if current_app.conf.task_always_eager:
        return None
    try:
        replies = current_app.control.ping(timeout=PING_TIMEOUT)
    except Exception:  # no broker: say nothing about liveness
        log.warning("cannot ping the workers; lost runs are found by age only")
        return None
    return {name for reply in replies for name in reply} | ({me} if me else set())


def _stale_after() -> timedelta:
    return timedelta(seconds=settings.TASK_RUN_LOST_AFTER_SECONDS)


@shared_task(bind=True)
def mark_lost_task_runs(self: Task) -> dict[str, Any]:
    """Mark ``lost`` the ``running`` runs whose worker is gone (periodic, Celery beat).

    One call of :func:`ledger_app.runs.task_runs_mark_lost` with the workers answering a
    ping and ``TASK_RUN_LOST_AFTER_SECONDS``. Idempotent: a run is marked once.

    Returns:
        ``{"lost": [task ids marked]}``.
    """
    me = self.request.hostname or ""
    marked = task_runs_mark_lost(live_workers=_live_workers(me), stale_after=_stale_after())
    return {"lost": [run.task_id for run in marked]}


@worker_ready.connect
def _mark_lost_on_start(sender: Any = None, **kwargs: Any) -> None:
    """A starting worker marks the runs of dead workers ``lost``."""
    me = getattr(sender, "hostname", "") or ""
    try:
        marked = task_runs_mark_lost(
            restarted=me, live_workers=_live_workers(me), stale_after=_stale_after()
        )
    except Exception:  # never stop a worker from starting over bookkeeping
        log.exception("could not mark lost task runs at worker start")
        return
    for run in marked:
        log.warning("task run %s (%s) marked lost: %s", run.task_id, run.task_name, run.error)


@shared_task(acks_late=True, autoretry_for=TRANSIENT, retry_backoff=True, max_retries=5)
def check_ledger(journal_id: int) -> dict[str, Any]:
    """Run the full check of a journal's ledger and store it for the pages.

    One call of :func:`ledger_app.services.full_check.ledger_check`; queued by a page that
    finds no stored check for the ledger's current state. It reads the ledger and writes
    only the stored check (one row per journal, replaced); it is idempotent and leaves no
    ``TaskRun`` (it changes nothing of the ledger a run would account for).

    Returns:
        The stored check (``state``, ``problems``, ``checked_at``), or ``{"journal_id": id,
        "reason": "journal gone"}``.
    """
    from ledger_app.services.full_check import ledger_check

    journal = Journal.objects.filter(pk=journal_id).first()
    if journal is None:
        return {"journal_id": journal_id, "reason": "journal gone"}
    return ledger_check(journal=journal).to_dict()
