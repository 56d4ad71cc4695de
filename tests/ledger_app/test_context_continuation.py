"""The ledger concludes, context side (docs/design.md 5.2 and 6): the continuation record, pins as
the ledger says (a done request is one line, never current), harness records out of the
request, end states kept, tiny requests compacted."""

from __future__ import annotations

import json

import pytest

from journal_app.formats import parse_path
from journal_app.formats.base import message, tool_call, tool_result
from ledger_app import reducer
from ledger_app.context import build_context
from ledger_app.context.assembly import Assembled
from ledger_app.context.continuation import (
    RECORD_MARK,
    SECTIONS,
    continuation_record,
    first_line,
)
from ledger_app.validation import TASK_STATE_MARK, message_texts
from tests.conftest import CORPUS
from tests.ledger_app.test_context import build, padded_items, views
from tests.support.offline_fold import offline_fold


def texts(view) -> list[str]:
    out = [t for m in view["messages"] for t in message_texts(m)]
    return out + [b["text"] for b in view.get("system", [])]


def checkpoint_of(view) -> str:
    return next(t for t in texts(view) if t.startswith("[ledger checkpoint"))


# ------------------------------------------------------------------ the continuation record


def waves_session():
    """A plan in waves: the user asks, approves W4; the migration runs; a changelog is asked."""
    return views(
        [
            message("system", "Never run migrations against production."),
            message("user", "Run the rollout plan W1-W6 against staging, one wave at a time."),
            tool_call("m1", "bash", {"command": "./manage.py migrate app 0042 --settings=staging"}),
            tool_result("m1", "Applying app.0042_backfill... OK", exit_code=0),
            message("user", "Approved: run W4 against staging now."),
            tool_call("t1", "bash", {"command": "pytest tests/test_w4.py"}),
            tool_result("t1", "FAILED tests/test_w4.py::test_backfill\n1 failed", is_error=True),
            message("user", "Add a CHANGELOG entry for W1-W5."),
        ]
    )


def waves_ledger(entries):
    """The ledger a fold of :func:`waves_session` gives, with what the other writers add:
    the rollout request closed by the migration, a decision, a plan, an end state."""
    ledger, _ = offline_fold(entries, upto=entries[-1].seq)
    facts = ledger["facts"]
    by_seq = {e.seq: e for e in entries}
    first, approval, changelog = (facts[f"pin:{by_seq[s].entry_hash[:16]}"] for s in (2, 5, 8))
    first.update(
        pin_kind="request",
        lifecycle="closed",
        ended_by={"fold": 1, "evidence": [by_seq[4].entry_hash], "seq": 4},
    )
    approval["pin_kind"] = "governing"
    # a consequential action is P1 until superseded (the lead's consequence table)
    facts[f"tool:{by_seq[4].entry_hash[:16]}"]["priority"] = "P1"
    changelog["pin_kind"] = "request"
    support = by_seq[5].entry_hash
    for fid, category, text, extra in (
        ("objective:1", "objective", "Roll out W1-W6 to staging.", {}),
        (
            "decision:w4",
            "decision",
            "Approved: run W4 against staging now.",
            {
                "lifecycle": "closed",
                "ended_by": {"fold": 1, "evidence": [by_seq[4].entry_hash], "seq": 4},
            },
        ),
        (
            "decision:style",
            "decision",
            "Take option 2, but replace X with Y: 'Faster refunds, fewer clicks'",
            {},
        ),
        (
            "plan:w5",
            "open_obligation",
            "W5: backfill the ledger table",
            {"plan_status": "in_progress"},
        ),
        ("plan:w6", "open_obligation", "W6: switch traffic", {"plan_status": "pending"}),
    ):
        facts[fid] = {
            "id": fid,
            "category": category,
            "priority": "P1",
            "lifecycle": "active",
            "text": text,
            "support": [{"entry": by_seq[2].entry_hash if fid == "objective:1" else support}],
            **extra,
        }
    return ledger


