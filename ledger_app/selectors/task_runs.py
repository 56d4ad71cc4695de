"""Reads of the task runs (:class:`~ledger_app.models.TaskRun`): a journal's, one task's
latest in a tenant, and how many runs each task id recorded."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count
from django.http import Http404

from journal_app.models import Journal, Tenant
from ledger_app.models import TaskRun


def task_runs(journal: Journal, *, limit: int) -> list[TaskRun]:
    """The journal's task runs, newest first, at most ``limit``."""
    return list(
        TaskRun.objects.filter(journal=journal)
        .select_related("journal__session")
        .order_by("-created_at", "-pk")[:limit]
    )


def task_run_for_tenant(tenant: Tenant, task_id: str) -> TaskRun:
    """The latest execution record of ``task_id`` in ``tenant``; ``Http404`` otherwise."""
    run = (
        TaskRun.objects.filter(task_id=task_id, journal__session__tenant=tenant)
        .select_related("journal__session")
        .order_by("-created_at", "-pk")
        .first()
    )
    if run is None:
        raise Http404("no such task")
    return run


def task_executions(task_ids: Iterable[str]) -> dict[str, int]:
    """How many runs are recorded for each task id (retries and redeliveries add rows)."""
    rows = (
        TaskRun.objects.filter(task_id__in=list(task_ids))
        .order_by()
        .values("task_id")
        .annotate(n=Count("pk"))
        .values_list("task_id", "n")
    )
    return dict(rows)
