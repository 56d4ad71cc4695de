"""The incremental state hash and partial application of a delta. Pure."""

import copy

from ledger_app import reducer

E1, E2, E3 = "a1" * 32, "b2" * 32, "c3" * 32
EVIDENCE = {
    E1: {"seq": 1, "kind": "message", "role": "user", "fold": 1},
    E2: {"seq": 2, "kind": "tool_result", "role": "tool", "fold": 1},
    E3: {"seq": 3, "kind": "message", "role": "user", "fold": 2},
}


def _fact(text, entry=E2, category="open_obligation", **extra):
    return {
        "category": category,
        "priority": "P1",
        "confidence": "reported",
        "text": text,
        "support": [{"entry": entry}],
        **extra,
    }


def _deltas():
    pin = {
        "id": f"pin:{E1[:16]}",
        "category": "constraint",
        "priority": "P0",
        "confidence": "verified",
        "text": "Ask first.",
        "support": [{"entry": E1}],
        "pin": True,
        "author": "code",
    }
    return [
        {
            "fold": 1,
            "evidence": EVIDENCE,
            "required_pins": [{"entry": E1, "text": "Ask first."}],
            "ops": [
                {"op": "add", "fact": pin},
                {"op": "add", "fact": _fact("Deploy the fix.", id="ob1")},
                {"op": "add", "fact": _fact("Old note.", id="n1", category="decision")},
            ],
        },
        {
            "fold": 2,
            "evidence": EVIDENCE,
            "ops": [
                {"op": "close", "id": "ob1", "evidence": [E2]},
                {"op": "supersede", "id": "n1", "fact": _fact("New note.", category="decision")},
                {"op": "evict", "id": "n1"},
            ],
        },
    ]


def test_the_incremental_hash_equals_the_hash_of_the_whole_state():
    state, acc = copy.deepcopy(reducer.EMPTY_STATE), reducer.ACC_EMPTY
    for delta in _deltas():
        ids, pins = reducer.delta_reads(delta)
        before = {k: v for k, v in state["facts"].items() if k in ids}
        reduction = reducer.apply_delta({"folds": state["folds"], "facts": before}, delta)
        removed, added = reducer.fact_changes(before, reduction.state["facts"])
        acc = reducer.acc_update(acc, removed, added)
        state = reducer.apply_delta(state, delta).state
        assert reducer.hash_of(acc, reduction.state) == reducer.state_hash(state)
    # fold 2 changed ob1 (closed), added f2.1 and evicted the superseded n1
    assert state["facts"]["ob1"]["lifecycle"] == "closed" and "n1" not in state["facts"]


def test_the_hash_depends_on_every_fact_and_on_nothing_but_the_state():
    state = reducer.reduce(None, _deltas())
    same = reducer.reduce(copy.deepcopy(reducer.reduce(None, _deltas()[:1])), _deltas()[1:])
    assert reducer.state_hash(same) == reducer.state_hash(state)
    changed = copy.deepcopy(state)
    changed["facts"]["ob1"]["text"] += " "
    assert reducer.state_hash(changed) != reducer.state_hash(state)
    renamed = copy.deepcopy(state)
    renamed["facts"]["ob2"] = renamed["facts"].pop("ob1")
    assert reducer.state_hash(renamed) != reducer.state_hash(state)
    counter = {**state, "folds": 3}
    assert reducer.state_hash(counter) != reducer.state_hash(state)


def test_removing_a_fact_undoes_adding_it():
    fact = _fact("x", id="x")
    acc = reducer.acc_update(reducer.ACC_EMPTY, [], [("x", fact)])
    assert acc != reducer.ACC_EMPTY
    assert reducer.acc_update(acc, [("x", fact)], []) == reducer.ACC_EMPTY
    assert reducer.acc_parse(reducer.acc_hex(acc)) == acc and len(reducer.acc_hex(acc)) == 768


def test_partial_application_gives_the_same_verdicts_as_the_whole_state():
    deltas = _deltas()
    full = reducer.reduce(None, deltas[:1])
    ids, _ = reducer.delta_reads(deltas[1])
    assert {"ob1", "n1", "f2.1"} <= ids
    part = {"folds": 1, "facts": {k: v for k, v in full["facts"].items() if k in ids}}
    a = reducer.apply_delta(full, deltas[1])
    b = reducer.apply_delta(part, deltas[1])
    assert [r.__dict__ for r in a.results] == [r.__dict__ for r in b.results]
    for k in ids:
        assert a.state["facts"].get(k) == b.state["facts"].get(k)


def test_required_pins_are_read_by_id_and_by_entry():
    ids, entries = reducer.delta_reads(_deltas()[0])
    assert f"pin:{E1[:16]}" in ids and entries == {E1}


def test_a_checkpoint_is_due_by_count_or_by_delta_size():
    due = reducer.checkpoint_due
    assert due(folds_since=10, delta_bytes_since=1, state_bytes_at_last=10**6, every=10, ratio=2)
    assert not due(folds_since=3, delta_bytes_since=10, state_bytes_at_last=100, every=10, ratio=2)
    assert due(folds_since=3, delta_bytes_since=200, state_bytes_at_last=100, every=10, ratio=2)
