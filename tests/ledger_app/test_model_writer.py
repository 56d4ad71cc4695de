"""Writer, verifier, one repair, fallback, failure: real ``openai`` client, scripted server.

docs/design.md 5.3 and the seed's fixtures ("All tests pass" citing one test file; "deployed and
browser acceptance passed" with readable citations that do not show it).
"""

from __future__ import annotations

import hashlib
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app import reducer
from ledger_app.model_writer import (
    FALLBACK_NOTE,
    PROMPTS,
    VERIFIER_PROMPT,
    WRITER_PROMPT,
    ModelWriter,
    load_prompt,
)
from ledger_app.models import Fold, FoldAttempt, Proposal, Verdict
from ledger_app.services import FoldFailed, ledger_fold, ledger_verify
from tests.support import ScriptedServer


@pytest.fixture
def scripted():
    with ScriptedServer() as server:
        yield server


pytestmark = pytest.mark.django_db

RULE = "Never deploy to production outside the release pipeline."


def _journal(items, key="s1"):
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key=key))
    journal_append(journal=journal, items=items)
    journal.refresh_from_db()
    return journal


def _tests_items():
    return [
        message("system", RULE),
        message("user", "Run the refund tests in tests/test_refunds.py."),
        message("assistant", "Running that file."),
        tool_call("t1", "exec", {"command": "pytest tests/test_refunds.py"}),
        tool_result("t1", "........                                   [100%]\n8 passed in 0.12s"),
        message("assistant", "All tests pass."),
    ]


def _deploy_items():
    return [
        message("system", RULE),
        message("user", "Deploy the billing service to production and run browser acceptance."),
        message("assistant", "Reading the deploy configuration first."),
        tool_call("c1", "read_file", {"path": "deploy/production.yaml"}),
        tool_result("c1", "service: billing\nreplicas: 3\nacceptance: browser\n"),
        tool_call("d1", "exec", {"command": "./deploy.sh production"}),
        tool_result(
            "d1",
            "Deploying billing to production...\nError: health check failed on 2/3 replicas",
            is_error=True,
            exit_code=1,
        ),
        message("assistant", "The production service was deployed and browser acceptance passed."),
    ]


def _fact(key, text, support, *, category="verified_state", confidence="verified", priority="P1"):
    return {
        "key": key,
        "category": category,
        "priority": priority,
        "confidence": confidence,
        "text": text,
        "support": support,
    }


def _verdict(
    key, entailed=True, temporal=True, reason="the cited result shows it", seq=5, quote="passed"
):
    """A verdict resting on ``seq`` and ``quote`` (the verifier must name both)."""
    return {
        "key": key,
        "seq": seq,
        "quote": quote,
        "entailment": "entailed" if entailed else "not_entailed",
        "entailment_reason": reason,
        "temporal": "valid" if temporal else "invalid",
        "temporal_reason": "nothing is closed" if temporal else reason,
    }


def _writer_facts(fold):
    return [f for f in fold.state_dict["facts"].values() if f.get("author") == "writer"]


def _hash(journal, seq):
    return Entry.objects.get(journal=journal, seq=seq).entry_hash