def test_the_continuation_record_has_each_section_with_its_content():
    entries = waves_session()
    by_hash = {e.entry_hash: e for e in entries}
    ledger = waves_ledger(entries)
    record = continuation_record(
        ledger["facts"].values(), by_hash=by_hash, end_status="exit_status submitted"
    )
    s = record.sections
    assert list(s) == [x for x in SECTIONS if x != "constraints"]
    assert s["objective"][0].startswith("- Roll out W1-W6 to staging. (objective:1; sha256:")
    # the decision's exact text, quoted
    assert s["decisions"] == [
        "- \"Take option 2, but replace X with Y: 'Faster refunds, fewer clicks'\" "
        f"(decision:style; sha256:{entries[4].entry_hash[:12]})"
    ]
    migration = entries[3].entry_hash
    # done: the migration (a consequential success) with its evidence, the rollout request
    # as one line, the approval consumed at seq 4
    assert any(line.startswith("- done: `bash`") and "0042" in line for line in s["done"]), s[
        "done"
    ]
    assert (
        "- done at seq 4: Run the rollout plan W1-W6 against staging, one wave at a time., "
        f"evidence sha256:{migration[:12]}"
    ) in s["done"]
    assert any(
        line.startswith("- used at seq 4: Approved: run W4 against staging now.")
        for line in s["done"]
    )
    assert s["in progress"] == [
        f"- W5: backfill the ledger table (plan:w5; sha256:{entries[4].entry_hash[:12]})"
    ]
    assert s["pending"] == [f"- W6: switch traffic (plan:w6; sha256:{entries[4].entry_hash[:12]})"]
    assert len(s["blockers"]) == 1 and "test_w4.py" in s["blockers"][0]
    assert s["end state"] == ["- the source recorded its end status: exit_status submitted"]
    assert s["next step"] == [
        f"- the open request, seq 8 (pinned above, sha256:{entries[7].entry_hash[:12]}): "
        "Add a CHANGELOG entry for W1-W5."
    ]
    assert record.text.startswith(RECORD_MARK) and record.must
    # the core (what a tight budget keeps) leaves out only the lines pointing at pins
    assert "next step:" in record.text and "next step:" not in record.core
    assert record.core.splitlines() == [
        x for x in record.text.splitlines() if x not in ("next step:", *s["next step"])
    ]
    # the facts the record renders are not repeated in the checkpoint's fact lines
    assert {"objective:1", "decision:style", "plan:w5", "plan:w6"} <= record.shown


def test_a_record_with_nothing_to_say_says_so_in_one_line():
    record = continuation_record([], by_hash={})
    assert record.sections == {} and not record.must
    assert record.text.splitlines() == [
        f"{RECORD_MARK}]",
        "(the ledger holds no objective, decision, done, pending or blocking item yet; the "
        "pins above are the instructions)",
    ]


def test_every_checkpoint_opens_with_the_record_never_a_bare_header():
    entries = views(padded_items())
    result = build(entries, 350, tail_tokens=10)
    assert result.status == "ok" and result.debug_trace["rounds"]["folded_out"]
    ckpt = checkpoint_of(result.model_view).splitlines()
    assert ckpt[0].startswith("[ledger checkpoint: rounds seq 3-")
    assert ckpt[1] == f"{RECORD_MARK}]"
    # a tight budget keeps the lines resting on the ledger; pointers to the pins fill room
    assert ckpt[2] == "blockers:" and "pytest tests/test_refunds.py" in ckpt[3]
    assert "blockers:" in ckpt and any("pytest tests/test_refunds.py" in x for x in ckpt)
    # the blocker is in the record, not again as a fact line
    assert sum("test_refunds.py::test_refund" in x for x in ckpt) == 1
    assert result.debug_trace["continuation_record"]["blockers"]


# ------------------------------------------------------------------ pins as the ledger says


def built_waves(entries):
    """The context of :func:`waves_session` over :func:`waves_ledger`, at a roomy budget."""
    return build_context(
        entries=entries,
        ledger=waves_ledger(entries),
        covered_upto=entries[-1].seq,
        working_budget=20_000,
        hard_limit=20_000,
    )


