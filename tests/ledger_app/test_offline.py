"""The offline writer and the verifier's rules applied mechanically (docs/design.md 5.3).

Pure tests of the parsers and rules first, then the offline writer on every corpus
transcript: each test names facts found by reading the raw file (the exact test counts, the
plan steps, the failures, the user's decisions).
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry
from journal_app.services import (
    journal_append,
    journal_ensure,
    journal_import,
    journals_for_scope,
    session_ensure,
    tenant_ensure,
)
from ledger_app.entry_view import EntryView
from ledger_app.models import Fold, FoldAttempt, Verdict
from ledger_app.offline import (
    EvidenceIndex,
    OfflineWriter,
    assistant_claims,
    check_item,
    is_universal,
    parse_test_output,
    plan_items,
    run_scope,
    user_decisions,
)
from ledger_app.services import fold_deltas, ledger_fold, ledger_verify
from tests.conftest import CORPUS
from tests.factories import MembershipFactory, UserFactory

# ------------------------------------------------------------------ test output, pure

PYTEST = """\
============================= test session starts ==============================
collected 9 items

tests/test_refunds.py ......F.s                                          [100%]
=================================== FAILURES ===================================
=========================== short test summary info ============================
FAILED tests/test_refunds.py::test_round - AssertionError
=================== 1 failed, 7 passed, 1 skipped in 0.21s ====================
"""
UNITTEST_FAIL = "EEE.\n" + "-" * 70 + "\nRan 26 tests in 0.032s\n\nFAILED (failures=1, errors=21)\n"
UNITTEST_OK = "..........\n" + "-" * 70 + "\nRan 10 tests in 0.101s\n\nOK (skipped=2)\n"
JEST = """\
Test Suites: 1 failed, 3 passed, 4 total
Tests:       2 failed, 1 skipped, 40 passed, 43 total
Snapshots:   0 total
Time:        3.2 s
"""
VITEST = (
    "\x1b[2m Test Files \x1b[22m \x1b[1m\x1b[31m1 failed\x1b[39m\x1b[22m\x1b[90m (1)\x1b[39m\n"
    "\x1b[2m      Tests \x1b[22m \x1b[1m\x1b[31m1 failed\x1b[39m\x1b[22m\x1b[2m | \x1b[22m"
    "\x1b[1m\x1b[32m6 passed\x1b[39m\x1b[22m\x1b[90m (7)\x1b[39m\n"
)
GO_V = """\
=== RUN   TestFold
--- PASS: TestFold (0.00s)
=== RUN   TestReplay
--- FAIL: TestReplay (0.01s)
    replay_test.go:12: state differs
