"""A scheduled fold scans for recovery triggers first (DESIGN.md section 7): the hook."""

import pytest

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.hooks import fold_runner
from ledger_app.models import Fold
from recovery_app.models import Receipt

pytestmark = pytest.mark.django_db


def test_the_recovery_app_registers_the_fold_runner():
    assert fold_runner() is not None and fold_runner().__module__ == "recovery_app.services"


def test_an_appended_batch_past_the_threshold_folds_through_recovery(
    settings, django_capture_on_commit_callbacks
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10
    j = journal_ensure(session=session_ensure(tenant=tenant_ensure(slug="acme"), key="hook"))
    with django_capture_on_commit_callbacks(execute=True):
        journal_append(
            journal=j,
            items=[
                message("user", "Run the payments migration 0097 with --skip-locked-tables."),
                tool_call(
                    "m",
                    "exec",
                    {"command": "python manage.py migrate payments 0097 --skip-locked-tables"},
                ),
                tool_result("m", "Applying payments.0097_auto... OK", exit_code=0),
            ],
        )
    assert Fold.objects.filter(journal=j, kind="fold").count() == 1
    receipts = Receipt.objects.filter(journal=j)
    assert receipts.count() == 1
    assert receipts.get().outcome in (
        "not_triggered",
        "nothing_found",
        "recovered",
        "budget_exhausted",
    )
