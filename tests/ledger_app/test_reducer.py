import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_app import reducer
from ledger_app.reducer import DeltaInvalid, PinViolation, apply_delta, reduce, state_hash

U1, A1, T_OK, T_FAIL, U2, A2 = ("u1" * 32, "a1" * 32, "t0" * 32, "tf" * 32, "u2" * 32, "a2" * 32)


def ev(fold1=1, fold2=2):
    return {
        U1: {
            "seq": 1,
            "kind": "message",
            "role": "user",
            "is_error": False,
            "derived": False,
            "fold": fold1,
        },
        A1: {
            "seq": 2,
            "kind": "message",
            "role": "assistant",
            "is_error": False,
            "derived": False,
            "fold": fold1,
        },
        T_OK: {
            "seq": 3,
            "kind": "tool_result",
            "role": "tool",
            "is_error": False,
            "derived": False,
            "fold": fold1,
        },
        T_FAIL: {
            "seq": 4,
            "kind": "tool_result",
            "role": "tool",
            "is_error": True,
            "derived": False,
            "fold": fold1,
        },
        U2: {
            "seq": 5,
            "kind": "message",
            "role": "user",
            "is_error": False,
            "derived": False,
            "fold": fold2,
        },
        A2: {
            "seq": 6,
            "kind": "message",
            "role": "assistant",
            "is_error": False,
            "derived": False,
            "fold": fold2,
        },
    }


RULE = "Never modify the payments tables without asking."
PIN = {
    "id": "pin:u1",
    "category": "constraint",
    "priority": "P0",
    "confidence": "verified",
    "text": RULE,
    "support": [{"entry": U1}],
    "pin": True,
    "author": "code",
}
OBLIGATION = {
    "id": "ob1",
    "category": "open_obligation",
    "priority": "P1",
    "confidence": "reported",
    "text": "Run the full test suite.",
    "support": [{"entry": A1}],
    "author": "offline",
}


def first_state():
    delta = {
        "fold": 1,
        "evidence": ev(),
        "required_pins": [{"entry": U1, "text": RULE}],
        "ops": [{"op": "add", "fact": PIN}, {"op": "add", "fact": OBLIGATION}],
    }
    return apply_delta(reducer.EMPTY_STATE, delta).state


def later(ops, fold=2):
    return {"fold": fold, "evidence": ev(), "ops": ops}


def test_an_assistant_entry_retires_no_pin():
    r = apply_delta(first_state(), later([{"op": "retire", "id": "pin:u1", "evidence": [A2]}]))
    assert r.results[0].status == "rejected"
    assert "authoritative" in r.results[0].reason
    assert r.state["facts"]["pin:u1"]["lifecycle"] == "active"


def test_a_user_entry_from_the_same_fold_retires_no_pin():
    r = apply_delta(first_state(), later([{"op": "retire", "id": "pin:u1", "evidence": [U1]}]))
    assert r.results[0].status == "rejected"


def test_a_later_harness_record_retires_no_pin():
    """A harness record (a user-role message the harness wrote) is journaled with
    ``harness`` in the delta's evidence: it speaks for no one and authorises nothing."""
    delta = later([{"op": "retire", "id": "pin:u1", "evidence": [U2]}])
    delta["evidence"][U2] = {**delta["evidence"][U2], "harness": True}
    r = apply_delta(first_state(), delta)
    assert r.results[0].status == "rejected" and "authoritative" in r.results[0].reason
    assert "pending_retirement" not in r.state["facts"]["pin:u1"]


def test_a_later_user_entry_makes_a_retirement_pending_until_approved():
    r = apply_delta(first_state(), later([{"op": "retire", "id": "pin:u1", "evidence": [U2]}]))
    assert r.results[0].status == "pending"
    fact = r.state["facts"]["pin:u1"]
    assert fact["lifecycle"] == "active" and fact["pending_retirement"]["evidence"] == [U2]
    approved = apply_delta(
        r.state,
        later(
            [
                {
                    "op": "review",
                    "id": "pin:u1",
                    "decision": "approve",
                    "reviewer": "rita",
                    "comment": "ok",
                    "at": "t",
                }
            ],
            3,
        ),
    )
    assert approved.state["facts"]["pin:u1"]["lifecycle"] == "retired"
    assert approved.state["facts"]["pin:u1"]["reviews"][0]["reviewer"] == "rita"


