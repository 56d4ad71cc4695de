"""``kill -9`` of a Celery worker in the middle of a fold (docs/design.md section 9).

The worker is made to stop inside ``ledger_fold``'s transaction by a lock the test holds
from its own connection, at one of two places:

* ``journal-lock``: ``SELECT ... FOR UPDATE`` on the journal row, so the worker waits at the
  start of the fold (its task run is recorded ``running``, nothing else written yet);
* ``fold-insert``: an uncommitted fold row with number 1 (inserted with foreign-key
  triggers off, so the journal row stays free), so the worker does all the work (reads,
  writer, reducer, pin check) and waits on the unique index while inserting its fold.

Then the worker's process group is killed with SIGKILL, the lock released, and a new worker
started. The message was acknowledged late (``acks_late``), so Redis hands it to the new
worker once the visibility timeout has passed; the new worker folds. Nothing of the killed
transaction is ever visible, and exactly one fold exists at the end. The killed worker's
run, left ``running``, is marked ``lost`` by the new worker as it starts.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Journal
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.models import Fold, TaskRun
from ledger_app.tasks import fold_journal
from tests.failure.conftest import backend_alive, lock_waiters, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

VISIBILITY_TIMEOUT = 3


def _journal(settings) -> Journal:
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9  # no fold from the append itself
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key="crash"))
    journal_append(
        journal=journal,
        items=[
            message("system", "Never touch the payments tables without asking first."),
            message("user", "Fix the refund rounding."),
            tool_call("c1", "exec", {"command": "pytest tests/test_refunds.py"}),
            tool_result("c1", "1 failed", is_error=True, exit_code=1),
            tool_call("c2", "exec", {"command": "pytest tests/test_refunds.py"}),
            tool_result("c2", "1 passed", exit_code=0),
            message("assistant", "The refund test passes."),
        ],
    )
    return journal


def _hold(where: str, journal: Journal) -> None:
    """Inside the caller's transaction: take the lock that stops the worker at ``where``."""
    if where == "journal-lock":
        Journal.objects.select_for_update().get(pk=journal.pk)
        return
    with connection.cursor() as cur:
        cur.execute("SET LOCAL session_replication_role = replica")  # no FK lock on the journal
    Fold.objects.create(
        journal_id=journal.pk,
        number=1,
        revision=0,
        range_hash="b" * 64,
        outcome=Fold.Outcome.FAILED,
        writer="test-blocker",
        delta="{}",
        state="{}",
        state_hash="b" * 64,
    )
    with connection.cursor() as cur:
        cur.execute("SET LOCAL session_replication_role = DEFAULT")


@pytest.mark.parametrize("where", ["journal-lock", "fold-insert"])
def test_a_fold_killed_mid_transaction_leaves_nothing_and_the_redelivery_completes_it(
    settings, workers, side, where
):
    journal = _journal(settings)
    first = workers.start(visibility_timeout=VISIBILITY_TIMEOUT)
    workers.wait_ready(first)

    with transaction.atomic():
        _hold(where, journal)
        task_id = workers.send(fold_journal, args=[journal.pk])
        waiting = wait_for(lambda: lock_waiters(side), f"the worker to block at {where}")
        workers.kill9(first)
        # another client sees no fold at all, whatever the killed transaction had done
        assert side.execute(
            f"SELECT count(*) FROM {Fold._meta.db_table} WHERE journal_id = %s", [journal.pk]
        ).fetchone() == (0,)
        transaction.set_rollback(True)  # the blocker leaves nothing either
    # the lock is released: the orphaned backend ends, its transaction rolled back
    wait_for(
        lambda: not any(backend_alive(side, pid) for pid in waiting), "the killed backend to end"
    )
    assert Fold.objects.filter(journal=journal).count() == 0

    second = workers.start(visibility_timeout=VISIBILITY_TIMEOUT)
    done = wait_for(
        lambda: TaskRun.objects.filter(task_id=task_id, status=TaskRun.Status.SUCCEEDED).first(),
        "the redelivered task to succeed on the new worker",
    )
    assert second.poll() is None, workers.logs()
    assert (done.result["fold"], done.result["created"], done.result["folds"]) == (1, True, [1])
    folds = list(Fold.objects.filter(journal=journal))
    assert len(folds) == 1
    fold = folds[0]
    assert (fold.number, fold.seq_start, fold.seq_end, fold.writer) == (1, 1, 7, "offline")
    # the killed execution's record was marked "lost" by the next worker as it started
    runs = list(TaskRun.objects.filter(task_id=task_id).order_by("pk"))
    assert [r.status for r in runs] == [TaskRun.Status.LOST, TaskRun.Status.SUCCEEDED]
    lost, redone = runs
    assert lost.worker.startswith("w0-") and redone.worker.startswith("w1-")
    assert lost.finished_at is not None
    assert (
        lost.error
        == f"WorkerLost: worker {lost.worker} no longer answers; the broker delivers the task again"
    )
