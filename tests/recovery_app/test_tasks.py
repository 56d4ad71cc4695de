"""The fold-with-recovery task (eager in the embedded default)."""

import pytest

from recovery_app.models import Receipt
from recovery_app.tasks import fold_with_recovery
from tests.recovery_app.conftest import build_migration_case

pytestmark = pytest.mark.django_db


def test_the_task_recovers_then_folds_and_a_redelivery_changes_nothing(settings):
    settings.OPENAI_BASE_URL = ""
    case = build_migration_case()
    first = fold_with_recovery.delay(case.journal.pk).get()
    assert first["outcome"] == "recovered" and first["fold"] == 3 and first["created"]
    assert (
        first["recovered"] == [f"recovered:{case.call.entry_hash[:16]}"]
        or len(first["recovered"]) >= 1
    )
    again = fold_with_recovery.delay(case.journal.pk).get()
    assert again["outcome"] == "not_triggered" and again["fold"] is None and not again["created"]
    assert Receipt.objects.filter(journal=case.journal).count() == 2


def test_a_journal_that_is_gone_ends_quietly():
    assert fold_with_recovery.delay(10**9).get() == {"journal_id": 10**9, "reason": "journal gone"}