def test_a_refused_retirement_keeps_the_pin_active():
    r = apply_delta(first_state(), later([{"op": "retire", "id": "pin:u1", "evidence": [U2]}]))
    refused = apply_delta(
        r.state,
        later([{"op": "review", "id": "pin:u1", "decision": "refuse", "reviewer": "rita"}], 3),
    )
    fact = refused.state["facts"]["pin:u1"]
    assert fact["lifecycle"] == "active" and "pending_retirement" not in fact
    assert fact["reviews"][0]["decision"] == "refuse"


def test_obligations_close_only_on_a_passing_tool_result():
    s = first_state()
    by_assistant = apply_delta(s, later([{"op": "close", "id": "ob1", "evidence": [A2]}]))
    assert by_assistant.results[0].status == "rejected"
    by_failure = apply_delta(s, later([{"op": "close", "id": "ob1", "evidence": [T_FAIL]}]))
    assert by_failure.results[0].status == "rejected"
    silent = apply_delta(s, later([]))
    assert silent.state["facts"]["ob1"]["lifecycle"] == "active"
    done = apply_delta(s, later([{"op": "close", "id": "ob1", "evidence": [T_OK]}]))
    assert done.results[0].status == "accepted"
    assert done.state["facts"]["ob1"]["lifecycle"] == "closed"


def test_retire_cannot_end_an_obligation():
    r = apply_delta(first_state(), later([{"op": "retire", "id": "ob1", "evidence": [U2]}]))
    assert r.results[0].status == "rejected"
    assert r.state["facts"]["ob1"]["lifecycle"] == "active"


def test_a_user_can_cancel_an_obligation():
    r = apply_delta(first_state(), later([{"op": "cancel", "id": "ob1", "evidence": [U2]}]))
    assert r.state["facts"]["ob1"]["lifecycle"] == "cancelled"
    r2 = apply_delta(first_state(), later([{"op": "cancel", "id": "ob1", "evidence": [A2]}]))
    assert r2.results[0].status == "rejected"


def test_assistant_statements_stay_reported_and_failures_support_no_success():
    claim = {
        "category": "verified_state",
        "priority": "P1",
        "confidence": "verified",
        "text": "Deployed.",
        "support": [{"entry": A2}],
    }
    r = apply_delta(first_state(), later([{"op": "add", "fact": claim}]))
    assert r.results[0].status == "rejected" and "reported" in r.results[0].reason
    on_failure = {**claim, "support": [{"entry": T_FAIL}]}
    r2 = apply_delta(first_state(), later([{"op": "add", "fact": on_failure}]))
    assert r2.results[0].status == "rejected" and "failed tool result" in r2.results[0].reason


def test_support_outside_the_evidence_refuses_the_whole_delta_naming_op_and_field():
    claim = {
        "category": "decision",
        "priority": "P2",
        "confidence": "reported",
        "text": "x",
        "support": [{"entry": "ff" * 32}],
    }
    ok = {"op": "add", "fact": {**claim, "support": [{"entry": A1}]}}
    with pytest.raises(DeltaInvalid) as exc:
        apply_delta(first_state(), later([ok, {"op": "add", "fact": claim}]))
    assert (exc.value.index, exc.value.op, exc.value.field) == (1, "add", "fact.support")
    assert "does not resolve" in str(exc.value)


def test_a_missing_or_altered_pin_refuses_the_fold():
    altered = {**PIN, "text": RULE[:-1] + "!"}
    with pytest.raises(PinViolation, match="differs"):
        apply_delta(
            reducer.EMPTY_STATE,
            {
                "fold": 1,
                "evidence": ev(),
                "required_pins": [{"entry": U1, "text": RULE}],
                "ops": [{"op": "add", "fact": altered}],
            },
        )
    with pytest.raises(PinViolation, match="missing"):
        apply_delta(
            reducer.EMPTY_STATE,
            {
                "fold": 1,
                "evidence": ev(),
                "required_pins": [{"entry": U1, "text": RULE}],
                "ops": [],
            },
        )


def test_a_model_cannot_write_a_pin():
    forged = {**PIN, "id": "pin:forged", "author": "writer"}
    r = apply_delta(first_state(), later([{"op": "add", "fact": forged}]))
    assert r.results[0].status == "rejected" and "deterministic code" in r.results[0].reason