def test_all_tests_pass_on_one_file_is_rejected_and_the_scoped_repair_accepted(scripted):
    journal = _journal(_tests_items())
    scripted.push_json({"facts": [_fact("f1", "All tests pass", [4, 5])]}, usage=(900, 60))
    scripted.push_json(
        {"verdicts": [_verdict("f1", entailed=False, reason="seq 5 ran one file only")]}
    )
    scripted.push_json(
        {"facts": [_fact("f1", "8 tests in tests/test_refunds.py passed", [5])]}, usage=(950, 40)
    )
    scripted.push_json({"verdicts": [_verdict("f1")]})

    result = ledger_fold(journal=journal, writer=ModelWriter(scripted.config()))

    fold = result.fold
    assert fold.outcome == Fold.Outcome.REPAIRED and scripted.request_count == 4
    [fact] = _writer_facts(fold)
    assert fact["text"] == "8 tests in tests/test_refunds.py passed"
    assert fact["confidence"] == "verified" and fact["support"] == [{"entry": _hash(journal, 5)}]
    assert not any(f["text"] == "All tests pass" for f in fold.state_dict["facts"].values())
    # the repair was told why
    repair_request = scripted.requests[2]["messages"][-1]["content"]
    assert "seq 5 ran one file only" in repair_request and "All tests pass" in repair_request
    # both judges rejected the universal claim, and both are stored, reachable from the fold
    attempt = fold.attempts.get()
    first = attempt.proposals.get(round=0)
    judges = {v.judge: v for v in first.verdicts.filter(key="f1")}
    assert judges["verifier"].entailment == "not_entailed"
    assert judges["rules"].entailment == "not_entailed"
    assert "scoped evidence" in judges["rules"].entailment_reason
    assert "tests/test_refunds.py" in judges["rules"].entailment_reason
    assert not judges["verifier"].item_accepted
    repaired = attempt.proposals.get(round=1)
    assert repaired.kind == "repair" and all(v.item_accepted for v in repaired.verdicts.all())
    # manifest: models, prompt hashes, usage per call
    m = fold.manifest
    prompt = (load_prompt(WRITER_PROMPT), load_prompt(VERIFIER_PROMPT))
    assert m["writer"]["prompt_sha256"] == prompt[0].sha256
    assert m["verifier"]["prompt_sha256"] == prompt[1].sha256
    assert (
        m["writer"]["model"] == "scripted-writer" and m["verifier"]["model"] == "scripted-verifier"
    )
    assert [(c["role"], c["round"]) for c in m["model_calls"]] == [
        ("writer", 0),
        ("verifier", 0),
        ("writer", 1),
        ("verifier", 1),
    ]
    assert m["tokens"]["model"]["input_tokens"] == 900 + 100 + 950 + 100
    assert all(c["latency_s"] >= 0 and c["attempts"] == 1 for c in m["model_calls"])
    assert m["review"]["rejected"] == 1 and m["review"]["repair"] is True
    assert ledger_verify(journal=journal).ok


def test_deployed_and_accepted_with_readable_citations_falls_back(scripted):
    journal = _journal(_deploy_items())
    claim = "The production service was deployed and browser acceptance passed"
    scripted.push_json({"facts": [_fact("f1", claim, [5, 8])]})
    scripted.push_json(
        {"verdicts": [_verdict("f1", entailed=False, reason="seq 5 is a config file")]}
    )
    scripted.push_json(
        {
            "facts": [
                _fact("f1", "The production service was deployed", [5, 8], confidence="reported")
            ]
        }
    )
    scripted.push_json(
        {"verdicts": [_verdict("f1", entailed=False, reason="seq 8 is the assistant's claim")]}
    )

    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold

    assert fold.outcome == Fold.Outcome.FALLBACK
    assert scripted.request_count == 4  # no model call after the rejected repair
    assert FALLBACK_NOTE in fold.manifest["note"]
    assert "the repair was rejected too" in fold.manifest["review"]["fallback_reason"]
    facts = fold.state_dict["facts"].values()
    assert _writer_facts(fold) == []  # nothing from the writer, verified or otherwise
    assert not any("deployed" in f["text"] and not f.get("pin") for f in facts)
    [failure] = [f for f in facts if f["category"] == "blocker"]
    assert failure["text"].startswith("FAILED") and "exit 1" in failure["text"]
    assert "health check failed" in failure["text"]
    assert _hash(journal, 7) in [s["entry"] for s in failure["support"]]
    read = next(f for f in facts if f["category"] == "history")
    assert read["priority"] == "P3"
    kinds = list(fold.attempts.get().proposals.values_list("kind", flat=True))
    assert kinds == ["proposal", "repair", "fallback"]
    assert Verdict.objects.filter(proposal__attempt__fold=fold, judge="verifier").count() == 2
    # the proposal and the repair were rejected: the fold's one count says 2, not 0
    assert fold.manifest["review"]["rejected"] == 2 and fold.ops_rejected == 2


