"""Every fold runs recovery first, whoever asks for it (docs/design.md section 7).

The migration-flag scenario of the design must work the same through each entry point: the
fold service, ``compact``, its alias ``fold``, the task after an append, the API's
``POST .../folds`` and the context builder's fold.
"""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.test import Client

from journal_app.auth import api_key_create
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app import hooks
from ledger_app.models import Fold
from ledger_app.services import ledger_fold, ledger_state
from recovery_app.fold import fold_recovery_prepare
from recovery_app.models import Receipt
from tests.recovery_app.conftest import build_migration_case, filler

pytestmark = pytest.mark.django_db


def _recovered(case) -> bool:
    fact_id = f"recovered:{case.call.entry_hash[:16]}"
    return fact_id in ledger_state(case.journal)["facts"]


def _entered(case) -> Receipt:
    return Receipt.objects.get(journal=case.journal, outcome="recovered")


def test_the_recovery_app_registers_its_hook_with_the_fold_service():
    assert hooks.fold_recovery() is fold_recovery_prepare


def test_the_fold_service_recovers_the_flag(settings):
    settings.OPENAI_BASE_URL = ""
    case = build_migration_case()
    result = ledger_fold(journal=case.journal)
    assert result.created and result.fold.writer == "offline"
    assert result.receipt.outcome == "recovered"
    assert result.recovered == [f"recovered:{case.call.entry_hash[:16]}"]
    assert result.fold.manifest["recovery"]["receipt"] == result.receipt.pk
    assert _recovered(case) and _entered(case).entered_fold == result.fold


@pytest.mark.parametrize("command", ["compact", "fold"])
def test_compact_and_its_alias_recover_the_flag(settings, command, capsys):
    settings.OPENAI_BASE_URL = ""
    case = build_migration_case()
    call_command(command, "acme/mig")
    out = capsys.readouterr().out
    assert "writer offline" in out and "fold(s) by writer offline" in out
    assert _recovered(case)
    assert _entered(case).entered_fold.number == 3


def test_the_api_fold_recovers_the_flag(settings, django_capture_on_commit_callbacks):
    settings.OPENAI_BASE_URL = ""
    case = build_migration_case()
    _, key = api_key_create(tenant=case.journal.session.tenant, name="runtime")
    assert not _recovered(case)
    with django_capture_on_commit_callbacks(execute=True):
        r = Client().post(
            "/api/v1/sessions/mig/main/main/folds",
            "{}",
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )
    assert r.status_code == 202, r.content
    assert _recovered(case)


def test_the_context_builders_fold_recovers_the_flag(settings):
    settings.OPENAI_BASE_URL = ""
    case = build_migration_case()
    # more rounds after the doubt (still within the 24-entry window), so the builder must
    # fold the doubt's round to fit a small budget
    journal_append(journal=case.journal, items=filler(8, 500))
    assert not _recovered(case)
    _, key = api_key_create(tenant=case.journal.session.tenant, name="runtime")
    r = Client().post(
        "/api/v1/sessions/mig/context",
        json.dumps({"working_budget": 400, "hard_limit": 800}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert r.status_code in (200, 422), r.content
    assert Fold.objects.filter(journal=case.journal, number=3).exists(), "the builder folded"
    assert _recovered(case)
    assert _entered(case).entered_fold.number == 3


def test_an_append_past_the_threshold_folds_through_recovery_with_the_default_writer(
    settings, django_capture_on_commit_callbacks
):
    settings.OPENAI_BASE_URL = ""
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
    folds = list(Fold.objects.filter(journal=j, kind="fold").order_by("number"))
    assert folds and all(f.writer == "offline" and f.outcome != "fallback" for f in folds)
    receipts = list(Receipt.objects.filter(journal=j).order_by("pk"))
    assert [f.manifest["recovery"]["receipt"] for f in folds] == [r.pk for r in receipts]
