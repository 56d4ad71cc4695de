"""Lifecycles that end (docs/design.md 5.5), as the reducer applies them to any writer's delta."""

from __future__ import annotations

from typing import Any

import pytest

from ledger_app import reducer
from ledger_app.consequence import PatternsInvalid, extend, is_consequential, parse_patterns
from ledger_app.reducer import apply_delta, reduce, state_hash

U1, C1, R_FAIL, C2, R_OK, C3, R_OK2 = (x * 32 for x in ("u1", "c1", "rf", "c2", "r0", "c3", "r3"))
EVIDENCE = {
    U1: {"seq": 1, "kind": "message", "role": "user", "fold": 1},
    C1: {"seq": 2, "kind": "tool_call", "role": "assistant", "fold": 1},
    R_FAIL: {"seq": 3, "kind": "tool_result", "role": "tool", "is_error": True, "fold": 1},
    C2: {"seq": 4, "kind": "tool_call", "role": "assistant", "fold": 2},
    R_OK: {"seq": 5, "kind": "tool_result", "role": "tool", "fold": 2},
    C3: {"seq": 6, "kind": "tool_call", "role": "assistant", "fold": 2},
    R_OK2: {"seq": 7, "kind": "tool_result", "role": "tool", "fold": 2},
}


def run(fid: str, key: str, outcome: str, call: str, result: str, **kw: Any) -> dict[str, Any]:
    failed = outcome == "failure"
    return {
        "id": fid,
        "category": "blocker" if failed else "verified_state",
        "priority": "P1",
        "confidence": "verified",
        "text": ("FAILED: " if failed else "") + f"`{key}`",
        "support": [{"entry": call}, {"entry": result}],
        "author": "code",
        "outcome": outcome,
        "command_key": key,
        **kw,
    }


def delta(fold: int, ops: list[dict[str, Any]], rules: bool = True) -> dict[str, Any]:
    d: dict[str, Any] = {"fold": fold, "evidence": EVIDENCE, "ops": ops}
    if rules:
        d["lifecycle_rules"] = reducer.LIFECYCLE_RULES
    return d


def pin(kind: str) -> dict[str, Any]:
    return {
        "id": "pin:u1",
        "category": "objective",
        "priority": "P0",
        "confidence": "verified",
        "text": "Run the migration",
        "support": [{"entry": U1}],
        "pin": True,
        "author": "code",
        "pin_kind": kind,
    }


def test_it_closes_a_failure_when_a_later_run_of_the_same_command_succeeds():
    first = delta(1, [{"op": "add", "fact": run("f1", "sh:make", "failure", C1, R_FAIL)}])
    second = delta(2, [{"op": "add", "fact": run("f2", "sh:make", "success", C2, R_OK)}])
    state = reduce(None, [first, second])
    failed = state["facts"]["f1"]
    assert failed["lifecycle"] == "closed"
    assert failed["ended_by"] == {"fold": 2, "evidence": [R_OK], "by": "f2"}
    assert (failed["priority"], failed["was_priority"]) == ("P3", "P1")
    assert state["facts"]["f2"]["lifecycle"] == "active"


def test_it_supersedes_a_success_by_a_later_run_and_leaves_other_keys_alone():
    ops = [
        {"op": "add", "fact": run("f1", "sh:make", "success", C1, R_OK)},
        {"op": "add", "fact": run("g1", "sh:ls", "success", C3, R_OK2)},
        {"op": "add", "fact": run("f2", "sh:make", "success", C2, R_OK)},
    ]
    red = apply_delta(reducer.EMPTY_STATE, delta(2, ops))
    facts = red.state["facts"]
    assert (facts["f1"]["lifecycle"], facts["f1"]["superseded_by"]) == ("superseded", "f2")
    assert facts["f1"]["priority"] == "P3"
    assert facts["g1"]["lifecycle"] == "active" and facts["g1"]["priority"] == "P1"
    assert red.results[2].reason == "f1 superseded (same command key)"


def test_a_delta_written_before_the_rules_replays_as_it_was():
    ops = [
        {"op": "add", "fact": run("f1", "sh:make", "failure", C1, R_FAIL)},
        {"op": "add", "fact": run("f2", "sh:make", "success", C2, R_OK)},
    ]
    old = reduce(None, [delta(2, ops, rules=False)])
    assert [old["facts"][f]["lifecycle"] for f in ("f1", "f2")] == ["active", "active"]
    assert old["facts"]["f1"]["priority"] == "P1"
    new = reduce(None, [delta(2, ops)])
    assert state_hash(old) != state_hash(new)