def test_a_success_claim_citing_the_failed_deploy_is_rejected_even_if_the_verifier_agrees(scripted):
    journal = _journal(_deploy_items())
    scripted.push_json({"facts": [_fact("f1", "Deployment is live", [6, 7])]})
    scripted.push_json({"verdicts": [_verdict("f1")]})  # a lenient verifier
    scripted.push_json({"facts": [_fact("f1", "Deployment is live on 1 of 3 replicas", [7])]})
    scripted.push_json({"verdicts": [_verdict("f1")]})

    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold

    assert fold.outcome == Fold.Outcome.FALLBACK and _writer_facts(fold) == []
    rules = Verdict.objects.filter(proposal__attempt__fold=fold, judge="rules")
    assert [v.entailment for v in rules] == ["not_entailed", "not_entailed"]
    assert all("cannot cite a failed result" in v.entailment_reason for v in rules)
    assert all(_hash(journal, 7) in v.entailment_reason for v in rules)


def test_timeouts_and_500s_are_retried_then_the_fold_fails_with_nothing_written(scripted):
    journal = _journal(_tests_items())
    entries_before = Entry.objects.filter(journal=journal).count()
    scripted.push_error(500)
    scripted.push_json({"facts": []}, delay=1.0)  # longer than the client's timeout
    scripted.push_error(503)
    writer = ModelWriter(scripted.config(timeout_s=0.3, max_attempts=3, retry_on_timeout=True))

    with pytest.raises(FoldFailed) as caught:
        ledger_fold(journal=journal, writer=writer)

    assert scripted.request_count == 3
    assert Fold.objects.count() == 0  # nothing half-written
    assert Entry.objects.filter(journal=journal).count() == entries_before  # nothing lost
    attempt = caught.value.attempt
    assert attempt.outcome == FoldAttempt.Outcome.FAILED and attempt.fold is None
    assert "gave no answer after 3 attempt(s)" in attempt.error
    [call] = attempt.record["model_calls"]
    assert call["status"] == "unavailable" and call["attempts"] == 3
    assert "HTTP 500" in call["errors"][0] and "APITimeoutError" in call["errors"][1]

    # the next run folds the same range
    scripted.push_json({"facts": [_fact("f1", "8 tests in tests/test_refunds.py passed", [5])]})
    scripted.push_json({"verdicts": [_verdict("f1")]})
    fold = ledger_fold(journal=journal, writer=writer).fold
    assert fold.number == 1 and (fold.seq_start, fold.seq_end) == (1, 6)
    assert fold.outcome == Fold.Outcome.ACCEPTED
    assert FoldAttempt.objects.filter(journal=journal).count() == 2


def test_a_verifier_that_cannot_be_reached_fails_the_fold_but_keeps_the_writer_answer(scripted):
    journal = _journal(_tests_items())
    scripted.push_json({"facts": [_fact("f1", "8 tests in tests/test_refunds.py passed", [5])]})
    scripted.push_error(500)
    scripted.push_error(500)

    with pytest.raises(FoldFailed) as caught:
        ledger_fold(journal=journal, writer=ModelWriter(scripted.config(max_attempts=2)))

    assert Fold.objects.count() == 0
    [proposal] = caught.value.attempt.proposals.all()
    assert "8 tests in tests/test_refunds.py passed" in proposal.raw
    roles = [c["role"] for c in caught.value.attempt.record["model_calls"]]
    assert roles == ["writer", "verifier"]


def test_a_transient_error_inside_a_fold_is_retried_and_recorded(scripted):
    journal = _journal(_tests_items())
    scripted.push_error(502)
    scripted.push_json({"facts": []})
    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold
    assert fold.outcome == Fold.Outcome.ACCEPTED
    [call] = fold.manifest["model_calls"]  # nothing proposed: no verifier call
    assert call["attempts"] == 2 and "HTTP 502" in call["errors"][0]


