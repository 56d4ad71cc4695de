"""The model path on small windows and bad servers: slices that fit, splits, labelled causes.

Real ``openai`` client against the scripted server (tests/support), which can answer 400
``context_length_exceeded`` when a request is longer than its window, as real servers do.
README "Use a local model".
"""

from __future__ import annotations

import json

import pytest

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.services import (
    journal_append,
    journal_ensure,
    journal_import,
    session_ensure,
    tenant_ensure,
)
from ledger_app.model_writer import ModelWriter
from ledger_app.model_writer.window import Plan, rounds_of, slices, split
from ledger_app.models import Fold, FoldAttempt, Proposal
from ledger_app.services import FoldFailed, ledger_fold
from ledger_app.services.compact import ledger_compact
from tests.conftest import CORPUS
from tests.support import ScriptedServer
from tests.support.scripted_server import prompt_tokens

pytestmark = pytest.mark.django_db

EMPTY = json.dumps({"facts": [], "ends": [], "verdicts": []})
TAUBENCH = CORPUS / "openai-chat-tool-calls" / "taubench-gpt4o-airline-task3.json"


def _journal(items, key="w1"):
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key=key))
    journal_append(journal=journal, items=items)
    journal.refresh_from_db()
    return journal


def _rounds(n: int) -> list:
    items = [message("system", "Keep the build green."), message("user", "Run the checks.")]
    for i in range(n):
        items += [
            tool_call(f"c{i}", "exec", {"command": f"pytest tests/test_part_{i}.py"}),
            tool_result(f"c{i}", f"{i + 3} passed in 0.{i}s " + "log line " * 120),
        ]
    return items


def _writer_requests(server: ScriptedServer) -> list[dict]:
    return [r for r in server.requests if r.get("model") == "scripted-writer"]


@pytest.fixture
def no_analyst(monkeypatch):
    monkeypatch.setattr("recovery_app.services.attempt.analyst_model_from_settings", lambda: None)


def test_with_an_8000_token_window_a_corpus_transcript_folds_without_overflow(settings, no_analyst):
    with ScriptedServer(window_tokens=8000) as server:
        server.answer_all(EMPTY)
        settings.OPENAI_BASE_URL = server.base_url
        settings.WRITER_MODEL = "scripted-writer"
        settings.VERIFIER_MODEL = "scripted-verifier"
        settings.WRITER_WINDOW_TOKENS = 8000
        journal = journal_import(path=TAUBENCH, tenant="corpus").journal
        report = ledger_compact(journal=journal, writer="model")
        writer_calls = _writer_requests(server)
    assert not report.failed and report.stopped == "nothing left to fold"
    folds = list(Fold.objects.filter(journal=journal, kind="fold"))
    assert folds and all(f.outcome == Fold.Outcome.ACCEPTED for f in folds)
    assert folds[-1].seq_end == journal.head_seq
    assert not FoldAttempt.objects.filter(journal=journal, outcome="failed").exists()
    # the slices were cut before the calls: more writer calls than folds, each within 8000
    assert len(writer_calls) > len(folds)
    assert all(prompt_tokens(r) + r["max_tokens"] <= 8000 for r in writer_calls)
    assert "writer window 8,000 tokens" in folds[0].manifest["note"]


def test_a_context_overflow_splits_the_slice_and_records_why():
    journal = _journal(_rounds(6))
    # the server's window is smaller than the product thinks (its tokenizer differs)
    with ScriptedServer(window_tokens=3600) as server:
        server.answer_all(EMPTY)
        writer = ModelWriter(server.config(writer_window=6000, max_output_tokens=1000))
        fold = ledger_fold(journal=journal, writer=writer, recover=False).fold
        statuses = [c["status"] for c in fold.manifest["model_calls"]]
    assert fold.outcome == Fold.Outcome.ACCEPTED and fold.seq_end == journal.head_seq
    assert "split in two: does not fit the writer's window" in fold.manifest["note"]
    assert "refused" in statuses and statuses[-1] == "ok"