def test_a_closed_request_is_one_line_and_never_shown_as_current():
    entries = waves_session()
    result = built_waves(entries)
    assert result.status == "ok", result.failure
    shown = texts(result.model_view)
    request = entries[1].text
    assert request not in shown  # never a message of its own, as if current
    line = (
        "done at seq 4: Run the rollout plan W1-W6 against staging, one wave at a time., "
        f"evidence sha256:{entries[3].entry_hash[:12]}"
    )
    assert line in shown  # in place of the request, one line
    assert [t for t in shown if request in t] == [line]
    task = next(t for t in shown if t.startswith(TASK_STATE_MARK))
    assert f"user message at seq 8 (entry sha256:{entries[7].entry_hash[:12]})" in task
    # governing text and the open request are still verbatim
    assert entries[0].text in shown and entries[7].text in shown
    assert "done_request_current" in result.report.checks and result.report.ok


def test_a_closed_request_shown_whole_fails_the_context_check():
    from ledger_app.context.build_state import Builder
    from ledger_app.context.final_request import done_request_problems
    from ledger_app.validation import Meter

    entries = waves_session()
    b = Builder(
        entries=entries,
        ledger=waves_ledger(entries),
        covered_upto=entries[-1].seq,
        receipts={},
        resolve=None,
        working=20_000,
        hard=20_000,
        reserve=0,
        tail_tokens=5_000,
        fmt="openai",
        fold=None,
        meter=Meter(),
    )
    shown_whole = Assembled([{"role": "user", "content": entries[1].text}], [], [[]], {}, {})
    problems = done_request_problems(b, shown_whole)
    assert [p.check for p in problems] == ["done_request_current"]
    assert problems[0].entry == f"sha256:{entries[1].entry_hash}"
    one_line = Assembled([{"role": "user", "content": "done at seq 4: Run ..."}], [], [[]], {}, {})
    assert done_request_problems(b, one_line) == []


def test_pins_are_shown_through_pin_shown_text(monkeypatch):
    import ledger_app.context.build_state as builder
    import ledger_app.context.final_request as final_request

    entries = waves_session()

    def marked(f):
        return str(f.get("text", "")).replace("staging", "[S]")

    # the shown pins (builder) and the pins the validation expects (final_request) alike
    monkeypatch.setattr(builder, "pin_shown_text", marked)
    monkeypatch.setattr(final_request, "pin_shown_text", marked)
    result = built_waves(entries)
    shown = texts(result.model_view)
    assert "Approved: run W4 against [S] now." in shown
    assert "Approved: run W4 against staging now." not in shown
    assert result.status == "ok", result.failure


# ------------------------------------------------------------------ harness records


NAG = (
    "Please always provide EXACTLY ONE action in triple backticks, found 0 actions.\n"
    "If you want to end the task, please issue the following command: "
    "`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`"
)


def nag_session(nags: int):
    items = [
        message("system", "You are a helpful assistant that can run bash commands."),
        message("user", "Make the test in tests/test_api.py pass."),
    ]
    for i in range(nags):
        items.append(message("assistant", f"THOUGHT: let me think about attempt {i}."))
        items.append(message("user", NAG, metadata={"harness": True}))
    items += [
        message("assistant", "THOUGHT: run the test.\n```bash\npytest tests/test_api.py\n```"),
        tool_call("c1", "bash", {"command": "pytest tests/test_api.py"}),
        tool_result("c1", "1 passed", exit_code=0),
    ]
    return views(items)


