"""The ledger's Celery tasks and the fold auto-scheduler, in eager mode (STYLE.md point 7)."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import OperationalError

from config.celery import app
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app import services
from ledger_app.models import Fold, TaskRun
from ledger_app.services import ledger_fold
from ledger_app.tasks import fold_journal

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def eager():
    """Eager whatever the environment's broker, as in the embedded default; restored after."""
    saved = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


def _journal(key="s1"):
    tenant = tenant_ensure(slug="acme")
    return journal_ensure(session=session_ensure(tenant=tenant, key=key))


def _items():
    return [
        message("system", "Never touch the payments tables without asking first."),
        message("user", "Fix the refund rounding."),
        tool_call("c1", "exec", {"command": "pytest tests/test_refunds.py"}),
        tool_result("c1", "1 passed", exit_code=0),
        message("assistant", "The refund test passes."),
    ]


def _runs():
    return list(TaskRun.objects.order_by("pk"))


def test_it_folds_and_records_the_run():
    j = _journal()
    journal_append(journal=j, items=_items())

    result = fold_journal.delay(j.pk)

    fold = Fold.objects.get(journal=j)
    (run,) = _runs()
    got = result.get()
    assert (got["fold"], got["created"], got["folds"]) == (fold.number, True, [fold.number])
    assert got["writer"] == "offline" == fold.writer  # the configured default: no model here
    assert "1 fold(s) by writer offline over seq 1-5" in got["reason"]
    assert run.task_name == "ledger_app.tasks.fold_journal" and run.journal == j
    assert run.status == TaskRun.Status.SUCCEEDED and run.attempt == 1
    assert run.result["fold"] == 1 and run.result["created"] is True
    assert run.task_id == result.id and run.started_at <= run.finished_at and run.error == ""


def test_it_folds_once_when_delivered_twice():
    j = _journal()
    journal_append(journal=j, items=_items())

    fold_journal.apply_async(args=[j.pk], task_id="same-message")
    fold_journal.apply_async(args=[j.pk], task_id="same-message")

    assert Fold.objects.filter(journal=j).count() == 1
    first, second = _runs()
    assert first.status == second.status == TaskRun.Status.SUCCEEDED
    assert first.result["created"] is True and first.result["fold"] == 1
    assert second.result["created"] is False and second.result["fold"] is None
    assert "nothing new to fold: seq 1-5 already folded" in second.result["reason"]


def test_it_returns_quietly_for_a_gone_journal():
    result = fold_journal.delay(987_654_321)

    assert result.successful()
    assert not Fold.objects.exists()
    (run,) = _runs()
    assert run.status == TaskRun.Status.SUCCEEDED and run.journal is None and run.error == ""
    assert run.result == {"journal_id": 987_654_321, "reason": "journal gone"}


def test_it_schedules_a_fold_when_the_unfolded_part_reaches_the_threshold(
    settings, django_capture_on_commit_callbacks
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10
    j = _journal()

    with django_capture_on_commit_callbacks(execute=True):
        journal_append(journal=j, items=_items())

    # folded in slices of about the threshold (whole rounds), the last ending at the head
    folds = list(Fold.objects.filter(journal=j).order_by("number"))
    assert folds[0].seq_start == 1 and folds[-1].seq_end == 5
    assert all(a.seq_end + 1 == b.seq_start for a, b in zip(folds, folds[1:], strict=False))
    (run,) = _runs()
    assert run.status == TaskRun.Status.SUCCEEDED and run.journal == j
    assert run.result["folds"] == [f.number for f in folds]


def test_it_does_not_schedule_a_fold_below_the_threshold(
    settings, django_capture_on_commit_callbacks
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 1_000_000
    j = _journal()

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        journal_append(journal=j, items=_items())

    assert len(callbacks) == 1  # the journal's signal, nothing queued by the receiver
    assert not Fold.objects.exists() and not TaskRun.objects.exists()


def test_it_counts_only_tokens_after_the_last_fold(settings, django_capture_on_commit_callbacks):
    j = _journal()
    journal_append(journal=j, items=_items())
    ledger_fold(journal=j)
    folded = sum(Entry.objects.filter(journal=j).values_list("token_count", flat=True))
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = folded  # the whole journal would reach it

    with django_capture_on_commit_callbacks(execute=True):
        journal_append(journal=j, items=[message("user", "Thanks.")])

    assert Fold.objects.filter(journal=j).count() == 1 and not TaskRun.objects.exists()


def test_it_keeps_the_append_when_the_scheduled_fold_fails(
    settings, django_capture_on_commit_callbacks, monkeypatch
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10
    monkeypatch.setattr(services, "ledger_compact", mock.Mock(side_effect=ValueError("bad range")))
    j = _journal()

    with django_capture_on_commit_callbacks(execute=True):
        appended = journal_append(journal=j, items=_items())

    assert appended.appended == 5 and Entry.objects.filter(journal=j).count() == 5
    (run,) = _runs()
    assert run.status == TaskRun.Status.FAILED and run.error == "ValueError: bad range"


def test_it_retries_a_transient_error_then_records_the_failure(monkeypatch):
    app.conf.task_eager_propagates = False  # let eager retries run (restored by the fixture)
    j = _journal()
    journal_append(journal=j, items=_items())
    broken = mock.Mock(side_effect=OperationalError("server closed the connection"))
    monkeypatch.setattr(services, "ledger_compact", broken)

    result = fold_journal.delay(j.pk)

    assert result.failed() and isinstance(result.result, OperationalError)
    assert broken.call_count == 6  # the first attempt and max_retries=5
    runs = _runs()
    assert [r.attempt for r in runs] == [1, 2, 3, 4, 5, 6]
    assert {r.task_id for r in runs} == {result.id}
    assert [r.status for r in runs] == ["retrying"] * 5 + ["failed"]
    assert runs[-1].error == "OperationalError: server closed the connection"
    assert not Fold.objects.exists()


def test_it_does_not_retry_other_errors(monkeypatch):
    app.conf.task_eager_propagates = False
    j = _journal()
    broken = mock.Mock(side_effect=ValueError("bad range"))
    monkeypatch.setattr(services, "ledger_compact", broken)

    assert fold_journal.delay(j.pk).failed()

    assert broken.call_count == 1
    (run,) = _runs()
    assert run.status == TaskRun.Status.FAILED and run.error == "ValueError: bad range"
