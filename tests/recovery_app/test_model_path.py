"""The model-backed analyst with the real ``openai`` client against the scripted server.

Zero requests reach the server when recovery is not triggered or is denied; a triggered
attempt asks once, and the model's claims pass the same citation checks as the lexical ones.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from journal_app.formats.base import message
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.models import Fold
from recovery_app.models import Receipt
from recovery_app.services import recovery_run
from tests.recovery_app.conftest import build_migration_case, filler
from tests.support import ScriptedServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def scripted():
    with ScriptedServer() as server:
        with override_settings(
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test",
            WRITER_MODEL="scripted-writer",
            RECOVERY_ANALYST_MODEL="scripted-analyst",
            MODEL_MAX_ATTEMPTS=1,
        ):
            yield server


def test_no_request_reaches_the_model_when_not_triggered_or_denied(scripted):
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key="same"))
    journal_append(
        journal=j, items=[message("user", "Use the same method as last time."), *filler(2)]
    )
    assert recovery_run(journal=j).outcome == Receipt.Outcome.NOT_TRIGGERED
    case = build_migration_case()
    other = build_migration_case(lane="worker")
    fold = Fold.objects.filter(journal=case.journal).order_by("-number").first()
    assert recovery_run(journal=other.journal, fold=fold).outcome == Receipt.Outcome.DENIED
    assert (
        recovery_run(journal=case.journal, fold=fold, revision=1).outcome == Receipt.Outcome.DENIED
    )
    assert scripted.requests == []


def test_a_triggered_attempt_asks_the_model_once_and_checks_what_it_says(scripted):
    case = build_migration_case()
    scripted.push_json(
        {
            "claims": [
                {
                    "claim": "Migration 0042 was applied with --fake, so nothing ran.",
                    "status": "historical",
                    "citations": [
                        {
                            "entry": "sha256:" + case.call.entry_hash,
                            "quote": "0042_add_refund_index --fake",
                        }
                    ],
                },
                {
                    "claim": "It dropped the refunds table.",
                    "status": "current",
                    "citations": [{"entry": case.result.entry_hash, "quote": "DROP TABLE"}],
                },
            ]
        }
    )
    r = recovery_run(journal=case.journal)
    assert len(scripted.requests) == 1 and r.model_requests == 1
    assert r.analyst == "model:scripted-analyst"
    sent = scripted.requests[0]
    assert sent["model"] == "scripted-analyst"
    assert "never cite it" in sent["messages"][0]["content"]
    assert [c["claim"] for c in r.claims] == [
        "Migration 0042 was applied with --fake, so nothing ran."
    ]
    assert "does not occur byte for byte" in r.rejected_claims[0]["reason"]
    assert r.outcome == Receipt.Outcome.RECOVERED
