"""Task runs of dead workers are marked ``lost`` (ledger_app.runs)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from ledger_app.models import TaskRun
from ledger_app.runs import task_runs_mark_lost

pytestmark = pytest.mark.django_db


def _run(task_id: str, worker: str, *, status=TaskRun.Status.RUNNING, age: float = 1) -> TaskRun:
    return TaskRun.objects.create(
        task_name="ledger_app.tasks.fold_journal",
        task_id=task_id,
        worker=worker,
        status=status,
        started_at=timezone.now() - timedelta(seconds=age),
    )


def _statuses() -> dict[str, str]:
    return dict(TaskRun.objects.values_list("task_id", "status"))


def test_a_restarted_worker_marks_its_earlier_runs_lost():
    _run("a", "w1@host")
    _run("b", "w2@host")

    marked = task_runs_mark_lost(restarted="w1@host")

    assert [r.task_id for r in marked] == ["a"]
    assert _statuses() == {"a": "lost", "b": "running"}
    lost = TaskRun.objects.get(task_id="a")
    assert lost.finished_at is not None
    assert (
        lost.error
        == "WorkerLost: worker w1@host restarted before the run finished; the broker delivers the task again"
    )


def test_runs_of_workers_that_do_not_answer_are_lost_and_finished_runs_are_kept():
    _run("a", "dead@host")
    _run("b", "alive@host")
    _run("c", "dead@host", status=TaskRun.Status.SUCCEEDED)
    _run("d", "")  # in-process: no worker to ask

    task_runs_mark_lost(live_workers={"alive@host"})

    assert _statuses() == {"a": "lost", "b": "running", "c": "succeeded", "d": "running"}


def test_a_run_older_than_the_time_limit_is_lost_whoever_ran_it():
    _run("old", "", age=7200)
    _run("new", "", age=10)

    task_runs_mark_lost(stale_after=timedelta(hours=1))

    assert _statuses() == {"old": "lost", "new": "running"}


def test_marking_twice_marks_once():
    _run("a", "dead@host")

    assert len(task_runs_mark_lost(live_workers=set())) == 1
    assert task_runs_mark_lost(live_workers=set()) == []
