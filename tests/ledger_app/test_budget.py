"""Consolidation plans (docs/design.md section 5.4). Pure: no database."""

import random

import pytest

from journal_app.tokens import count_tokens
from ledger_app.budget import fact_tokens, ledger_tokens, plan_consolidation, render_fact
from ledger_app.reducer import apply_delta


def cheap(text):
    return len(text) // 4


def fact(fid, priority, *, fold=1, lifecycle="active", confidence="verified", size=400, **extra):
    f = {
        "id": fid,
        "category": "objective" if priority == "P0" else "verified_state",
        "priority": priority,
        "lifecycle": lifecycle,
        "confidence": confidence,
        "text": "x" * size,
        "support": [{"entry": f"{fold:02d}" * 32}],
        "author": "code",
        "origin_fold": fold,
    }
    f.update(extra)
    return f


def state_of(*facts, folds=3):
    return {"facts": {f["id"]: f for f in facts}, "folds": folds}


def evict_ids(plan):
    return [op["id"] for op in plan.ops]


def apply(state, plan):
    return apply_delta(state, {"fold": state["folds"] + 1, "evidence": {}, "ops": plan.ops})


def test_it_renders_a_fact_on_one_record_with_short_support_hashes():
    f = fact("f1", "P2", text="pytest passed", support=[{"entry": "ab" * 32}, {"entry": "cd" * 32}])
    assert render_fact(f) == (
        "[f1] P2 verified_state active verified: pytest passed "
        "(support: sha256:abababababab, sha256:cdcdcdcdcdcd)"
    )
    assert fact_tokens(f, cheap) == len(render_fact(f)) // 4
    assert ledger_tokens(state_of(f, fact("f2", "P3")), cheap) == (
        fact_tokens(f, cheap) + fact_tokens(fact("f2", "P3"), cheap)
    )


def test_it_keeps_a_280000_character_pin_and_reports_target_unreachable():
    # docs/design.md 5.4: "Test: one user message of 280,000 characters", counted for real.
    rng = random.Random(5)
    words = [f"{rng.choice('abcdefghij')}{rng.randrange(10**6)}" for _ in range(60_000)]
    message = " ".join(words)[:280_000]
    assert len(message) == 280_000
    pin = fact("pin:user", "P0", size=0, text=message, pin=True)
    state = state_of(
        pin,
        fact("p1", "P1", fold=1),
        fact("p2-old", "P2", fold=1),
        fact("p3-done", "P3", fold=2, lifecycle="closed"),
        fact("p3", "P3", fold=2),
    )
    # the design's figures, as settings holds them
    plan = plan_consolidation(state, target_tokens=20_000, start_tokens=67_500, count=count_tokens)

    assert fact_tokens(pin, count_tokens) > 67_500
    assert plan.needed
    assert plan.outcome == "target_unreachable"
    assert "pin:user" not in evict_ids(plan) and "p1" not in evict_ids(plan)
    assert evict_ids(plan) == ["p3-done", "p3", "p2-old"]
    figures = plan.figures()
    assert figures["outcome"] == "target_unreachable"
    assert figures["target_tokens"] == 20_000
    assert figures["before_tokens"] == ledger_tokens(state)
    assert figures["after_tokens"] == fact_tokens(pin) + fact_tokens(fact("p1", "P1"))
    assert figures["kept_p0_p1_tokens"] == figures["after_tokens"] > figures["target_tokens"]
    after = apply(state, plan)
    assert after.rejected == []
    assert set(after.state["facts"]) == {"pin:user", "p1"}
    assert after.state["facts"]["pin:user"]["text"] == message


def test_it_evicts_p3_then_p2_oldest_first_and_stops_at_the_target():
    facts = [
        fact("pin", "P0", size=4000),
        fact("work", "P1", size=2000),
        fact("p2-c", "P2", fold=3, size=4000),
        fact("p2-a", "P2", fold=1, size=4000),
        fact("p2-b", "P2", fold=2, size=4000),
        fact("p3-b", "P3", fold=2, size=4000),
        fact("p3-a2", "P3", fold=1, size=4000),
        fact("p3-a1", "P3", fold=1, size=4000),
    ]
    state = state_of(*facts)
    before = ledger_tokens(state, cheap)
    plan = plan_consolidation(state, target_tokens=3_300, start_tokens=7_000, count=cheap)

    assert plan.needed and before >= 7_000
    assert plan.outcome == "accepted"
    assert evict_ids(plan) == ["p3-a1", "p3-a2", "p3-b", "p2-a", "p2-b"]
    assert plan.evicted == evict_ids(plan)
    assert all(op["op"] == "evict" and op["reason"] for op in plan.ops)
    after = apply(state, plan)
    assert after.rejected == []
    assert set(after.state["facts"]) == {"pin", "work", "p2-c"}  # stopped early
    assert plan.after_tokens == ledger_tokens(after.state, cheap) <= 3_300
    assert plan.before_tokens == before


def test_it_evicts_facts_no_longer_active_first():
    state = state_of(
        fact("pin", "P0"),
        fact("p3-active", "P3", fold=1),
        fact("p2-superseded", "P2", fold=2, lifecycle="superseded"),
        fact("p3-retired", "P3", fold=3, lifecycle="retired"),
        fact("p2-closed", "P2", fold=1, lifecycle="closed", category="open_obligation"),
        fact("p1-closed", "P1", fold=1, lifecycle="closed", category="open_obligation"),
        fact("p2-active", "P2", fold=1),
    )
    total = ledger_tokens(state, cheap)
    one = fact_tokens(fact("p3-active", "P3"), cheap)
    plan = plan_consolidation(state, target_tokens=total - 3 * one, start_tokens=0, count=cheap)

    assert evict_ids(plan) == ["p2-closed", "p2-superseded", "p3-retired"]
    assert plan.outcome == "accepted"