def test_a_single_round_that_never_fits_falls_back_labelled_and_the_next_fold_is_unaffected():
    journal = _journal(_rounds(1))
    with ScriptedServer(window_tokens=1200) as server:
        server.answer_all(EMPTY)
        writer = ModelWriter(server.config(writer_window=8000, max_output_tokens=1000))
        fold = ledger_fold(journal=journal, writer=writer, recover=False).fold
        assert fold.outcome == Fold.Outcome.FALLBACK
        assert "cannot be split further" in fold.manifest["note"]
        assert "does not fit the writer's window" in fold.manifest["review"]["fallback_reason"] or (
            "does not fit" in fold.manifest["note"]
        )
        journal_append(journal=journal, items=[message("user", "Thanks, stop here.")])
        server.window_tokens = 0
        nxt = ledger_fold(journal=journal, writer=writer, recover=False).fold
    assert nxt.number == 2 and nxt.outcome == Fold.Outcome.ACCEPTED


def test_a_window_smaller_than_the_rubric_sends_nothing_and_falls_back_saying_why():
    """WRITER_WINDOW_TOKENS=600 cannot hold the rubric: no slice is sent (they went out at
    five times the window, and a server that does not check its window "accepted" them)."""
    journal = _journal(_rounds(3))
    with ScriptedServer() as server:
        server.answer_all(EMPTY)
        writer = ModelWriter(server.config(writer_window=600, max_output_tokens=300))
        fold = ledger_fold(journal=journal, writer=writer, recover=False).fold
        assert server.request_count == 0
    assert fold.outcome == Fold.Outcome.FALLBACK
    reason = fold.manifest["review"]["fallback_reason"]
    assert reason.startswith("the writer's window (600 tokens, WRITER_WINDOW_TOKENS) cannot hold")
    assert "no writer call made" in fold.manifest["note"]


def test_an_answer_cut_at_max_tokens_splits_a_slice_of_several_rounds():
    journal = _journal(_rounds(4))
    with ScriptedServer() as server:
        server.push_content('{"facts": [{"key": "f1", "text": "8 tests', finish_reason="length")
        for _ in range(8):
            server.push_content(EMPTY)
        writer = ModelWriter(server.config(max_output_tokens=500))
        fold = ledger_fold(journal=journal, writer=writer, recover=False).fold
        writer_calls = len(_writer_requests(server))
    assert fold.outcome == Fold.Outcome.ACCEPTED
    assert "split in two: the answer was cut at max_tokens (500)" in fold.manifest["note"]
    assert writer_calls == 3  # the cut answer, then each half once
    assert fold.manifest["model_calls"][0]["finish_reason"] == "length"


def test_a_model_that_loops_to_max_tokens_on_one_round_falls_back_naming_the_cause():
    journal = _journal(_rounds(1))
    with ScriptedServer() as server:
        loop = '{"facts": [' + '{"key": "f1", "text": "again"},' * 40
        server.answer_all(loop, finish_reason="length")
        fold = ledger_fold(journal=journal, writer=ModelWriter(server.config()), recover=False).fold
        calls = len(_writer_requests(server))
    assert fold.outcome == Fold.Outcome.FALLBACK
    # split to single rounds (3 here), then each gets its proposal and its one repair
    assert calls == 2 + 3 * 2
    reason = fold.manifest["review"]["fallback_reason"]
    assert "cut at max_tokens (4096)" in reason
    assert not [f for f in fold.state_dict["facts"].values() if f.get("author") == "writer"]
    errors = list(Proposal.objects.filter(attempt__fold=fold).values_list("error", flat=True))
    assert all("finish_reason length" in e for e in errors if e)


@pytest.mark.parametrize(
    ("body", "content_type", "cause"),
    [
        (b"<html><body>502 Bad Gateway</body></html>", "text/html", "not a chat completion"),
        (b"", "application/json", "empty body"),
        (b'{"object": "chat.completion", "choices": []}', "application/json", "no choices"),
    ],
)
def test_a_bad_body_twice_is_a_labelled_fallback_and_the_next_fold_is_unaffected(
    body, content_type, cause
):
    journal = _journal(_rounds(1))
    with ScriptedServer() as server:
        server.push_raw(body, content_type=content_type)
        server.push_raw(body, content_type=content_type)
        writer = ModelWriter(server.config())
        fold = ledger_fold(journal=journal, writer=writer, recover=False).fold
        assert fold.outcome == Fold.Outcome.FALLBACK
        assert cause in fold.manifest["review"]["fallback_reason"]
        assert not [f for f in fold.state_dict["facts"].values() if f.get("author") == "writer"]
        journal_append(journal=journal, items=[message("user", "Thanks.")])
        server.push_content(EMPTY)
        nxt = ledger_fold(journal=journal, writer=writer, recover=False).fold
    assert nxt.outcome == Fold.Outcome.ACCEPTED