=== RUN   TestPins
--- PASS: TestPins (0.00s)
FAIL
FAIL\texample.com/ledger\t0.015s
ok  \texample.com/journal\t0.009s
"""
GO_PLAIN = "ok  \texample.com/a\t0.010s\nok  \texample.com/b\t(cached)\n"
CARGO = """\
running 5 tests
test result: ok. 5 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s
running 3 tests
test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s
"""


def test_pytest_counts():
    run = parse_test_output(PYTEST)
    assert (run.framework, run.passed, run.failed, run.skipped, run.total) == ("pytest", 7, 1, 1, 9)
    assert not run.ok
    assert parse_test_output("8 passed in 0.12s").passed == 8


def test_unittest_counts():
    failed = parse_test_output(UNITTEST_FAIL)
    assert (failed.total, failed.failed, failed.errors, failed.passed) == (26, 1, 21, 4)
    ok = parse_test_output(UNITTEST_OK)
    assert ok.ok and (ok.total, ok.passed, ok.skipped) == (10, 8, 2)


def test_jest_counts():
    run = parse_test_output(JEST)
    assert (run.framework, run.passed, run.failed, run.skipped, run.total) == ("jest", 40, 2, 1, 43)
    assert (run.packages_ok, run.packages_failed) == (3, 1)


def test_vitest_counts_through_ansi_colours():
    run = parse_test_output(VITEST)
    assert (run.framework, run.passed, run.failed, run.total) == ("vitest", 6, 1, 7)
    assert run.summary() == "vitest: 1 failed, 6 passed (7 tests); files: 0 ok, 1 failed"


def test_go_test_counts():
    run = parse_test_output(GO_V)
    assert (run.passed, run.failed, run.total) == (2, 1, 3)
    assert (run.packages_ok, run.packages_failed) == (1, 1) and not run.ok
    plain = parse_test_output(GO_PLAIN)
    assert plain.ok and plain.packages_ok == 2 and plain.total is None


def test_cargo_test_counts_are_summed_over_targets():
    run = parse_test_output(CARGO)
    assert (run.framework, run.passed, run.failed, run.skipped, run.total) == (
        "cargo test",
        7,
        1,
        1,
        9,
    )


def test_output_without_a_summary_is_not_a_test_run():
    assert parse_test_output("Compiling ledger v0.1.0\nFinished dev profile") is None


@pytest.mark.parametrize(
    ("command", "scope"),
    [
        ("pytest tests/test_refunds.py", "tests/test_refunds.py"),
        ("pytest", None),
        ("python -m pytest -q", None),
        ("pytest -k refund", "-k refund"),
        ("pytest tests/test_x.py::test_one", "tests/test_x.py::test_one"),
        ("cd apps/app && pnpm test NavUser.test.tsx", "NavUser.test.tsx"),
        ("pnpm --filter @repo/spectora-labs test", None),
        ("npm test", None),
        ("go test ./...", None),
        ("go test ./pkg/ledger", "./pkg/ledger"),
        ("cargo test", None),
        ("/usr/bin/python3 test_requests.py", "test_requests.py"),
        ("ls tests", None),
    ],
)
def test_the_scope_of_a_test_command(command, scope):
    assert run_scope(command) == scope


# ------------------------------------------------------------------ plans and words, pure


def _view(seq, kind, role="assistant", text="", **kw):
    content = kw.pop("content", {"text": text})
    return EntryView(
        seq=seq, entry_hash=f"{seq:064x}", kind=kind, role=role, text=text, content=content, **kw
    )


def _call(seq, call_id, name, arguments):
    return _view(
        seq,
        "tool_call",
        content={"name": name, "arguments": arguments},
        tool_call_id=call_id,
        tool_name=name,
    )


def _result(seq, call_id, output, is_error=False, exit_code=None):
    content = {"output": output, "is_error": is_error}
    if exit_code is not None:
        content["exit_code"] = exit_code
    return _view(
        seq,
        "tool_result",
        role="tool",
        text=output,
        content=content,
        tool_call_id=call_id,
        is_error=is_error,
    )


def test_plan_items_of_each_agent():
    claude = _call(
        1,
        "a",
        "TodoWrite",
        {"todos": [{"content": "Fix  refunds", "status": "in_progress", "activeForm": "Fixing"}]},
    )
    codex = _call(
        2, "b", "update_plan", {"plan": [{"step": "Add the endpoint", "status": "completed"}]}
    )
    opencode = _call(
        3,
        "c",
        "todowrite",
        {"todos": [{"content": "Write tests", "status": "pending", "priority": "high", "id": "1"}]},
    )
    assert plan_items(claude) == [("Fix refunds", "in_progress")]
    assert plan_items(codex) == [("Add the endpoint", "completed")]
    assert plan_items(opencode) == [("Write tests", "pending")]
    assert plan_items(_call(4, "d", "Bash", {"command": "ls"})) is None


def test_opencode_todos_open_obligations_and_their_completion_closes_them():
    writer = OfflineWriter()
    first = [
        _call(
            1,
            "c1",
            "todowrite",
            {
                "todos": [
                    {"content": "Write tests", "status": "pending", "id": "1"},
                    {"content": "Ship", "status": "pending", "id": "2"},
                ]
            },
        ),
        _result(2, "c1", '[{"content": "Write tests", "status": "pending"}]'),
    ]
    ops = writer.propose(first, {"facts": {}})
    assert [op["op"] for op in ops] == ["add", "add", "add"]
    assert ops[0]["fact"]["category"] == "open_obligation" and ops[0]["fact"]["priority"] == "P1"
    plan = ops[2]["fact"]  # the plan itself: its open items, superseded by the next plan
    assert plan["command_key"] == "todowrite:plan-list"
    assert plan["plan_items"] == [ops[0]["fact"]["id"], ops[1]["fact"]["id"]]
    state = {"facts": {op["fact"]["id"]: {**op["fact"], "lifecycle": "active"} for op in ops}}
    later = [
        _call(
            3,
            "c2",
            "todowrite",
            {"todos": [{"content": "Write tests", "status": "completed", "id": "1"}]},
        ),
        _result(4, "c2", "ok"),
    ]
    closes = writer.propose(later, state)
    later_plan = closes[1]["fact"]
    assert closes == [
        {
            "op": "close",
            "id": ops[0]["fact"]["id"],
            "evidence": [later[0].entry_hash, later[1].entry_hash],
            "reason": "marked completed in todowrite at seq 3",
            "seq": 4,
        },
        {"op": "add", "fact": later_plan},
        # "Ship" is not in the latest plan: superseded by it (the plan changed), never
        # closed (nothing shows it done) nor cancelled (the agent is not authoritative)
        {
            "op": "supersede",
            "id": ops[1]["fact"]["id"],
            "by": later_plan["id"],
            "reason": "not an open item of the latest plan (seq 3)",
        },
    ]
    assert later_plan["plan_items"] == []


def test_decisions_are_read_from_user_messages_only():
    user = _view(1, "message", "user", "Thanks. Yes, let's go with the economy class, please.")
    assert user_decisions(user) == ["Yes, let's go with the economy class, please."]
    assistant = _view(2, "message", "assistant", "Let's go with option 2.")
    assert user_decisions(assistant) == []
    injected = _view(3, "message", "user", "We will use zsh.", meta={"injected": True})
    assert user_decisions(injected) == []
    assert user_decisions(_view(4, "message", "user", "Can you run the tests?")) == []


def test_assistant_claims_skip_hedged_and_negative_sentences():
    text = "Perfect! All tests pass. The build is not green yet. Most tests passed."
    assert assistant_claims(_view(1, "message", "assistant", text)) == ["All tests pass."]


@pytest.mark.parametrize(
    ("text", "universal"),
    [
        ("All tests pass", True),
        ("The tests pass", True),
        ("Every test in the suite passed", True),
        ("8 tests in that file passed", False),
        ("8 tests in tests/test_refunds.py passed", False),
        ("All tests in tests/test_refunds.py pass", False),
        ("The deployment succeeded", False),
    ],
)
def test_universal_claims(text, universal):
    assert is_universal(text) is universal


# ------------------------------------------------------------------ the rules, pure


def _pytest_run(n_passed=8, command="pytest tests/test_refunds.py", is_error=False, seq=1):
    call = _call(seq, f"t{seq}", "exec", {"command": command})
    result = _result(seq + 1, f"t{seq}", f"{n_passed} passed in 0.12s", is_error=is_error)
    return call, result


def _claim(text, *support, category="verified_state", confidence="reported"):
    return {
        "op": "add",
        "fact": {
            "id": "x",
            "category": category,
            "priority": "P1",
            "confidence": confidence,
            "text": text,
            "support": [{"entry": e.entry_hash} for e in support],
        },
    }


def test_rules_reject_a_universal_claim_backed_by_one_file():
    call, result = _pytest_run()
    index = EvidenceIndex([call, result])
    verdict = check_item(_claim("All tests pass", result), index, {})
    assert verdict.entailment == "not_entailed" and "scoped evidence" in verdict.entailment_reason
    assert "tests/test_refunds.py" in verdict.entailment_reason
    assert check_item(_claim("8 tests in that file passed", result), index, {}).accepted
    assert check_item(_claim("All 8 tests pass", result), index, {}).accepted  # counted


def test_rules_accept_a_universal_claim_backed_by_the_whole_suite():
    call, result = _pytest_run(command="pytest")
    assert check_item(_claim("All tests pass", result), EvidenceIndex([call, result]), {}).accepted


def test_rules_reject_a_success_claim_citing_a_failed_result():
    call = _call(1, "d", "exec", {"command": "./deploy.sh"})
    failed = _result(2, "d", "Error: health check failed", is_error=True, exit_code=1)
    verdict = check_item(_claim("Deployment is live", failed), EvidenceIndex([call, failed]), {})
    assert not verdict.accepted and failed.entry_hash in verdict.entailment_reason
    blocker = _claim("FAILED: deploy failed", failed, category="blocker")
    assert check_item(blocker, EvidenceIndex([call, failed]), {}).accepted


def test_rules_find_evidence_made_stale_by_a_later_failure():
    call1, ok = _pytest_run(command="pytest", seq=1)
    call2 = _call(3, "t3", "exec", {"command": "pytest"})
    failed = _result(4, "t3", "1 failed, 7 passed in 0.2s", is_error=True, exit_code=1)
    index = EvidenceIndex([call1, ok, call2, failed])
    verdict = check_item(_claim("The suite is green", ok), index, {})
    assert verdict.temporal == "invalid" and "seq 4" in verdict.temporal_reason


def test_rules_refuse_to_close_an_obligation_on_earlier_evidence():
    call, result = _pytest_run(seq=1)
    request = _view(5, "message", "user", "Please also run the refund tests.")
    state = {
        "facts": {
            "o1": {
                "id": "o1",
                "category": "open_obligation",
                "support": [{"entry": request.entry_hash}],
            }
        }
    }
    index = EvidenceIndex([call, result, request])
    verdict = check_item({"op": "close", "id": "o1", "evidence": [result.entry_hash]}, index, state)
    assert verdict.temporal == "invalid" and "predates" in verdict.temporal_reason


# ------------------------------------------------------------------ the corpus, with the database

db = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_auto_fold(settings, tmp_path):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12  # imports must not fold on their own
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.OPENAI_BASE_URL = ""


def _offline(path, tenant="corpus"):
    journal = journal_import(path=CORPUS / path, tenant=tenant).journal
    # the writer alone: recovery before the fold (its own facts) is tested in recovery_app
    fold = ledger_fold(journal=journal, writer="offline", recover=False).fold
    assert fold.outcome == Fold.Outcome.ACCEPTED and fold.writer == "offline"
    assert ledger_verify(journal=journal).ok
    return journal, fold, fold.state_dict["facts"]


def _by_prefix(facts, prefix):
    return sorted((f for f in facts.values() if f["id"].startswith(prefix)), key=lambda f: f["id"])


def _rejected(fold):
    return list(Verdict.objects.filter(proposal__attempt__fold=fold, judge="rules", accepted=False))


def _seq(journal, fact):
    hashes = [s["entry"] for s in fact["support"]]
    return sorted(
        Entry.objects.filter(journal=journal, entry_hash__in=hashes).values_list("seq", flat=True)
    )


@db
def test_claude_code_vitest_runs_the_users_decision_and_the_rejected_all_tests_pass():
    journal, fold, facts = _offline("claude-code-jsonl/claude-code-session-frontend-refactor.jsonl")
    runs = sorted(
        (f for f in facts.values() if f["id"].startswith("test:")), key=lambda f: _seq(journal, f)
    )
    assert [(r["test"]["failed"], r["test"]["passed"], r["test"]["total"]) for r in runs] == [
        (1, 6, 7),
        (0, 7, 7),
    ]
    assert [r["test"]["scope"] for r in runs] == ["NavUser.test.tsx", "NavUser.test.tsx"]
    failed, passed = runs
    # a later passing run of the same command closes the failure, which drops to history
    assert failed["category"] == "blocker" and failed["lifecycle"] == "closed"
    assert failed["ended_by"]["by"] == passed["id"] and passed["lifecycle"] == "active"
    assert (failed["priority"], failed["was_priority"]) == ("P3", "P1")
    assert passed["category"] == "verified_state" and passed["confidence"] == "verified"
    [decision] = _by_prefix(facts, "decision:")
    assert decision["text"] == (
        "User decided: We should use the initials from the username if name isn't present"
    )
    # "Perfect! All tests pass." after a run of one file: rejected, kept on record
    [rejected] = _rejected(fold)
    assert rejected.claim == "Assistant reported: All tests pass."
    assert "NavUser.test.tsx" in rejected.entailment_reason
    assert not any(f["text"] == "Assistant reported: All tests pass." for f in facts.values())
    # "All 7 tests pass" names the count the run shows: it stands, as reported
    [claim] = _by_prefix(facts, "claim:")
    assert claim["text"].startswith("Assistant reported: All 7 tests pass")
    assert claim["confidence"] == "reported"
    assert fold.manifest["writer"]["label"].startswith("offline writer")
    assert fold.manifest["review"]["rejected"] == 1


@db
def test_claude_code_todowrite_opens_seven_obligations_and_closes_the_completed_one():
    _, _, facts = _offline("claude-code-jsonl/claude-code-session-unanswered-tool-uses.jsonl")
    todos = _by_prefix(facts, "todo:")
    assert len(todos) == 7
    closed = [t for t in todos if t["lifecycle"] == "closed"]
    assert [t["text"] for t in closed] == [
        "Planned (TodoWrite): Explore codebase structure and understand project layout"
    ]
    assert sum(t["lifecycle"] == "active" for t in todos) == 6
    assert "Planned (TodoWrite): Check for security issues" in {t["text"] for t in todos}


@db
def test_claude_code_summary_records_are_never_support_and_web_searches_are_p3():
    journal, _, facts = _offline("claude-code-jsonl/claude-code-session-with-summary-records.jsonl")
    derived = set(
        Entry.objects.filter(journal=journal, derived=True).values_list("entry_hash", flat=True)
    )
    assert len(derived) == 16
    assert not derived & {s["entry"] for f in facts.values() for s in f["support"]}
    searches = [f for f in facts.values() if "`WebSearch`" in f["text"]]
    assert len(searches) == 3 and {f["priority"] for f in searches} == {"P3"}


@db
def test_codex_update_plan_steps_close_and_the_vitest_run_counts_245():
    journal, fold, facts = _offline("codex-rollout-jsonl/codex-vscode-long-monorepo-session.jsonl")
    steps = _by_prefix(facts, "todo:")
    assert len(steps) == 3 and {s["lifecycle"] for s in steps} == {"closed"}
    assert "Planned (update_plan): Add backend support for fetching a single team with stats" in (
        " ".join(s["text"] for s in steps)
    )
    [run] = [f for f in facts.values() if f["id"].startswith("test:")]
    assert run["command"] == "pnpm --filter @repo/spectora-labs test"
    assert (run["test"]["passed"], run["test"]["total"], run["test"]["packages_ok"]) == (
        245,
        245,
        26,
    )
    assert run["test"]["scope"] is None and run["category"] == "verified_state"
    checks = [
        f
        for f in facts.values()
        if f.get("command") == "pnpm --filter @repo/spectora-labs check-types"
    ]
    # failed, failed, passed: the first failure is superseded by the second, the second
    # closed by the passing run (docs/design.md 5.5); both drop to P3 history, which the
    # consolidation may evict (the first is: superseded before the second run)
    assert [f["lifecycle"] for f in checks if f["outcome"] == "success"] == ["active"]
    assert all(
        f["lifecycle"] in ("closed", "superseded") and f["priority"] == "P3"
        for f in checks
        if f["outcome"] == "failure"
    )
    assert [f["category"] for f in checks if f["lifecycle"] == "active"] == ["verified_state"]
    # "All three checks are green" cites lint, the test run and the last (passing) type check
    [claim] = _by_prefix(facts, "claim:")
    assert claim["text"] == "Assistant reported: All three checks are green:"
    cited = {s["entry"] for s in claim["support"]}
    assert {s["entry"] for s in run["support"]} & cited
    [decision] = _by_prefix(facts, "decision:")
    assert decision["text"] == (
        "User decided: yes commit the work, push the pr and then create a new branch off "
        "main - feat/dashboard-refactor"
    )


@db
def test_mini_swe_agent_unittest_runs_and_the_rejected_all_tests_passed():
    _, fold, facts = _offline(
        "mini-swe-agent-traj/minisweagent-gemini3-requests-1142-oversized-output.traj.json"
    )
    runs = [f for f in facts.values() if f["id"].startswith("test:")]
    assert len(runs) == 8 and all(r["test"]["scope"] == "test_requests.py" for r in runs)
    [active] = [r for r in runs if r["lifecycle"] == "active"]
    assert (active["test"]["framework"], active["test"]["passed"], active["test"]["total"]) == (
        "unittest",
        26,
        26,
    )
    counted = sorted(
        (r["test"].get("errors"), r["test"].get("passed")) for r in runs if r["test"].get("total")
    )
    assert counted == [(0, 26), (2, 24), (21, 5), (21, 5)]
    [rejected] = _rejected(fold)
    assert rejected.claim == "Assistant reported: THOUGHT: All tests passed!"
    assert "test_requests.py" in rejected.entailment_reason


@db
def test_openhands_failed_builds_and_the_max_iterations_error_are_blockers():
    _, _, facts = _offline("openhands-events/openhands-ponyc-4588-max-iterations.json")
    texts = [
        f["text"]
        for f in facts.values()
        if f["category"] == "blocker" and f["lifecycle"] == "active"
    ]
    assert any("maximum iteration in headless mode" in t for t in texts)
    apt = [t for t in texts if "apt-get install -y libgtest-dev" in t]
    assert (
        len(apt) == 1 and "exit 100" in apt[0] and "Unable to locate package libgtest-dev" in apt[0]
    )
    make = [
        f
        for f in facts.values()
        if f.get("command") == "cd /workspace/ponylang__ponyc__0.1 && make"
    ]
    assert [f["lifecycle"] for f in sorted(make, key=lambda f: f["origin_fold"])].count(
        "active"
    ) == 1


@db
def test_swe_agent_reproduce_output_is_kept_and_the_later_run_supersedes():
    _, _, facts = _offline("swe-agent-traj/sweagent-function-calling-marshmallow-1867.traj")
    runs = [f for f in facts.values() if f.get("command") == "python reproduce.py"]
    assert sorted(
        (f["lifecycle"], f["text"].split("printed: ")[1].split(";")[0]) for f in runs
    ) == [
        ("active", "345"),
        ("superseded", "344"),
    ]
    assert not [f for f in facts.values() if f["category"] == "blocker"]


@db
def test_tau_bench_errors_are_blockers_and_the_customer_choices_are_decisions():
    _, _, facts = _offline("openai-chat-tool-calls/taubench-gpt4o-airline-task3.json")
    blockers = sorted(
        f["text"].split("failed: ")[1] for f in facts.values() if f["category"] == "blocker"
    )
    assert blockers == [
        "Error: certificate cannot be used to update reservation",
        "Error: gift card balance is not enough",
        "Error: gift card balance is not enough",
        "Error: gift card balance is not enough",
        "Error: not enough seats on flight HAT229",
    ]
    decisions = {f["text"] for f in _by_prefix(facts, "decision:")}
    assert (
        "User decided: Yes, let's go with the economy class for this option, please." in decisions
    )
    assert (
        "User decided: Yes, please use the credit card ending in 9725 for the upgrade." in decisions
    )
    assert len(decisions) == 4


@db
def test_opencode_file_not_found_reads_are_history_not_blockers():
    journal_import(path=CORPUS / "opencode-export" / "khala-sessions", tenant="oc")
    texts, blockers = [], []
    for journal in journals_for_scope("oc"):
        facts = ledger_fold(journal=journal, writer="offline").fold.state_dict["facts"].values()
        blockers += [f for f in facts if f["category"] == "blocker"]
        # what the folds wrote (P3 history may be evicted by the consolidation since)
        added = [
            op["fact"]
            for delta in fold_deltas(journal)
            for op in delta["ops"]
            if op["op"] == "add" and "File not found" in op["fact"]["text"]
        ]
        texts += [f["text"] for f in added]
        assert all((f["category"], f["priority"]) == ("history", "P3") for f in added)
    # still stated as failures (no success claim may cite them), never blockers (5.5)
    assert len(texts) == 2 and all(t.startswith("FAILED") for t in texts)
    assert any("khala-opencode-runbook/.opencode" in t for t in texts)
    assert not any("File not found" in f["text"] for f in blockers)


@db
def test_atif_permission_errors_are_blockers():
    _, _, facts = _offline("atif-trajectory/atif-claude-code-regex-log.json")
    texts = sorted(f["text"] for f in facts.values() if f["category"] == "blocker")
    assert len(texts) == 2
    assert "EACCES: permission denied, mkdir '/app'" in texts[1]
    assert "sudo mkdir -p /app" in texts[0] and "(exit 1)" in texts[0]


# ------------------------------------------------------------------ labels, compact


@db
def test_an_offline_fold_stores_its_items_and_verdicts_and_says_offline():
    journal, fold, _ = _offline("claude-code-jsonl/claude-code-session-frontend-refactor.jsonl")
    attempt = fold.attempts.get()
    assert attempt.outcome == FoldAttempt.Outcome.ACCEPTED and attempt.writer == "offline"
    [proposal] = attempt.proposals.all()
    assert proposal.kind == "offline" and proposal.raw == ""  # no model output, ever
    # 27 tool calls, 1 decision, 2 assistant claims, 3 turn conclusions (folded
    # assistant turns never vanish), 2 instructions carried out: one verdict each, by the rules
    # 37: the two requests carried out close their pins (a verdict each)
    assert proposal.verdicts.filter(judge="rules").count() == proposal.verdicts.count() == 37
    assert "model" not in fold.manifest["writer"]["label"].replace("no model", "")
    assert "model_calls" not in fold.manifest
    assert fold.manifest["note"].startswith("offline writer")


@db
def test_compact_defaults_to_the_offline_writer_without_a_model(client, tmp_path):
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key="s1"))
    journal_append(
        journal=journal,
        items=[
            message("user", "Run the refund tests."),
            tool_call("t1", "exec", {"command": "pytest tests/test_refunds.py"}),
            tool_result("t1", "8 passed in 0.12s"),
            message("assistant", "All tests pass."),
        ],
    )
    out = StringIO()
    call_command("compact", "acme", stdout=out)
    text = out.getvalue()
    assert "writer offline writer (deterministic rules, no model)" in text
    assert "accepted" in text and "nothing left to fold" in text
    fold = Fold.objects.get(journal=journal)
    assert fold.writer == "offline" and fold.manifest["writer"]["kind"] == "offline"
    [run] = [f for f in fold.state_dict["facts"].values() if f["id"].startswith("test:")]
    assert "pytest: 8 passed (8 tests)" in run["text"]
    # the UI labels it offline, never as model output
    user = UserFactory(username="alice")
    MembershipFactory(tenant=tenant, user=user)
    client.force_login(user)
    page = client.get(reverse("ledger:fold", args=["acme", "s1", "main", "main", fold.number]))
    assert page.status_code == 200
    assert "offline writer (deterministic rules, no model)" in page.content.decode()


def test_a_bare_string_plan_item_is_a_pending_step_and_a_malformed_one_is_counted():
    call = _call(1, "p", "update_plan", {"plan": ["fix retries", 7, {"step": "ship"}]})
    assert plan_items(call) == [("fix retries", "pending"), ("ship", "pending")]
    ops = OfflineWriter().propose([call, _result(2, "p", "Plan updated.")], {"facts": {}})
    plan = next(op["fact"] for op in ops if op["fact"]["id"].startswith("plan:"))
    assert plan["text"].endswith("2 item(s): 2 pending; 1 malformed item(s) ignored")