def test_a_harness_nag_repeated_15_times_costs_one_message():
    entries = nag_session(15)
    result = build(entries, 100_000)
    shown = texts(result.model_view)
    assert sum(t == NAG for t in shown) == 1
    assert result.debug_trace["harness"]["dropped"] == 14
    assert result.debug_trace["harness"]["by_kind"] == {"marked": 14}
    assert result.debug_trace["harness"]["distinct_texts"] == {"marked": 1}
    one = build(nag_session(1), 100_000)
    # fifteen nags cost what one does, plus the assistant's fourteen extra short turns
    extra = result.debug_trace["tokens"]["request"] - one.debug_trace["tokens"]["request"]
    assert extra < 14 * 20
    decision = next(d for d in result.debug_trace["decisions"] if d["action"] == "harness")
    assert decision["reason"].startswith("14 harness records left out")


@pytest.mark.parametrize("budget", [1_000, 2_000, 3_500, 5_500])
def test_a_session_of_nags_builds_at_small_budgets(budget):
    entries = nag_session(15)
    result = build(entries, budget)
    assert result.status == "ok", result.failure
    assert result.debug_trace["tokens"]["request"] <= budget


# ------------------------------------------------------------------ end states


def test_a_run_that_ended_submitted_says_so_and_never_did_not_complete():
    path = next((CORPUS / "swe-agent-traj").iterdir())
    parsed = parse_path(path)
    assert parsed.metadata["info"]["exit_status"] == "submitted"
    entries = views(parsed.entries)
    for budget in (5_500, 32_000):
        result = build(entries, budget, end_status="exit_status submitted")
        assert result.status == "ok", result.failure
        task = next(t for t in texts(result.model_view) if t.startswith(TASK_STATE_MARK))
        assert "the run has ended: the source recorded exit_status submitted" in task
        assert "did not complete" not in json.dumps(result.model_view)


def test_a_submit_call_with_no_result_is_the_runs_end():
    entries = views(
        [
            message("user", "Fix the bug and submit."),
            tool_call("e1", "bash", {"command": "sed -i s/a/b/ x.py"}),
            tool_result("e1", "", exit_code=0),
            tool_call("s1", "submit", {}),
        ]
    )
    result = build(entries, 10_000)
    task = next(t for t in texts(result.model_view) if t.startswith(TASK_STATE_MARK))
    assert "submitted s1: `submit` ended the run by submitting its final output" in task
    assert "did not complete" not in task and "has no result yet" not in task


def test_the_last_deliverable_is_kept_whole_in_the_record():
    text = "## Plan\n" + "\n".join(f"{i}. step {i}: do thing {i} carefully" for i in range(80))
    entries = views([message("user", "Write the plan."), message("assistant", text)])
    fact = {
        "id": "said:1",
        "category": "history",
        "priority": "P1",
        "lifecycle": "active",
        "command_key": "assistant:end-state",
        "text": "Assistant concluded (seq 2): ## Plan ...",
        "support": [{"entry": entries[1].entry_hash}],
    }
    by_hash = {e.entry_hash: e for e in entries}
    whole = continuation_record([fact], by_hash=by_hash)
    assert whole.sections["end state"][0].endswith("whole:\n" + text)
    assert len(text) > 2_000  # not cut to an excerpt
    small = continuation_record(
        [fact], by_hash=by_hash, deliverable_tokens=50, count=lambda t: len(t) // 4
    )
    receipt = small.sections["end state"][0]
    assert f"{len(text)} characters, receipt: entry sha256:{entries[1].entry_hash}" in receipt
    assert receipt.endswith(
        "## Plan\n0. step 0: do thing 0 carefully\n1. step 1: do thing 1 carefully"
    )


# ------------------------------------------------------------------ tiny requests


def tiny_session():
    return views(
        [
            message("user", "List the files in src and tell me which one defines main."),
            tool_call("c1", "bash", {"command": "ls src"}),
            tool_result("c1", "app.py\ncli.py\nutil.py\n__init__.py"),
            tool_call("c2", "bash", {"command": "grep -l 'def main' src/*.py"}),
            tool_result("c2", "src/cli.py"),
            message("assistant", "`main` is defined in src/cli.py."),
        ]
    )