def test_a_schema_refused_with_500_is_downgraded_and_the_fold_does_not_fail():
    journal = _journal(_rounds(1))
    with ScriptedServer(reject_schema=True, reject_status=500) as server:
        server.push_content(EMPTY)
        fold = ledger_fold(
            journal=journal, writer=ModelWriter(server.config(max_attempts=4)), recover=False
        ).fold
        sent = list(server.requests)
    assert fold.outcome == Fold.Outcome.ACCEPTED and len(sent) == 2
    [call] = fold.manifest["model_calls"]
    assert call["response_format"] == "json_object" and "refused" in call["errors"][0]
    system = sent[1]["messages"][0]["content"]
    assert "## Answer format" in system and '"support":[5]' in system


def test_a_refused_request_fails_the_fold_and_leaves_the_ledger_unchanged():
    journal = _journal(_rounds(1))
    with ScriptedServer() as server:
        server.push_error(401, message="bad key")
        with pytest.raises(FoldFailed):
            ledger_fold(journal=journal, writer=ModelWriter(server.config()), recover=False)
    assert not Fold.objects.filter(journal=journal).exists()


# ------------------------------------------------------------------ pure slicing


def _views(journal):
    from journal_app.models import Entry
    from ledger_app.services.entries import entry_view

    return [entry_view(e) for e in Entry.objects.filter(journal=journal).order_by("seq")]


def test_rounds_never_separate_a_call_from_its_result():
    views = _views(_journal(_rounds(3)))
    groups = rounds_of(views)
    assert [e.seq for g in groups for e in g] == [e.seq for e in views]
    for g in groups:
        calls = {e.tool_call_id for e in g if e.kind == "tool_call"}
        results = {e.tool_call_id for e in g if e.kind == "tool_result"}
        assert calls == results


def test_slices_pack_whole_rounds_within_the_budget_and_split_halves():
    views = _views(_journal(_rounds(6)))
    plan = Plan(window=4000, output_tokens=1000, state_tokens=0, fixed_tokens=0, entry_budget=700)
    parts = slices(views, plan)
    assert len(parts) > 2 and [e.seq for p in parts for e in p] == [e.seq for e in views]
    left, right = split(views)
    assert left and right and left[-1].seq + 1 == right[0].seq
    assert split(rounds_of(views)[-1]) is None
    unbounded = Plan(window=0, output_tokens=1000, state_tokens=0, fixed_tokens=0, entry_budget=0)
    assert slices(views, unbounded) == [views]


# ------------------------------------------------------------------ prompts a small model follows


def _fact(key, text, support):
    return {
        "key": key,
        "category": "verified_state",
        "priority": "P1",
        "confidence": "verified",
        "text": text,
        "support": support,
    }


def _tests_journal():
    return _journal(
        [
            message("system", "Keep the build green."),
            message("user", "Run the refund tests in tests/test_refunds.py."),
            message("assistant", "Running that file."),
            tool_call("t1", "exec", {"command": "pytest tests/test_refunds.py"}),
            tool_result(
                "t1", "........                                   [100%]\n8 passed in 0.12s"
            ),
        ],
        key="v1",
    )