def test_malformed_json_from_the_writer_is_a_rejection_and_gets_the_repair(scripted):
    journal = _journal(_tests_items())
    scripted.push_content('{"facts": [{"key": "f1", "text": "8 tests passed"')  # cut off
    scripted.push_json({"facts": [_fact("f1", "8 tests in tests/test_refunds.py passed", [5])]})
    scripted.push_json({"verdicts": [_verdict("f1")]})

    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold

    assert fold.outcome == Fold.Outcome.REPAIRED and scripted.request_count == 3
    first = Proposal.objects.get(attempt__fold=fold, round=0)
    assert first.raw.startswith('{"facts"') and first.parsed is None
    assert "not JSON" in first.error
    assert "not valid" in scripted.requests[1]["messages"][-1]["content"]
    assert fold.manifest["review"]["rejected"] == 1


def test_an_answer_in_another_shape_is_a_rejection_not_an_empty_proposal(scripted):
    """A small model's ``{"delta": [...]}`` plus prose (neither ``facts`` nor ``ends``) was
    accepted as a proposal of nothing; it is rejected naming the key and gets the repair."""
    journal = _journal(_tests_items())
    scripted.push_content(
        '{"delta": [{"key": "f1", "op": "close", "fact_id": "pin:3f2a", "evidence": [5]}]}\n'
        "This ledger delta records the changes."
    )
    scripted.push_json({"facts": [_fact("f1", "8 tests in tests/test_refunds.py passed", [5])]})
    scripted.push_json({"verdicts": [_verdict("f1")]})

    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold

    assert fold.outcome == Fold.Outcome.REPAIRED and scripted.request_count == 3
    first = Proposal.objects.get(attempt__fold=fold, round=0)
    assert first.parsed is None
    assert "only unknown field(s): delta" in first.error
    assert fold.manifest["review"]["rejected"] == 1


def test_a_garbled_http_body_is_a_rejection_too(scripted):
    journal = _journal(_tests_items())
    scripted.push_raw(b"<html>502 bad gateway</html>")
    scripted.push_json({"facts": []})
    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold
    assert fold.outcome == Fold.Outcome.REPAIRED
    assert fold.manifest["model_calls"][0]["status"] == "malformed"
    assert "not a chat completion" in Proposal.objects.get(attempt__fold=fold, round=0).error


def test_malformed_json_twice_falls_back(scripted):
    journal = _journal(_deploy_items())
    scripted.push_content("Sure! Here are the facts: the deploy worked.")
    scripted.push_content('{"facts": "none"}')
    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold
    assert fold.outcome == Fold.Outcome.FALLBACK and scripted.request_count == 2
    assert "facts" in fold.manifest["review"]["fallback_reason"]
    assert any(f["category"] == "blocker" for f in fold.state_dict["facts"].values())


def test_malformed_json_from_the_verifier_rejects_its_items(scripted):
    journal = _journal(_tests_items())
    scripted.push_json({"facts": [_fact("f1", "8 tests in tests/test_refunds.py passed", [5])]})
    scripted.push_content("{verdicts: yes}")
    scripted.push_json({"facts": [_fact("f1", "8 tests in tests/test_refunds.py passed", [5])]})
    scripted.push_json({"verdicts": [_verdict("f1")]})
    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold
    assert fold.outcome == Fold.Outcome.REPAIRED
    first = Proposal.objects.get(attempt__fold=fold, round=0)
    assert "the verifier's answer is not valid" in first.verifier_error
    assert first.verdicts.get(judge="verifier").entailment == "not_entailed"


def test_a_citation_outside_the_scope_is_rejected_not_a_crash(scripted):
    journal = _journal(_tests_items())
    scripted.push_json({"facts": [_fact("f1", "8 tests passed", [99])]})
    scripted.push_json({"facts": []})  # the repair withdraws it
    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold
    assert fold.outcome == Fold.Outcome.REPAIRED and scripted.request_count == 2
    verdict = Verdict.objects.get(proposal__attempt__fold=fold, judge="parser")
    assert "seq 99 is not an entry of this scope" in verdict.entailment_reason