def test_a_97_token_request_at_budget_80_is_compacted():
    entries = tiny_session()
    result = build(entries, 80)
    uncompacted = result.debug_trace["tokens"]["journal_uncompacted"]
    assert 90 <= uncompacted <= 105
    assert result.status == "ok", result.failure
    assert result.debug_trace["tokens"]["request"] <= 80
    assert result.debug_trace["rounds"]["folded_out"][0] == [2, 3]
    reasons = [d["reason"] for d in result.debug_trace["decisions"]]
    assert not any("nothing to compact" in r for r in reasons)
    assert entries[0].text in texts(result.model_view)


def test_a_request_nothing_can_compact_states_its_real_figures():
    entries = tiny_session()
    result = build(entries, 80, fold=None)
    assert result.status == "failed"
    none = next(d for d in result.debug_trace["decisions"] if d["action"] == "none")
    assert none["reason"].startswith(
        f"the request is {none['tokens_before']} tokens, over the limit 80, and no step "
        "could compact it"
    )
    assert none["tokens_before"] > 80
    assert "within 80" not in none["reason"]


def test_first_line_cuts_long_and_multi_line_text():
    assert first_line("short") == "short"
    assert first_line("one\ntwo") == "one ..."
    assert first_line("x" * 200, 20) == "x" * 16 + " ..."


def test_only_the_latest_record_of_each_harness_kind_is_shown():
    caveat = (
        "Caveat: The messages below were generated by the user while running local "
        "commands. DO NOT respond to these messages."
    )
    clear = "<command-name>/clear</command-name><command-message>clear</command-message><command-args></command-args>"
    items = [message("user", "Tidy the imports in app.py.")]
    for n in range(3):
        items += [
            message("user", caveat),
            message("user", clear),
            message("assistant", f"Working on it ({n})."),
            message("user", "[Request interrupted by user]"),
        ]
    result = build(views(items), 100_000)
    shown = texts(result.model_view)
    assert [t for t in shown if t in (caveat, clear, "[Request interrupted by user]")] == [
        caveat,
        clear,
        "[Request interrupted by user]",
    ]
    harness = result.debug_trace["harness"]
    assert harness["by_kind"] == {"interrupt": 2, "local_command": 2, "meta": 2}
    assert harness["kept_seqs"] == [10, 11, 13]
    assert "Tidy the imports in app.py." in shown


def test_two_hundred_done_requests_fit_a_small_budget_as_a_bounded_done_list():
    items = [message("system", "You are a coding agent.")]
    for i in range(200):
        items += [
            message("user", f"Rename variable v{i} to value_{i} in mod{i}.py."),
            tool_call(f"c{i}", "edit", {"path": f"mod{i}.py", "old": f"v{i}", "new": f"x{i}"}),
            tool_result(f"c{i}", "ok", exit_code=0),
            message("assistant", f"Renamed v{i} in mod{i}.py."),
        ]
    entries = views(items)
    ledger, covered = offline_fold(entries, upto=entries[-1].seq)
    by_seq = {e.seq: e for e in entries}
    last = entries[-4]  # the last request stays open
    closes = []
    for e in entries:
        if e.role == "user":
            pin = ledger["facts"][f"pin:{e.entry_hash[:16]}"]
            pin["pin_kind"] = "request"
            if e.seq < last.seq:
                evidence = by_seq[e.seq + 2].entry_hash
                closes.append(
                    {"op": "close", "id": pin["id"], "evidence": [evidence], "seq": e.seq + 2}
                )
    # closed by the reducer, as a fold closes them: each request's edit drops to history
    evidence = {
        e.entry_hash: {"seq": e.seq, "kind": e.kind, "role": e.role, "fold": 1} for e in entries
    }
    delta = {"fold": 2, "evidence": evidence, "lifecycle_rules": 1, "ops": closes}
    ledger = reducer.apply_delta(ledger, delta).state
    result = build(entries, 2_000, ledger=ledger, covered_upto=covered, fold=None)
    assert result.status == "ok", result.failure
    record = result.debug_trace["continuation_record"]
    # the open request's edit (active, consequential) first, then the bounded closed list
    assert record["done"][0].startswith("- done: `edit` on `mod199.py`")
    assert record["done"][1] == "- (+187 earlier done items in the ledger)"
    assert len(record["done"]) == 14
    assert record["done"][-1].startswith(f"- done at seq {last.seq - 2}: Rename variable v198")
    assert record["next step"] == [
        f"- the open request, seq {last.seq} (pinned above, sha256:{last.entry_hash[:12]}): "
        "Rename variable v199 to value_199 in mod199.py."
    ]
    shown = texts(result.model_view)
    assert last.text in shown
    assert not any(e.text in shown for e in entries if e.role == "user" and e.seq < last.seq)


