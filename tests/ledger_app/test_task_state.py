"""Task state that tells the truth in the context (item 5's summaries).

Pure tests (no database): pending calls, instructions carried out, the checkpoint that is
never a bare header, imported summaries as checkpoint text, and Anthropic thinking blocks.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

from journal_app.formats import parse_path
from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result
from ledger_app import reducer
from ledger_app.context.checkpoint import CHECKPOINT_MARK, imported_summaries, summary_text
from ledger_app.context.thinking import loop_thinking, thinking_block
from ledger_app.entry_view import EntryView
from ledger_app.mechanical_writer import MechanicalWriter
from ledger_app.model_writer.judges import default_evidence
from ledger_app.offline import OfflineWriter
from ledger_app.pin_facts import is_pin_source, pin_fact, required_pins
from ledger_app.validation import TASK_STATE_MARK, message_texts
from tests.conftest import CORPUS
from tests.ledger_app.test_context import build, padded_items, views

FRONTEND_SESSION = CORPUS / "claude-code-jsonl" / "claude-code-session-frontend-refactor.jsonl"
SUMMARY_SESSION = CORPUS / "claude-code-jsonl" / "claude-code-session-with-summary-records.jsonl"


def texts(result) -> list[str]:
    return [t for m in result.model_view["messages"] for t in message_texts(m)]


def task_text(result) -> str:
    return next(t for t in texts(result) if t.startswith(TASK_STATE_MARK))


def checkpoint_text(result) -> str:
    return next(t for t in texts(result) if t.startswith(CHECKPOINT_MARK))


def fold(
    covered: Sequence[EntryView], state: dict[str, Any], number: int, writer: Any
) -> dict[str, Any]:
    """One fold of ``covered`` onto ``state`` by ``writer``, judged by the reducer (the
    evidence index the fold service gives it: the covered entries)."""
    ops = [{"op": "add", "fact": pin_fact(v)} for v in covered if is_pin_source(v)]
    ops += writer.propose(list(covered), state)
    evidence = default_evidence(covered, number)(ops)
    delta = {
        "fold": number,
        "revision": covered[-1].seq,
        "evidence": evidence,
        "required_pins": required_pins(covered),
        "ops": ops,
    }
    return reducer.apply_delta(copy.deepcopy(state), delta).state


# ---------------------------------------------------------------- pending calls


def approval_session(pending: bool, answered: bool) -> list[ParsedEntry]:
    """A deploy call waiting for an approval, the user talking meanwhile, then (maybe) its
    result."""
    meta = {"pending": True} if pending else {}
    items = [
        message("user", "Deploy the release once it is approved."),
        tool_call("d1", "deploy", {"target": "prod"}, metadata=meta),
        message("user", "While we wait: what does the release contain?"),
        message("assistant", "It contains the refund fix."),
    ]
    if answered:
        items.append(tool_result("d1", "deployed release 4.2 to prod"))
        items.append(message("assistant", "The release is deployed."))
    return items


def test_a_declared_pending_call_is_pending_in_the_task_state_never_did_not_complete():
    entries = views(approval_session(pending=True, answered=False))
    result = build(entries, 4000)
    state = task_text(result)
    assert "pending call d1: `deploy` is pending since seq 2" in state
    assert "did not complete" not in state
    assert result.status == "ok"


def test_an_undeclared_call_without_result_still_did_not_complete():
    entries = views(approval_session(pending=False, answered=False))
    state = task_text(build(entries, 4000))
    assert "interrupted call d1: `deploy` was called and did not complete" in state
    assert "pending" not in state


def test_the_fold_records_a_pending_call_as_pending_and_its_result_closes_it():
    entries = views(approval_session(pending=True, answered=True))
    first, later = entries[:4], entries[4:]
    for writer in (MechanicalWriter(), OfflineWriter()):
        state = fold(first, copy.deepcopy(reducer.EMPTY_STATE), 1, writer)
        fact = state["facts"][f"tool:{entries[1].entry_hash[:16]}"]
        assert fact["outcome"] == "pending" and fact["lifecycle"] == "active"
        assert "is pending since seq 2" in fact["text"] and "did not complete" not in fact["text"]
        state = fold(later, state, 2, writer)
        fact = state["facts"][f"tool:{entries[1].entry_hash[:16]}"]
        assert fact["lifecycle"] == "closed"
        assert fact["ended_by"]["evidence"] == [entries[4].entry_hash]


def test_an_error_result_closes_no_pending_obligation():
    items = approval_session(pending=True, answered=False) + [
        tool_result("d1", "approval denied", is_error=True)
    ]
    entries = views(items)
    state = fold(entries[:4], copy.deepcopy(reducer.EMPTY_STATE), 1, MechanicalWriter())
    state = fold(entries[4:], state, 2, MechanicalWriter())
    assert state["facts"][f"tool:{entries[1].entry_hash[:16]}"]["lifecycle"] == "active"


def test_when_the_result_arrives_the_pair_is_restored_and_nothing_says_pending():
    entries = views(approval_session(pending=True, answered=True))
    # the ledger folded before the result came: the obligation is still active in it
    ledger = fold(entries[:4], copy.deepcopy(reducer.EMPTY_STATE), 1, MechanicalWriter())
    result = build(entries, 4000, ledger=ledger, covered_upto=4, fold=None)
    assert result.status == "ok"
    calls = [c["id"] for m in result.model_view["messages"] for c in m.get("tool_calls") or []]
    answers = [m["tool_call_id"] for m in result.model_view["messages"] if m["role"] == "tool"]
    assert calls == answers == ["d1"]
    assert not any("pending" in t or "did not complete" in t for t in texts(result))


# ---------------------------------------------------------------- instructions carried out


def drop_table_session() -> list[ParsedEntry]:
    return [
        message("user", "Drop the table audit_old."),
        tool_call("q1", "sql", {"query": "DROP TABLE audit_old"}),
        tool_result("q1", "DROP TABLE"),
        message("assistant", "The table audit_old is dropped."),
        message("user", "Now list the remaining tables."),
    ]


def completion_ledger(entries: Sequence[EntryView], closed: bool) -> dict[str, Any]:
    """A hand-made ledger: the pins, and an obligation citing the instruction, closed on the
    tool result when ``closed`` (the record of completion)."""
    facts = {pin_fact(e)["id"]: pin_fact(e) for e in entries if is_pin_source(e)}
    facts["task:drop"] = {
        "id": "task:drop",
        "category": "open_obligation",
        "priority": "P1",
        "lifecycle": "closed" if closed else "active",
        "confidence": "reported",
        "text": "Drop the table audit_old (the user's instruction)",
        "support": [{"entry": entries[0].entry_hash}],
        "author": "offline",
    }
    if closed:
        facts["task:drop"]["ended_by"] = {"fold": 1, "evidence": [entries[2].entry_hash]}
    return {"facts": facts, "folds": 1}


def test_a_carried_out_instruction_is_shown_done_next_to_its_pin():
    entries = views(drop_table_session())
    ledger = completion_ledger(entries, closed=True)
    result = build(entries, 4000, ledger=ledger, covered_upto=3, fold=None)
    state = task_text(result)
    assert (
        f"- done: the instruction at seq 1 (entry sha256:{entries[0].entry_hash[:12]}) was "
        f"carried out at seq 3, evidence sha256:{entries[2].entry_hash[:12]}"
    ) in state
    assert "Drop the table audit_old." in texts(result)  # the pin stays verbatim


def test_an_instruction_without_evidence_of_completion_is_not_shown_done():
    entries = views(drop_table_session())
    result = build(entries, 4000, ledger=completion_ledger(entries, closed=False), fold=None)
    state = task_text(result)
    assert "done:" not in state and "carried out" not in state
    assert "open obligation: [task:drop]" in state


def test_a_fact_naming_the_pin_it_completes_is_a_record_of_completion_too():
    entries = views(drop_table_session())
    ledger = completion_ledger(entries, closed=False)
    del ledger["facts"]["task:drop"]
    pin_id = pin_fact(entries[0])["id"]
    ledger["facts"]["done:drop"] = {
        "id": "done:drop",
        "category": "verified_state",
        "priority": "P1",
        "lifecycle": "active",
        "confidence": "verified",
        "text": "audit_old was dropped",
        "support": [{"entry": entries[0].entry_hash}, {"entry": entries[2].entry_hash}],
        "completes": pin_id,
        "author": "offline",
    }
    state = task_text(build(entries, 4000, ledger=ledger, fold=None))
    assert f"carried out at seq 3, evidence sha256:{entries[2].entry_hash[:12]}" in state


# ---------------------------------------------------------------- the checkpoint


def chat_session(turns: int) -> list[ParsedEntry]:
    """Assistant turns with tool calls the writers give no P0/P1 fact about."""
    items = [message("system", "Answer briefly."), message("user", "Explain the design.")]
    for n in range(turns):
        items.append(message("assistant", f"Part {n} of the explanation: " + "detail " * 60))
        items.append(tool_call(f"c{n}", "read_file", {"path": f"docs/part{n}.md"}))
        items.append(tool_result(f"c{n}", "text " * 80))
    return items


def test_a_checkpoint_of_rounds_with_no_facts_says_so_never_a_bare_header():
    entries = views(chat_session(8))
    pins_only = {
        "facts": {pin_fact(e)["id"]: pin_fact(e) for e in entries if is_pin_source(e)},
        "folds": 1,
    }

    def fold_pins(upto: int):
        return pins_only, upto

    result = build(entries, 900, fold=fold_pins)
    assert result.status == "ok", result.failure
    ckpt = checkpoint_text(result)
    assert "no facts yet about these" in ckpt
    assert "assistant messages" in ckpt and "tool calls" in ckpt
    assert ckpt.count("\n") >= 1  # the header never stands alone


def test_a_checkpoint_with_facts_left_out_names_them_even_with_no_room():
    # the padded sample: folding its rounds saves more than the continuation record costs
    entries = views(padded_items())
    folded = omitted = 0
    for budget in range(260, 400, 5):
        result = build(entries, budget, tail_tokens=10)
        if result.status != "ok" or not result.debug_trace["rounds"]["folded_out"]:
            continue
        folded += 1
        shown = [t for t in texts(result) if t.startswith(CHECKPOINT_MARK)]
        if shown:
            assert "\n" in shown[0], (budget, shown[0])  # the omission note at least
        else:  # no room even for the note: no message at all, and the trace says so
            left_out = [d for d in result.debug_trace["decisions"] if d["action"] == "checkpoint"]
            assert left_out and "no room for its note" in left_out[0]["reason"], budget
            omitted += 1
    assert folded > omitted  # most budgets that fold have room for the note


def test_no_checkpoint_of_a_corpus_session_is_a_bare_header():
    entries = views(parse_path(FRONTEND_SESSION).entries)
    result = build(entries, 8_000)  # a bare header before issue 15
    assert result.status == "ok" and result.debug_trace["rounds"]["folded_out"]
    ckpt = checkpoint_text(result)
    assert "\n" in ckpt, ckpt


def test_no_checkpoint_and_no_note_when_nothing_is_folded():
    entries = views(chat_session(1))
    result = build(entries, 20_000)
    assert not any(t.startswith(CHECKPOINT_MARK) for t in texts(result))


# ---------------------------------------------------------------- imported summaries


def compacted_session(summary_words: int = 1500) -> list[ParsedEntry]:
    """A Claude Code session continued after compaction: the source's summary (a derived
    user message, ``isCompactSummary``), then new work."""
    summary = "This session is being continued from a previous conversation. " + (
        "The refund module was refactored and its tests pass. " * (summary_words // 9)
    )
    return [
        message("system", "Be careful with the payments tables."),
        message("user", summary, derived=True, metadata={"isCompactSummary": True}),
        message("user", "Now fix the rounding bug."),
        tool_call("c1", "read_file", {"path": "billing/refunds.py"}),
        tool_result("c1", "def refund(x):\n    return round(x, 2)\n"),
    ]


def test_an_imported_summary_is_never_a_pin_and_is_shown_as_checkpoint_text():
    entries = views(compacted_session(200))
    assert not is_pin_source(entries[1])
    result = build(entries, 8000)
    assert result.status == "ok"
    ckpt = checkpoint_text(result)
    assert (
        f"imported summary at seq 2 (user message, derived by the source, entry sha256:{entries[1].entry_hash[:12]})"
        in ckpt
    )
    assert "The refund module was refactored" in ckpt
    assert entries[1].text not in texts(result)  # not as a user message of its own


def test_a_large_imported_summary_shrinks_to_the_budget_instead_of_failing_it():
    entries = views(compacted_session(3000))  # about 3,000 tokens of summary
    result = build(entries, 1000)
    assert result.status == "ok", result.failure
    ckpt = checkpoint_text(result)
    assert "(clipped; the whole text is entry" in ckpt or "imported summaries not shown" in ckpt
    assert result.report.tokens <= 1000


def test_a_session_without_summaries_has_none():
    entries = views(chat_session(2))
    assert imported_summaries(entries) == []


def test_the_claude_code_summary_records_of_the_corpus_reach_the_context():
    entries = views(parse_path(SUMMARY_SESSION).entries)
    summaries = imported_summaries(entries)
    assert len(summaries) == 16 and all(not is_pin_source(e) for e in summaries)
    result = build(entries, 32_000)
    assert result.status == "ok"
    ckpt = checkpoint_text(result)
    for e in summaries:
        assert summary_text(e) in ckpt  # every summary record's text, none lost
    small = build(entries, 8_000)
    assert small.status == "ok"
    ckpt = checkpoint_text(small)
    shown = [e for e in summaries if summary_text(e) in ckpt]
    named = ckpt.split("imported summaries not shown, in the journal at seq ")[-1]
    assert all(str(e.seq) in named for e in summaries if e not in shown)


# ---------------------------------------------------------------- thinking blocks

SIGNATURE = "EqQBCkYIBxgCKkBsig+/=="


def thinking(text: str, signature: str = SIGNATURE) -> ParsedEntry:
    return ParsedEntry(
        kind="reasoning",
        role="assistant",
        content={"text": text},
        metadata={"signature": signature},
    )


def tool_loop(ends_with_user: bool = False) -> list[ParsedEntry]:
    items = [
        message("system", "Be careful."),
        message("user", "List the files, then count them."),
        thinking("I will list first.", "sig-one"),
        tool_call("c1", "bash", {"command": "ls"}),
        tool_result("c1", "a.txt\nb.txt"),
        thinking("Now count them; the token sk-ant-api03-" + "x" * 20 + " is not mine."),
        ParsedEntry(kind="reasoning", role="assistant", content={"encrypted": "ZW5jcnlwdGVk"}),
        tool_call("c2", "bash", {"command": "ls | wc -l"}),
        tool_result("c2", "2"),
    ]
    if ends_with_user:
        items += [message("assistant", "There are 2 files."), message("user", "Thanks.")]
    return items


def blocks_of(result, kind: str) -> list[dict[str, Any]]:
    return [
        b
        for m in result.model_view["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == kind
    ]


def test_the_last_assistant_turn_of_a_tool_loop_keeps_its_thinking_blocks_verbatim():
    entries = views(tool_loop())
    result = build(entries, 4000, fmt="anthropic")
    assert result.status == "ok", result.failure
    last = [m for m in result.model_view["messages"] if m["role"] == "assistant"][-1]
    assert [b["type"] for b in last["content"]] == ["thinking", "redacted_thinking", "tool_use"]
    assert last["content"][0] == {
        "type": "thinking",
        "thinking": entries[5].text,  # byte for byte, secret-looking text included
        "signature": SIGNATURE,
    }
    assert last["content"][1] == {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
    assert all(b["signature"] != "sig-one" for b in blocks_of(result, "thinking"))


def test_thinking_blocks_are_left_out_when_the_turn_ended_and_in_openai_requests():
    entries = views(tool_loop(ends_with_user=True))
    result = build(entries, 4000, fmt="anthropic")
    assert result.status == "ok" and not blocks_of(result, "thinking")
    openai = build(views(tool_loop()), 4000, fmt="openai")
    assert openai.status == "ok"
    assert not any("Now count them" in t for t in texts(openai))


def test_a_reasoning_entry_without_a_signature_is_never_sent_back():
    codex = EntryView(1, "a" * 64, "reasoning", "assistant", "summary", {"text": "summary"})
    assert thinking_block(codex) is None
    assert loop_thinking([], {}) == []


@pytest.mark.parametrize("fmt", ["anthropic"])
def test_thinking_blocks_count_against_the_budget(fmt):
    entries = views(tool_loop())
    result = build(entries, 4000, fmt=fmt)
    without = build(views([i for i in tool_loop() if i.kind != "reasoning"]), 4000, fmt=fmt)
    assert result.report.tokens > without.report.tokens


def test_the_current_goal_is_never_a_harness_record():
    """An interrupt marker or a caveat the harness wrote after the user's request is not
    what the user asked for: the goal stays the request."""
    from ledger_app.context.task_state import current_goal

    entries = views(
        [
            message("user", "Rename the column amount to amount_cents."),
            message("user", "[Request interrupted by user]"),
            message(
                "user",
                "Caveat: the messages below were generated by the user while running local "
                "commands.",
                metadata={"isMeta": True},
            ),
        ]
    )
    goal = current_goal(entries)
    assert goal is not None and goal.text == "Rename the column amount to amount_cents."


def test_one_done_item_of_a_list_is_not_the_instruction_done():
    from ledger_app.context.task_state import instructions_done

    pin_hash, result = "aa" * 32, "bb" * 32
    pins = {pin_hash: {"id": "pin:aa", "pin": True, "support": [{"entry": pin_hash}]}}
    part = {
        "id": "part:aaaaaaaaaaaaaaaa.1",
        "category": "open_obligation",
        "lifecycle": "closed",
        "support": [{"entry": pin_hash}],
        "ended_by": {"fold": 1, "evidence": [result]},
    }
    assert instructions_done([part], pins) == {}
    whole = {**part, "id": "todo:x"}
    assert instructions_done([whole], pins) == {pin_hash: (whole, [result])}
