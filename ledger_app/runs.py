"""State changes of :class:`~ledger_app.models.TaskRun`: the record of every task execution.

docs/design.md section 9: every failure is recorded. The tasks in :mod:`ledger_app.tasks` call
these around their one service call; the auto-scheduler calls :func:`task_run_enqueue`.

A worker killed mid-task (``kill -9``, OOM, a lost host) cannot record anything: its run
stays ``running``. :func:`task_runs_mark_lost` marks such runs ``lost``; every worker calls
it when it starts, and the ``mark_lost_task_runs`` task runs it periodically (Celery beat).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from celery import Task
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from journal_app.errors import DomainError
from journal_app.models import Journal
from ledger_app.models import TaskRun


class BrokerUnavailable(DomainError):
    """The task broker cannot be reached: the task was not queued (HTTP 503)."""

    status = 503
    code = "broker_unavailable"


#: what a run that never reached the broker says in ``TaskRun.error``
BROKER_DOWN = "not queued: the task broker is unreachable"


def task_run_enqueue(
    *, task: Task, journal: Journal, send_now: bool = False, **kwargs: Any
) -> TaskRun:
    """Record a ``queued`` run and send ``task(**kwargs)``.

    The run's ``task_id`` is chosen here, so the execution that picks the message up claims
    this row (:func:`task_run_start`). A run that cannot reach the broker is marked
    ``failed`` with :data:`BROKER_DOWN` and the broker's error, never left ``queued``.

    Args:
        send_now: send at once and raise when the broker is down (a person asked for this
            task and waits for the answer: the API's fold request). Otherwise the message
            goes once the transaction commits and a broker error is logged, not raised,
            because the caller's work (an append) is already committed.

    Returns:
        The queued :class:`TaskRun`.

    Raises:
        BrokerUnavailable: ``send_now`` and the broker refused the connection.
    """
    run = TaskRun.objects.create(
        task_name=task.name,
        task_id=str(uuid.uuid4()),
        journal=journal,
        status=TaskRun.Status.QUEUED,
    )

    def send() -> None:
        try:
            task.apply_async(kwargs=kwargs, task_id=run.task_id)
        except (OperationalError, ConnectionError) as exc:
            TaskRun.objects.filter(pk=run.pk, status=TaskRun.Status.QUEUED).update(
                status=TaskRun.Status.FAILED,
                error=f"{BROKER_DOWN}: {exc}",
                finished_at=timezone.now(),
            )
            raise BrokerUnavailable(
                f"the fold was not queued: the task broker is unreachable ({exc}); "
                "nothing was folded, ask again when it is back"
            ) from exc

    if send_now:
        send()
    else:
        # Not delay_on_commit: it has no ``robust`` flag.
        transaction.on_commit(send, robust=True)
    return run


def task_run_start(
    *, task_name: str, task_id: str, journal: Journal | None, attempt: int, worker: str = ""
) -> TaskRun:
    """Mark an execution ``running``: claim the ``queued`` row of ``task_id``, else add a row.

    The claim is a compare-and-set on the status, so a redelivered message (same
    ``task_id``) gets a row of its own instead of taking over the first one.

    Args:
        task_name: the Celery task name.
        task_id: the Celery task id (``""`` when called outside Celery).
        journal: the journal, or ``None`` when the id no longer exists.
        attempt: 1 for the first execution, Celery's ``request.retries + 1`` after that.
        worker: the Celery node name running it (``""`` when run eagerly, in-process).
    """
    running = {
        "status": TaskRun.Status.RUNNING,
        "attempt": attempt,
        "started_at": timezone.now(),
        "worker": worker[:255],
    }
    queued = TaskRun.objects.filter(task_id=task_id, status=TaskRun.Status.QUEUED).first()
    if queued is not None:
        claimed = TaskRun.objects.filter(pk=queued.pk, status=TaskRun.Status.QUEUED)
        if claimed.update(**running):
            queued.refresh_from_db()
            return queued
    return TaskRun.objects.create(task_name=task_name, task_id=task_id, journal=journal, **running)


def task_run_finish(
    run: TaskRun, *, status: str, result: dict[str, Any] | None = None, error: str = ""
) -> TaskRun:
    """Record how an execution ended: ``succeeded``, ``failed`` or ``retrying``.

    Args:
        run: the row from :func:`task_run_start`.
        status: a :class:`TaskRun.Status` value.
        result: JSON-ready outcome, e.g. ``{"fold": 3, "created": True, "reason": ""}``.
        error: ``"ExceptionType: message"`` for failures and retries.
    """
    run.status = status
    run.result = result or {}
    run.error = error
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "result", "error", "finished_at"])
    return run


def task_runs_mark_lost(
    *,
    restarted: str = "",
    live_workers: Collection[str] | None = None,
    stale_after: timedelta | None = None,
    now: datetime | None = None,
) -> list[TaskRun]:
    """Mark ``lost`` the ``running`` runs whose worker is known to be gone.

    A run counts as lost when (any of):

    * its worker is ``restarted``: a worker of that node name is starting now, so the
      process that recorded the run under that name has ended;
    * ``live_workers`` is given (the node names answering a ping) and its worker is not
      among them;
    * it started more than ``stale_after`` ago (longer than the task time limit, so no live
      worker can still be running it; covers in-process runs, which record no worker).

    Each update is a compare-and-set on ``status = running``: a run that finishes meanwhile
    keeps its outcome. A lost run's message was acknowledged late (``acks_late``), so the
    broker delivers it again and another run records the outcome; nothing is re-sent here.

    Returns:
        The runs marked, with ``status`` ``lost``, ``finished_at`` and ``error`` saying why.
    """
    now = now or timezone.now()
    running = TaskRun.objects.filter(status=TaskRun.Status.RUNNING)
    marked = []
    for run in running.order_by("pk"):
        if restarted and run.worker == restarted:
            why = f"worker {run.worker} restarted before the run finished"
        elif live_workers is not None and run.worker and run.worker not in live_workers:
            why = f"worker {run.worker} no longer answers"
        elif stale_after is not None and run.started_at and run.started_at < now - stale_after:
            why = f"still running after {int(stale_after.total_seconds())} s (the time limit)"
        else:
            continue
        error = f"WorkerLost: {why}; the broker delivers the task again"
        claimed = running.filter(pk=run.pk).update(
            status=TaskRun.Status.LOST, finished_at=now, error=error
        )
        if claimed:
            run.status, run.finished_at, run.error = TaskRun.Status.LOST, now, error
            marked.append(run)
    return marked