def test_a_replay_gives_the_state_the_folds_gave_one_by_one():
    deltas = [
        delta(1, [{"op": "add", "fact": run("f1", "sh:make", "failure", C1, R_FAIL)}]),
        delta(2, [{"op": "add", "fact": run("f2", "sh:make", "success", C2, R_OK)}]),
        delta(3, [{"op": "add", "fact": run("f3", "sh:make", "success", C3, R_OK2)}]),
    ]
    one_by_one: dict[str, Any] = reducer.EMPTY_STATE
    for d in deltas:
        one_by_one = apply_delta(one_by_one, d).state
    assert state_hash(reduce(None, deltas)) == state_hash(one_by_one)
    facts = one_by_one["facts"]
    assert [facts[f]["lifecycle"] for f in ("f1", "f2", "f3")] == ["closed", "superseded", "active"]


@pytest.mark.parametrize(
    ("kind", "status", "reason"),
    [
        ("request", "accepted", ""),
        ("governing", "rejected", "a governing pin ends only by a reviewed retirement"),
    ],
)
def test_close_ends_a_request_pin_never_a_governing_one(kind, status, reason):
    state = apply_delta(reducer.EMPTY_STATE, delta(1, [{"op": "add", "fact": pin(kind)}])).state
    red = apply_delta(
        state, delta(2, [{"op": "close", "id": "pin:u1", "evidence": [C2, R_OK], "seq": 5}])
    )
    assert red.results[0].status == status and reason in red.results[0].reason
    if status == "accepted":
        closed = red.state["facts"]["pin:u1"]
        assert closed["lifecycle"] == "closed" and closed["ended_by"]["seq"] == 5
        assert closed["priority"] == "P0" and closed["text"] == "Run the migration"  # verbatim


def test_a_request_pin_does_not_close_on_a_failed_result():
    state = apply_delta(reducer.EMPTY_STATE, delta(1, [{"op": "add", "fact": pin("request")}]))
    red = apply_delta(
        state.state, delta(2, [{"op": "close", "id": "pin:u1", "evidence": [R_FAIL]}])
    )
    assert red.results[0].status == "rejected"
    assert red.state["facts"]["pin:u1"]["lifecycle"] == "active"


def test_a_plan_item_is_superseded_only_by_a_plan_that_no_longer_holds_it():
    item = {
        "id": "todo:a",
        "category": "open_obligation",
        "priority": "P1",
        "confidence": "reported",
        "text": "Planned: write docs",
        "support": [{"entry": C1}],
        "author": "offline",
        "plan_status": "pending",
    }
    other = {**item, "id": "todo:b", "plan_status": None}
    del other["plan_status"]
    plan = run("plan:2", "todo:plan-list", "success", C2, R_OK, plan_items=["todo:c"])
    holding = run("plan:3", "todo2:plan-list", "success", C3, R_OK2, plan_items=["todo:a"])
    state = reduce(
        None,
        [
            delta(1, [{"op": "add", "fact": item}, {"op": "add", "fact": other}]),
            delta(2, [{"op": "add", "fact": plan}, {"op": "add", "fact": holding}]),
        ],
    )
    red = apply_delta(
        state,
        delta(
            3,
            [
                {"op": "supersede", "id": "todo:a", "by": "plan:3"},  # plan:3 still holds it
                {"op": "supersede", "id": "todo:b", "by": "plan:2"},  # not a plan item
                {"op": "supersede", "id": "todo:a", "by": "plan:2"},
            ],
        ),
    )
    assert [r.status for r in red.results] == ["rejected", "rejected", "accepted"]
    facts = red.state["facts"]
    assert facts["todo:a"]["lifecycle"] == "superseded" and facts["todo:a"]["priority"] == "P3"
    assert facts["todo:b"]["lifecycle"] == "active"


@pytest.mark.parametrize(
    ("tool", "command", "expected"),
    [
        ("shell", "python manage.py migrate payments 0042", True),
        ("shell", "python manage.py backfill_currency --settings=config.staging", True),
        ("shell", "python manage.py shell -c 'print(1)'", False),
        ("shell", "git push origin main", True),
        ("shell", "git status", False),
        ("shell", "rm -rf build/", True),
        ("shell", "ls -la", False),
        ("shell", "echo hi > notes.txt", True),
        ("shell", "pytest -q 2>/dev/null", False),
        ("shell", "kubectl apply -f deploy.yaml", True),
        ("shell", "psql -c 'DELETE FROM orders'", True),
        ("shell", "psql -c 'SELECT 1'", False),
        ("Write", "", True),
        ("mcp__fs__edit_file", "", True),
        ("Read", "", False),
        ("book_reservation", "", True),
        ("get_user_details", "", False),
        ("update_plan", "", False),
        ("TodoWrite", "", False),
    ],
)
def test_the_consequential_table(tool, command, expected):
    assert is_consequential(tool_name=tool, command=command) is expected


