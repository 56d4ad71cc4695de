"""One fold per range when a fold task is delivered twice or two workers fold one branch at once.

docs/design.md section 9: one fold at a time per branch (the journal row lock) and a task
delivered twice produces one fold (idempotency key: scope + covered range hash). Two real
workers take the two deliveries; the test holds the journal row lock until both are waiting
on it, so they really do run at the same time. Then exactly one fold exists; the other run
waited and folded nothing.
"""

from __future__ import annotations

import uuid

import pytest
from django.db import transaction

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Journal
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.models import Fold, TaskRun
from ledger_app.tasks import fold_journal
from tests.failure.conftest import lock_waiters, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

NOTHING_NEW = ("this range is already folded", "nothing to fold")


@pytest.mark.parametrize("delivery", ["same-message-twice", "two-tasks-one-branch"])
def test_two_concurrent_folds_of_one_branch_store_exactly_one_fold(
    settings, workers, side, delivery
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key="twice"))
    journal_append(
        journal=journal,
        items=[
            message("user", "Rename the settings module."),
            tool_call("c1", "exec", {"command": "git mv settings.py config.py"}),
            tool_result("c1", "", exit_code=0),
            message("assistant", "Renamed."),
        ],
    )
    procs = [workers.start(), workers.start()]
    for proc in procs:
        workers.wait_ready(proc)

    with transaction.atomic():
        Journal.objects.select_for_update().get(pk=journal.pk)
        if delivery == "same-message-twice":
            task_id = str(uuid.uuid4())
            ids = [workers.send(fold_journal, args=[journal.pk], task_id=task_id) for _ in range(2)]
        else:
            ids = [
                workers.send(fold_journal, args=[journal.pk]),
                workers.send(fold_journal, args=[journal.pk]),
            ]
        wait_for(lambda: len(lock_waiters(side)) >= 2, "both workers to wait on the journal lock")
        assert Fold.objects.filter(journal=journal).count() == 0

    runs = wait_for(
        lambda: (
            list(qs)
            if (qs := TaskRun.objects.filter(task_id__in=ids, finished_at__isnull=False)).count()
            == 2
            else None
        ),
        "both runs to finish",
    )
    assert all(p.poll() is None for p in procs), workers.logs()
    assert [r.status for r in runs] == [TaskRun.Status.SUCCEEDED] * 2, [r.error for r in runs]
    results = sorted((r.result for r in runs), key=lambda r: r["created"])
    assert [r["created"] for r in results] == [False, True]
    assert results[1]["fold"] == 1
    assert any(why in results[0]["reason"] for why in NOTHING_NEW), results[0]["reason"]
    assert Fold.objects.filter(journal=journal).count() == 1