def test_failures_are_recorded_by_code_when_the_writer_is_accepted(scripted):
    journal = _journal(_deploy_items())
    scripted.push_json(
        {
            "facts": [
                _fact("f1", "deploy/production.yaml sets 3 replicas", [5], priority="P2"),
                _fact(
                    "o1",
                    "Browser acceptance has not run yet",
                    [2],
                    category="open_obligation",
                    confidence="reported",
                ),
            ]
        }
    )
    verdicts = [_verdict("f1", quote="replicas: 3"), _verdict("o1", seq=2, quote="Deploy the")]
    scripted.push_json({"verdicts": verdicts})
    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold
    assert fold.outcome == Fold.Outcome.ACCEPTED
    texts = {f["text"] for f in _writer_facts(fold)}
    assert texts == {"deploy/production.yaml sets 3 replicas", "Browser acceptance has not run yet"}
    blockers = [f for f in fold.state_dict["facts"].values() if f["category"] == "blocker"]
    assert len(blockers) == 1 and blockers[0]["author"] == "code"


def test_an_obligation_closes_on_later_evidence_and_not_on_earlier(scripted):
    journal = _journal(_tests_items()[:3])
    scripted.push_json(
        {
            "facts": [
                _fact(
                    "o1",
                    "Run tests/test_refunds.py",
                    [2],
                    category="open_obligation",
                    confidence="reported",
                )
            ]
        }
    )
    scripted.push_json({"verdicts": [_verdict("o1", seq=2, quote="Run the refund tests")]})
    writer = ModelWriter(scripted.config())
    first = ledger_fold(journal=journal, writer=writer).fold
    [obligation] = _writer_facts(first)
    journal_append(journal=journal, items=_tests_items()[3:])
    journal.refresh_from_db()
    # a close citing the user's request (older than nothing, not a result) is refused by the
    # rules and the reducer; the repair cites the passing run
    scripted.push_json(
        {"ends": [{"key": "c1", "op": "close", "fact_id": obligation["id"], "evidence": [2]}]}
    )
    scripted.push_json({"verdicts": [_verdict("c1", seq=2, quote="Run the refund tests")]})
    scripted.push_json(
        {"ends": [{"key": "c1", "op": "close", "fact_id": obligation["id"], "evidence": [5]}]}
    )
    scripted.push_json({"verdicts": [_verdict("c1")]})
    second = ledger_fold(journal=journal, writer=writer).fold
    assert second.outcome == Fold.Outcome.REPAIRED
    assert second.state_dict["facts"][obligation["id"]]["lifecycle"] == "closed"
    [close] = [o for o in json.loads(second.delta)["ops"] if o["op"] == "close"]
    assert close["seq"] == 5  # recorded at the seq of its last evidence
    refused = Verdict.objects.filter(proposal__attempt__fold=second, proposal__round=0)
    assert {v.judge for v in refused if not v.accepted} == {"rules", "reducer"}


def test_compact_with_the_model_prints_the_table(scripted, settings, monkeypatch):
    # the recovery before each fold uses its lexical analyst here (its model: recovery_app's
    # tests), so the scripted replies below are the writer's and the verifier's only
    monkeypatch.setattr("recovery_app.services.attempt.analyst_model_from_settings", lambda: None)
    settings.OPENAI_BASE_URL = scripted.base_url
    settings.WRITER_MODEL = "scripted-writer"
    settings.VERIFIER_MODEL = "scripted-verifier"
    settings.MODEL_BACKOFF_SECONDS = 0.01
    settings.MODEL_BACKOFF_MAX_SECONDS = 0.02
    journal = _journal(_tests_items())
    scripted.push_json({"facts": [_fact("f1", "All tests pass", [5])]}, usage=(1000, 50))
    scripted.push_json({"verdicts": [_verdict("f1", entailed=False)]}, usage=(400, 30))
    scripted.push_json({"facts": [_fact("f1", "8 tests in tests/test_refunds.py passed", [5])]})
    scripted.push_json({"verdicts": [_verdict("f1")]})
    out = StringIO()
    call_command("compact", journal.scope_label, stdout=out)
    text = out.getvalue()
    assert "model writer scripted-writer" in text  # the default when a model is configured
    row = next(line for line in text.splitlines() if line.lstrip().startswith("1 "))
    assert "repaired" in row and " 1 " in row  # one rejection
    assert "1600" in row  # model input tokens: 1000 + 400 + 100 + 100