def test_a_used_decision_keeps_its_text_an_answered_question_awaits_nothing():
    entries = waves_session()
    by_hash = {e.entry_hash: e for e in entries}
    ledger = waves_ledger(entries)
    facts = ledger["facts"]
    facts["decision:w4"]["decision_text"] = "run W4 against staging now"
    facts["said:q"] = {
        "id": "said:q",
        "category": "history",
        "priority": "P2",
        "lifecycle": "active",
        "text": "Assistant concluded (seq 4): Shall I run W4? It awaits the user's reply.",
        "support": [{"entry": entries[3].entry_hash}],
        "awaits_user": True,
    }
    s = continuation_record(facts.values(), by_hash=by_hash).sections
    assert (
        '- decided: "run W4 against staging now", used at seq 4 '
        f"(decision:w4; sha256:{entries[4].entry_hash[:12]})"
    ) in s["decisions"]
    # the user wrote at seq 5 and 8, after the question: it is answered
    assert not any("awaiting the user's reply" in line for line in s.get("pending", []))


def test_the_next_step_is_a_governing_message_that_came_after_the_last_done_request():
    entries = waves_session()
    by_hash = {e.entry_hash: e for e in entries}
    facts = waves_ledger(entries)["facts"]
    changelog = facts[f"pin:{entries[7].entry_hash[:16]}"]
    changelog.update(pin_kind="governing")  # "Never ... ; now add a CHANGELOG entry"
    s = continuation_record(facts.values(), by_hash=by_hash).sections
    assert s["next step"] == [
        f"- the latest user instruction, seq 8 (pinned above, sha256:{entries[7].entry_hash[:12]})"
        ": Add a CHANGELOG entry for W1-W5."
    ]


def test_only_the_latest_open_requests_are_verbatim_the_rest_are_lines_and_a_count():
    items = [message("system", "You are a coding agent.")]
    for i in range(30):
        items += [
            message("user", f"Look into flaky test number {i} in suite_{i}.py please."),
            tool_call(f"c{i}", "read_file", {"path": f"suite_{i}.py"}),
            tool_result(f"c{i}", "def test(): ..."),
        ]
    entries = views(items)
    ledger, covered = offline_fold(entries, upto=entries[-1].seq)
    users = [e for e in entries if e.role == "user"]
    for e in users:
        ledger["facts"][f"pin:{e.entry_hash[:16]}"].update(pin_kind="request", seq=e.seq)
    result = build(entries, 900, ledger=ledger, covered_upto=covered, fold=None)
    assert result.status == "ok", result.failure
    shown = texts(result.model_view)
    verbatim = [e for e in users if e.text in shown]
    # no open request before the last folded-out round is shown verbatim but the latest
    # three; the recent tail stays verbatim history
    last_folded = max(b for _, b in result.debug_trace["rounds"]["folded_out"])
    assert [e.seq for e in verbatim if e.seq < last_folded] == []
    assert {e.seq for e in users[-3:]} <= {e.seq for e in verbatim}
    assert len(verbatim) < len(users) - 10
    pending = result.debug_trace["continuation_record"]["pending"]
    assert "- (+17 older open requests with no completion evidence in the ledger; " in (
        "\n".join(pending)
    )
    lines = [x for x in pending if x.startswith("- open request, not shown above: ")]
    assert len(lines) == 10 and f"seq {users[-4].seq}: Look into flaky test number 26" in lines[-1]
