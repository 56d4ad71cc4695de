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


def test_the_analyst_call_is_bounded_by_the_recovery_time_left(scripted, settings):
    case = build_migration_case()
    settings.RECOVERY_MAX_SECONDS = 1.0
    settings.MODEL_TIMEOUT_SECONDS = 60.0
    scripted.push_json({"claims": []}, delay=4.0)  # a slow local model
    r = recovery_run(journal=case.journal)
    assert r.model_requests == 1 and len(scripted.requests) == 1
    # the call was cut inside the budget, not after MODEL_TIMEOUT_SECONDS, and is counted
    assert r.usage["model"]["calls"] == 1
    assert r.claims == []
    # the reads were never judged: not "nothing found"
    assert r.outcome == Receipt.Outcome.BUDGET_EXHAUSTED
    assert r.reason.startswith(
        "the analyst's model call gave no answer within RECOVERY_MAX_SECONDS (1 s) after "
    )


def test_an_analyst_call_that_fails_inside_the_budget_is_a_failed_attempt(scripted):
    case = build_migration_case()
    scripted.push_error(500)
    r = recovery_run(journal=case.journal)
    assert r.model_requests == 1 and r.claims == []
    assert r.outcome == Receipt.Outcome.FAILED
    assert "the analyst's model call gave no answer it could use" in r.reason
    assert "500" in r.reason


def test_an_analyst_that_answers_no_claim_is_nothing_found(scripted):
    case = build_migration_case()
    scripted.push_json({"claims": []})
    r = recovery_run(journal=case.journal)
    assert r.outcome == Receipt.Outcome.NOTHING_FOUND
    assert "gave no accepted claim" in r.reason


def test_the_analyst_usage_is_in_the_receipt(scripted):
    case = build_migration_case()
    scripted.push_json({"claims": []}, usage=(321, 12))
    r = recovery_run(journal=case.journal)
    assert r.usage["model"] == {"calls": 1, "input_tokens": 321, "output_tokens": 12} | {
        "total_s": r.usage["model"]["total_s"]
    }


def test_a_quote_of_the_shown_text_maps_back_to_the_entry_bytes():
    import rfc8785

    from recovery_app.citations import ReadView, check_citation, map_quote, shown_text

    content = {"name": "exec", "arguments": {"command": "./migrate 0042", "cwd": "/srv/billing"}}
    body = rfc8785.dumps(content).decode()
    read = ReadView(
        seq=4,
        entry_hash="ab" * 32,
        kind="tool_call",
        role="assistant",
        content=content,
        body=body,
        chunks=[(0, 0, len(body.encode()))],
        tool_name="exec",
    )
    shown = shown_text(read)
    lines = shown.split("\n")
    assert len(lines) >= 2
    quote = lines[0] + "\n" + lines[1]  # what the model saw, spanning two values
    cites = map_quote(read, quote)
    assert cites is not None and [c["quote"] for c in cites] == [lines[0], lines[1]]
    assert all(check_citation(c, {read.entry_hash: read}) == "" for c in cites)
    assert map_quote(read, "rm -rf /") is None
