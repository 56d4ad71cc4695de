"""The invariants panel is a property of the fold: computed once, stored with it, read after
. Query counts and stored rows, never times."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from journal_app.services import tenant_ensure
from ledger_app.models import FoldInvariants
from ledger_app.services.context import fold_invariants
from ledger_app.services.context_records import context_budgets
from tests.factories import fold_build, journal_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def fold():
    journal = journal_build(tenant=tenant_ensure(slug="acme"))
    return fold_build(journal)


def test_the_panel_is_computed_once_then_read_from_the_fold(fold):
    assert not FoldInvariants.objects.filter(fold=fold).exists()
    first = fold_invariants(fold=fold)
    assert first["stored"] is False
    row = FoldInvariants.objects.get(fold=fold)
    assert row.budgets == context_budgets().as_kwargs()
    assert row.panel["status"] == first["status"] and row.panel["revision"] == fold.revision
    with CaptureQueriesContext(connection) as queries:
        second = fold_invariants(fold=fold)
    assert second["stored"] is True
    assert {k: v for k, v in second.items() if k != "stored"} == {
        k: v for k, v in first.items() if k != "stored"
    }
    assert len(queries) <= 2  # the budgets' row lookup only: no entry is read again
    assert FoldInvariants.objects.count() == 1


def test_new_default_budgets_or_recompute_compute_it_again(fold, settings):
    fold_invariants(fold=fold)
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 12_345
    again = fold_invariants(fold=fold)
    assert again["stored"] is False
    assert FoldInvariants.objects.get(fold=fold).budgets["working_budget"] == 12_345
    assert fold_invariants(fold=fold)["stored"] is True
    assert fold_invariants(fold=fold, recompute=True)["stored"] is False
    assert FoldInvariants.objects.count() == 1