def test_active_p0_and_p1_are_never_evicted():
    r = apply_delta(
        first_state(), later([{"op": "evict", "id": "pin:u1"}, {"op": "evict", "id": "ob1"}])
    )
    assert [x.status for x in r.results] == ["rejected", "rejected"]


@pytest.mark.parametrize(
    "op,field",
    [
        ({"op": "explode"}, "op"),
        ({"op": "close", "id": "nope", "evidence": []}, "id"),
        ({"op": "close", "id": "ob1", "evidence": "T_OK"}, "evidence"),
        ({"op": "close", "id": "ob1", "evidence": ["ee" * 32]}, "evidence"),
        (
            {
                "op": "add",
                "fact": {
                    "category": "mood",
                    "priority": "P2",
                    "confidence": "reported",
                    "text": "x",
                    "support": [{"entry": A1}],
                },
            },
            "fact",
        ),
        ({"op": "supersede", "id": "ghost", "fact": {**OBLIGATION, "id": "new"}}, "id"),
    ],
)
def test_malformed_ops_refuse_the_delta_and_leave_the_state_untouched(op, field):
    state = first_state()
    before = state_hash(state)
    with pytest.raises(DeltaInvalid) as exc:
        apply_delta(state, later([op]))
    assert exc.value.field == field and exc.value.index == 0
    assert state_hash(state) == before


# ---- properties ---------------------------------------------------------------------------

op_strategy = st.one_of(
    st.builds(
        lambda i, e: {"op": "retire", "id": i, "evidence": [e]},
        st.sampled_from(["pin:u1", "ob1"]),
        st.sampled_from([A2, U2]),
    ),
    st.builds(lambda e: {"op": "cancel", "id": "ob1", "evidence": [e]}, st.sampled_from([A2, U2])),
    st.builds(
        lambda i, e: {"op": "close", "id": i, "evidence": [e]},
        st.sampled_from(["pin:u1", "ob1"]),
        st.sampled_from([A1, T_OK, T_FAIL, U2]),
    ),
    st.builds(lambda i: {"op": "evict", "id": i}, st.sampled_from(["pin:u1", "ob1"])),
    st.builds(
        lambda t, c, e: {
            "op": "add",
            "fact": {
                "category": "decision",
                "priority": "P2",
                "confidence": c,
                "text": t,
                "support": [{"entry": e}],
            },
        },
        st.text(min_size=1, max_size=20),
        st.sampled_from(["verified", "reported", "inferred"]),
        st.sampled_from([A1, T_OK, U2]),
    ),
    st.builds(
        lambda: {"op": "supersede", "id": "pin:u1", "fact": {**PIN, "id": "p2", "text": "softer"}}
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(op_strategy, max_size=6), max_size=6))
def test_reduce_is_deterministic_keeps_pins_and_replays_from_a_checkpoint(batches):
    first = {
        "fold": 1,
        "evidence": ev(),
        "required_pins": [{"entry": U1, "text": RULE}],
        "ops": [{"op": "add", "fact": PIN}, {"op": "add", "fact": OBLIGATION}],
    }
    deltas = [first]
    for ops in batches:  # the service refuses an invalid delta whole; keep the valid ones
        candidate = {"fold": len(deltas) + 1, "evidence": ev(), "ops": ops}
        try:
            reduce(None, [*deltas, candidate])
        except DeltaInvalid:
            continue
        deltas.append(candidate)
    s1 = reduce(None, deltas)
    s2 = reduce(None, deltas)
    assert state_hash(s1) == state_hash(s2)
    pin = s1["facts"]["pin:u1"]
    assert pin["text"] == RULE and pin["lifecycle"] == "active"
    mid = len(deltas) // 2
    checkpoint = reduce(None, deltas[:mid])
    assert state_hash(reduce(checkpoint, deltas[mid:])) == state_hash(s1)


def test_a_replay_pauses_the_cycle_collector_and_restores_it(monkeypatch):
    import gc

    from ledger_app import reducer
    from ledger_app.reducer import apply

    seen = []
    real = apply._apply
    monkeypatch.setattr(apply, "_apply", lambda s, d: seen.append(gc.isenabled()) or real(s, d))
    assert gc.isenabled()
    reducer.reduce(None, [later([], fold=1), later([], fold=2)])
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:  # a caller that had it off keeps it off
        reducer.reduce(None, [later([], fold=1)])
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(reducer.DeltaInvalid):  # and an error restores it too
        reducer.reduce(None, [{"fold": 1, "ops": []}])
    assert gc.isenabled()