def test_the_table_extends_and_refuses_a_bad_pattern_by_key_and_index():
    assert not is_consequential(tool_name="launch_rocket")
    try:
        extend({"tools": ["launch_.*"]})
        assert is_consequential(tool_name="launch_rocket")
    finally:
        extend({})
    assert not is_consequential(tool_name="launch_rocket")
    with pytest.raises(PatternsInvalid, match=r"commands\[1\]: '\(' is not a regex"):
        parse_patterns({"commands": ["ok", "("]})
    with pytest.raises(PatternsInvalid, match="unknown key 'tool'"):
        parse_patterns({"tool": []})


def test_a_model_writers_fact_about_one_command_gets_its_key_and_flag():
    from ledger_app.entry_view import EntryView
    from ledger_app.mechanical import stamp_keys

    call = EntryView(
        seq=2,
        entry_hash=C1,
        kind="tool_call",
        role="assistant",
        text="",
        content={"name": "shell", "arguments": {"command": "python manage.py migrate"}},
        tool_call_id="k1",
        tool_name="shell",
    )
    result = EntryView(
        seq=3,
        entry_hash=R_OK,
        kind="tool_result",
        role="tool",
        text="OK",
        content={},
        tool_call_id="k1",
        tool_name="shell",
    )
    claim = {"id": "w1", "text": "Migrated", "support": [{"entry": C1}, {"entry": R_OK}]}
    offline = {**claim, "id": "w4", "author": "offline"}
    two = {"id": "w2", "text": "Both", "support": [{"entry": C1}, {"entry": U1}]}
    keyed = {"id": "w3", "text": "Has one", "support": [{"entry": C1}], "command_key": "x"}
    ops = [{"op": "add", "fact": f} for f in (claim, two, keyed, offline)]
    out = stamp_keys(ops, [call, result])
    assert out[0]["fact"]["command_key"] == "shell:python manage.py migrate"
    assert out[0]["fact"]["consequential"] is True
    assert "command_key" not in out[1]["fact"]  # also cites a message: not the call's outcome
    assert out[2]["fact"]["command_key"] == "x"
    assert "command_key" not in out[3]["fact"]  # the offline writer keys its own facts
    assert "command_key" not in claim  # the given ops are not modified


def test_a_closed_request_ends_the_p1_facts_that_carried_it_out():
    edit = run(f"tool:{R_OK[:16]}", "edit:a.py", "success", C2, R_OK, consequential=True)
    migration = run(f"tool:{R_OK2[:16]}", "sh:migrate", "success", C3, R_OK2, consequential=True)
    done = {**run(f"done:{'u1' * 8}", "", "success", U1, R_OK), "command_key": ""}
    state = reduce(
        None,
        [
            delta(1, [{"op": "add", "fact": pin("request") | {"id": f"pin:{'u1' * 8}"}}]),
            delta(2, [{"op": "add", "fact": f} for f in (edit, migration, done)]),
        ],
    )
    red = apply_delta(
        state,
        delta(3, [{"op": "close", "id": f"pin:{'u1' * 8}", "evidence": [R_OK, R_OK2], "seq": 5}]),
    )
    facts = red.state["facts"]
    assert red.results[0].reason == f"ends done:{'u1' * 8}, tool:{R_OK[:16]} (carried it out)"
    for fid in (edit["id"], done["id"]):
        assert facts[fid]["lifecycle"] == "closed" and facts[fid]["priority"] == "P3"
        assert facts[fid]["ended_by"] == {
            "fold": 3,
            "evidence": [R_OK, R_OK2],
            "by": f"pin:{'u1' * 8}",
            "seq": 5,
        }
    # a migration is a lasting change outside the conversation: P1 until superseded
    assert facts[migration["id"]]["lifecycle"] == "active"
    assert facts[migration["id"]]["priority"] == "P1"
    # the fold service loads exactly these (a fold reads a few rows whatever the ledger)
    ids, _ = reducer.delta_reads(
        red_delta := delta(3, [{"op": "close", "id": f"pin:{'u1' * 8}", "evidence": [R_OK]}])
    )
    assert {edit["id"], done["id"]} <= ids and red_delta