def test_compact_says_why_a_fold_fell_back(scripted, settings, monkeypatch):
    """A fallback row is followed by the model writer's reason, not only the outcome."""
    monkeypatch.setattr("recovery_app.services.attempt.analyst_model_from_settings", lambda: None)
    settings.OPENAI_BASE_URL = scripted.base_url
    settings.WRITER_MODEL = "scripted-writer"
    journal = _journal(_deploy_items())
    claim = "The production service was deployed and browser acceptance passed"
    scripted.push_json({"facts": [_fact("f1", claim, [5, 8])]})
    scripted.push_json({"verdicts": [_verdict("f1", entailed=False, reason="seq 5 is config")]})
    scripted.push_json({"facts": [_fact("f1", "The service was deployed", [5, 8])]})
    scripted.push_json({"verdicts": [_verdict("f1", entailed=False, reason="seq 8 is a claim")]})
    out = StringIO()
    call_command("compact", journal.scope_label, stdout=out)
    lines = out.getvalue().splitlines()
    [why] = [x for x in lines if "fell back" in x]
    assert why.startswith("  fold 1 fell back: the repair was rejected too")
    assert "seq 8 is a claim" in why


def test_compact_shows_the_model_calls_progress_on_stderr(scripted, settings, monkeypatch):
    """A fold against a slow local model is not silent: each streamed call says when it was
    sent and when its first chunk came (README "Use a local model"); -v 0 keeps it quiet."""
    monkeypatch.setattr("recovery_app.services.attempt.analyst_model_from_settings", lambda: None)
    settings.OPENAI_BASE_URL = scripted.base_url
    settings.WRITER_MODEL = "scripted-writer"
    settings.MODEL_STREAM = True
    journal = _journal(_tests_items())
    scripted.push_json({"facts": []})
    err = StringIO()
    call_command("compact", journal.scope_label, stdout=StringIO(), stderr=err)
    lines = err.getvalue().splitlines()
    assert any(
        "writer: request sent to scripted-writer, waiting for the first chunk" in x for x in lines
    )
    assert any("writer: first chunk after" in x for x in lines)
    assert sum("request sent" in x for x in lines) == 1  # one call, one line
    journal_append(journal=journal, items=[message("user", "Thanks.")])
    scripted.push_json({"facts": []})
    quiet = StringIO()
    call_command("compact", journal.scope_label, "-v", "0", stdout=StringIO(), stderr=quiet)
    assert "request sent" not in quiet.getvalue()


def test_compact_reports_a_failed_fold_and_stops(scripted, settings):
    settings.OPENAI_BASE_URL = scripted.base_url
    settings.WRITER_MODEL = "scripted-writer"
    settings.MODEL_MAX_ATTEMPTS = 2
    settings.MODEL_BACKOFF_SECONDS = 0.01
    settings.MODEL_BACKOFF_MAX_SECONDS = 0.02
    journal = _journal(_tests_items())
    scripted.push_error(500)
    scripted.push_error(500)
    out = StringIO()
    with pytest.raises(CommandError, match="run compact again"):
        call_command("compact", journal.scope_label, "--writer", "model", stdout=out)
    assert "failed" in out.getvalue() and "gave no answer" in out.getvalue()
    assert Fold.objects.count() == 0


