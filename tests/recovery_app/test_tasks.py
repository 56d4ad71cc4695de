"""The fold task runs recovery before its folds (eager in the embedded default)."""

import pytest

from ledger_app.tasks import fold_journal
from recovery_app.models import Receipt
from tests.recovery_app.conftest import build_migration_case

pytestmark = pytest.mark.django_db


def test_the_fold_task_recovers_then_folds_and_a_redelivery_changes_nothing(settings):
    settings.OPENAI_BASE_URL = ""
    case = build_migration_case()
    before = Receipt.objects.filter(journal=case.journal).count()
    first = fold_journal.delay(case.journal.pk).get()
    assert first["fold"] == 3 and first["created"] and first["writer"] == "offline"
    assert first["recovered"] == [f"recovered:{case.call.entry_hash[:16]}"]
    receipt = Receipt.objects.get(pk=first["receipts"][0])
    assert receipt.outcome == "recovered" and receipt.entered_fold.number == 3
    again = fold_journal.delay(case.journal.pk).get()
    assert again["fold"] is None and not again["created"]
    assert "nothing new to fold" in again["reason"]
    # nothing to fold, so no recovery attempt either: still the one receipt
    assert Receipt.objects.filter(journal=case.journal).count() == before + 1