def test_it_never_evicts_p0_or_p1_even_inactive_or_uncertain():
    state = state_of(
        fact("pin", "P0", size=40_000),
        fact("guess", "P1", confidence="uncertain", size=8_000),
        fact("old-rule", "P0", lifecycle="retired", size=8_000),
        fact("done", "P1", lifecycle="closed", category="open_obligation", size=8_000),
        fact("note", "P2"),
    )
    plan = plan_consolidation(state, target_tokens=100, start_tokens=100, count=cheap)

    assert plan.outcome == "target_unreachable"
    assert evict_ids(plan) == ["note"]
    assert plan.after_tokens == plan.kept_p0_p1_tokens


def test_it_does_nothing_below_the_start():
    state = state_of(fact("pin", "P0"), fact("p3", "P3"))
    plan = plan_consolidation(state, target_tokens=20_000, start_tokens=67_500, count=cheap)

    assert not plan.needed
    assert plan.outcome == "not_needed"
    assert plan.ops == [] and plan.evicted == []
    assert plan.before_tokens == plan.after_tokens == ledger_tokens(state, cheap)
    assert plan.figures()["evicted_count"] == 0


def test_it_plans_the_same_ops_for_the_same_state_in_any_order():
    facts = [fact(f"f{i}", ("P2", "P3")[i % 2], fold=i % 4) for i in range(40)]
    facts += [fact(f"c{i}", "P3", fold=i % 3, lifecycle="closed") for i in range(10)]
    facts.append(fact("pin", "P0", size=2_000))
    shuffled = facts[:]
    random.Random(1).shuffle(shuffled)

    kwargs = {"target_tokens": 2_000, "start_tokens": 1_000, "count": cheap}
    a = plan_consolidation(state_of(*facts), **kwargs)
    b = plan_consolidation(state_of(*shuffled), **kwargs)
    c = plan_consolidation(state_of(*facts), **kwargs)

    assert a.ops == b.ops == c.ops
    assert a.figures() == b.figures()
    closed_oldest_first = [f"c{i}" for i in sorted(range(10), key=lambda i: (i % 3, f"c{i}"))]
    assert evict_ids(a)[:10] == closed_oldest_first


def test_the_figures_production_reads_are_those_of_the_design(settings):
    # the only copy of the figures is settings: plan_consolidation has no defaults of its own
    assert (
        settings.LEDGER_WINDOW_TOKENS,
        settings.LEDGER_CONSOLIDATE_AT_TOKENS,
        settings.LEDGER_CHECKPOINT_TARGET_TOKENS,
    ) == (270_000, 67_500, 20_000)
    assert settings.LEDGER_CONSOLIDATE_AT_TOKENS * 4 == settings.LEDGER_WINDOW_TOKENS
    with pytest.raises(TypeError, match="target_tokens"):
        plan_consolidation({"facts": {}, "folds": 0})  # type: ignore[call-arg]


def test_mandatory_state_is_governing_text_the_latest_requests_and_active_p1():
    from ledger_app.budget import mandatory_state
    from ledger_app.pins import open_requests_split, request_line

    def pin(n: int, kind: str, lifecycle: str = "active") -> dict:
        text = f"request number {n}\n" + "details " * 200
        return {
            "id": f"pin:{n}",
            "category": "objective",
            "priority": "P0",
            "lifecycle": lifecycle,
            "confidence": "verified",
            "text": text,
            "support": [{"entry": f"{n:064x}"}],
            "pin": True,
            "pin_kind": kind,
            "seq": n,
        }

    facts = {f"pin:{n}": pin(n, "request") for n in range(1, 21)}
    facts["pin:99"] = pin(99, "request", "closed")
    facts["pin:0"] = pin(0, "governing")
    facts["p1"] = {"id": "p1", "priority": "P1", "text": "migrated", "support": []}
    facts["p2"] = {"id": "p2", "priority": "P2", "text": "read a file", "support": []}
    verbatim, listed, counted = open_requests_split(list(facts.values()))
    assert [p["seq"] for p in verbatim] == [20, 19, 18]
    assert [p["seq"] for p in listed] == list(range(17, 7, -1))
    assert [p["seq"] for p in counted] == list(range(7, 0, -1))
    assert request_line(listed[0]) == f"seq 17: request number 17 (sha256:{f'{17:064x}'[:12]})"
    m = mandatory_state({"facts": facts}, count=lambda t: len(t.split()))
    words = lambda f: len(render_fact(f).split())  # noqa: E731
    assert m.governing_tokens == words(facts["pin:0"])
    assert m.p1_tokens == words(facts["p1"])
    assert m.request_tokens == (
        sum(words(p) for p in verbatim)
        + sum(len(request_line(p).split()) for p in listed)
        + len("+7 older open requests".split())
    )
    # twice the open requests: the same figure (the oldest are a count)
    more = {**facts, **{f"pin:{n}": pin(n, "request") for n in range(-20, 0)}}
    assert mandatory_state({"facts": more}, count=lambda t: len(t.split())).total == m.total