def _verdict(key, **extra):
    return {
        "key": key,
        "entailment": "entailed",
        "entailment_reason": "the result shows it",
        "temporal": "valid",
        "temporal_reason": "nothing is closed",
        **extra,
    }


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({}, "it names no seq"),
        ({"seq": 3, "quote": "Running"}, "seq 3 is not one of the item's cited entries"),
        ({"seq": 5, "quote": "11 passed"}, "its quote does not occur in seq 5"),
    ],
)
def test_a_verdict_without_its_seq_and_quote_counts_as_no_verdict(extra, why):
    journal = _tests_journal()
    claim = _fact("f1", "8 tests in tests/test_refunds.py passed", [5])
    with ScriptedServer() as server:
        server.push_json({"facts": [claim]})
        server.push_json({"verdicts": [_verdict("f1", **extra)]})
        server.push_json({"facts": [claim]})
        server.push_json({"verdicts": [_verdict("f1", seq=5, quote="8 passed in 0.12s")]})
        fold = ledger_fold(journal=journal, writer=ModelWriter(server.config()), recover=False).fold
        repair = server.requests[2]["messages"]
    assert fold.outcome == Fold.Outcome.REPAIRED
    [first] = fold.manifest["review"]["rejections"]
    assert (
        f"verifier: no verdict: the verifier did not name the seq and quote it rests on ({why}"
        in (first["reasons"][0])
    )
    # the repair carries the rejected item and its reasons, not the first answer
    assert [m["role"] for m in repair] == ["system", "user", "user"]
    body = json.loads(repair[-1]["content"].split("\n", 1)[1])
    assert [r["key"] for r in body["rejected"]] == ["f1"] and "facts" not in body


def test_the_verifier_judges_in_batches_that_fit_its_window():
    journal = _journal(_rounds(6), key="b1")
    facts = [
        _fact(f"f{i}", f"{i + 3} tests in tests/test_part_{i}.py passed", [4 + 2 * i])
        for i in range(6)
    ]
    with ScriptedServer() as server:
        server.push_json({"facts": facts})
        for _ in range(6):
            server.push_json(
                {
                    "verdicts": [
                        _verdict(f"f{i}", seq=4 + 2 * i, quote=f"{i + 3} passed") for i in range(6)
                    ]
                }
            )
        writer = ModelWriter(server.config(verifier_window=3500, max_output_tokens=1000))
        fold = ledger_fold(journal=journal, writer=writer, recover=False).fold
        verifier_calls = [r for r in server.requests if r["model"] == "scripted-verifier"]
    assert fold.outcome == Fold.Outcome.ACCEPTED
    assert len(verifier_calls) > 1
    judged = [
        json.loads(r["messages"][-1]["content"].split("\n", 1)[1])["items"] for r in verifier_calls
    ]
    assert sorted(i["key"] for batch in judged for i in batch) == [f"f{i}" for i in range(6)]
    assert all(prompt_tokens(r) + r["max_tokens"] <= 3500 for r in verifier_calls)


def test_the_writer_rubric_shows_one_worked_example_per_kind():
    from ledger_app.model_writer import WRITER_PROMPT, load_prompt
    from ledger_app.proposals import WRITER_CATEGORIES

    text = load_prompt(WRITER_PROMPT).text
    for category in WRITER_CATEGORIES:
        assert f'"category": "{category}"' in text.replace("\n  ", " ")
    assert '"op": "close"' in text


def test_the_verifier_page_says_an_answer_was_cut_at_max_tokens(client):
    from django.urls import reverse

    from tests.factories import MembershipFactory, UserFactory

    journal = _journal(_rounds(1), key="cut")
    with ScriptedServer() as server:
        server.answer_all('{"facts": [', finish_reason="length")
        fold = ledger_fold(journal=journal, writer=ModelWriter(server.config()), recover=False).fold
    user = MembershipFactory(tenant=journal.session.tenant, user=UserFactory()).user
    client.force_login(user)
    page = client.get(reverse("ledger:verdicts", args=["acme", "cut", "main", "main", fold.number]))
    assert page.status_code == 200
    assert "cut at max_tokens (4096)" in page.content.decode()


def test_the_verifier_page_of_a_model_fold_that_proposed_nothing_says_so(client):
    """Not the offline writers' sentence ("which proposes no items for a verifier"): a model
    writer does propose items; this one proposed none that reached the verifier."""
    from django.urls import reverse

    from tests.factories import MembershipFactory, UserFactory

    journal = _journal(_rounds(1), key="none")
    with ScriptedServer() as server:
        server.answer_all('{"facts": [], "ends": []}')
        fold = ledger_fold(journal=journal, writer=ModelWriter(server.config()), recover=False).fold
    user = MembershipFactory(tenant=journal.session.tenant, user=UserFactory()).user
    client.force_login(user)
    page = client.get(
        reverse("ledger:verdicts", args=["acme", "none", "main", "main", fold.number])
    )
    text = page.content.decode()
    assert "proposed none that reached the verifier" in text
    assert "which proposes no items for a verifier" not in text