def test_the_manifest_hash_is_the_prompt_files_hash():
    prompt = load_prompt("writer-v1")
    raw = (PROMPTS / "writer-v1.md").read_bytes()
    assert prompt.sha256 == hashlib.sha256(raw).hexdigest() and prompt.version == "writer-v1"
    assert "A plan is not completion" in prompt.text
    assert "A citation existing is not entailment" in load_prompt("verifier-v1").text


def test_a_repaired_fold_replays_byte_for_byte(scripted):
    journal = _journal(_tests_items())
    scripted.push_json({"facts": [_fact("f1", "All tests pass", [5])]})
    scripted.push_json({"verdicts": [_verdict("f1", entailed=False)]})
    scripted.push_json({"facts": [_fact("f1", "8 tests in tests/test_refunds.py passed", [5])]})
    scripted.push_json({"verdicts": [_verdict("f1")]})
    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold
    delta = json.loads(fold.delta)
    delta.pop("verdicts")
    assert reducer.state_bytes(reducer.reduce(None, [delta])).decode() == fold.state


def _approval_items():
    return [
        message("system", RULE),
        message("user", "Propose how to apply migration 0042 to staging before you run it."),
        message(
            "assistant",
            'Proposal: "apply migration 0042 to staging with --plan first". Shall I run it?',
        ),
        message("user", "Yes, approved."),
        tool_call("m1", "exec", {"command": "python manage.py migrate billing 0042 --plan"}),
        tool_result("m1", "Applying billing.0042_split_ledger... OK"),
    ]


def _decision(key, text, support=(3, 4)):
    return {
        **_fact(key, "The user approved the proposal at seq 3", list(support)),
        "category": "decision",
        "confidence": "reported",
        "decision_text": text,
    }


def test_the_writer_schema_names_decision_text_and_consequential():
    from ledger_app.proposals import writer_schema

    fact = writer_schema()["$defs"]["ProposedFact"]["properties"]
    assert "character for character" in fact["decision_text"]["description"]
    assert "outside the conversation" in fact["consequential"]["description"]
    assert "Decisions with their content" in load_prompt(WRITER_PROMPT).text
    assert "Judge every closure" in load_prompt(VERIFIER_PROMPT).text


def test_a_quoted_decision_and_a_consequential_action_are_kept_with_their_fields(scripted):
    journal = _journal(_approval_items())
    migration = {
        **_fact("a1", "Migration billing 0042 was applied (--plan)", [5, 6]),
        "consequential": True,
    }
    exact = "apply migration 0042 to staging with --plan first"
    scripted.push_json({"facts": [_decision("d1", exact), migration]})
    scripted.push_json(
        {
            "verdicts": [
                _verdict("d1", seq=3, quote="Proposal"),
                _verdict("a1", seq=6, quote="split_ledger"),
            ]
        }
    )
    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold
    assert fold.outcome == Fold.Outcome.ACCEPTED
    facts = {f["text"]: f for f in _writer_facts(fold)}
    decision = facts["The user approved the proposal at seq 3"]
    assert decision["decision_text"] == exact and "consequential" not in decision
    assert facts["Migration billing 0042 was applied (--plan)"]["consequential"] is True
    # the verifier was shown the decision's text to judge
    assert exact in scripted.requests[1]["messages"][-1]["content"]


def test_a_paraphrased_decision_is_rejected_and_the_exact_quote_accepted(scripted):
    journal = _journal(_approval_items())
    scripted.push_json({"facts": [_decision("d1", "run the 0042 migration on staging")]})
    approved = _verdict("d1", seq=4, quote="Yes, approved.")
    scripted.push_json({"verdicts": [approved]})  # the verifier model missed it
    exact = "apply migration 0042 to staging with --plan first"
    scripted.push_json({"facts": [_decision("d1", exact)]})
    scripted.push_json({"verdicts": [approved]})
    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold
    assert fold.outcome == Fold.Outcome.REPAIRED
    [decision] = _writer_facts(fold)
    assert decision["decision_text"] == exact
    rules = Verdict.objects.get(proposal__attempt__fold=fold, proposal__round=0, judge="rules")
    assert "not quoted exactly" in rules.entailment_reason
