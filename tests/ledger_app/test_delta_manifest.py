"""The fold's typed records (docs/architecture.md, "The path of a fold"): one builder each."""

import pytest

from ledger_app.delta_manifest import covered_make, delta_make, manifest_make
from ledger_app.reducer import LIFECYCLE_RULES, apply_delta

COMMON = {"outcome", "previous_fold", "revision", "writer", "verifier", "instructions", "tokens"}


def test_every_delta_carries_the_lifecycle_rules_in_force_and_its_kinds_keys():
    delta = delta_make(fold=3, revision=40, ops=[], refold_of=2)
    assert delta == {
        "fold": 3,
        "revision": 40,
        "evidence": {},
        "ops": [],
        "refold_of": 2,
        "lifecycle_rules": LIFECYCLE_RULES,
    }
    with pytest.raises(TypeError, match="unknown delta key.*ops_extra"):
        delta_make(fold=1, revision=1, ops=[], ops_extra=1)


def test_a_made_delta_is_judged_by_the_reducer():
    fact = {
        "id": "f1",
        "category": "verified_state",
        "priority": "P2",
        "lifecycle": "active",
        "confidence": "verified",
        "text": "the tests pass",
        "support": [{"entry": "ab" * 32}],
        "author": "code",
    }
    evidence = {
        "ab" * 32: {"seq": 3, "kind": "tool_result", "role": "tool", "is_error": False,
                    "derived": False, "fold": 1},
    }  # fmt: skip
    delta = delta_make(fold=1, revision=5, ops=[{"op": "add", "fact": fact}], evidence=evidence)
    reduction = apply_delta({"facts": {}, "folds": 0}, delta)
    assert [r.status for r in reduction.results] == ["accepted"]
    assert "f1" in reduction.state["facts"]


def test_a_range_fold_has_the_range_sections_and_others_only_the_common_keys():
    common = {
        "outcome": "accepted",
        "previous_fold": 1,
        "revision": 9,
        "writer": "offline",
        "verifier": "reducer-rules",
        "instructions": {"checked": 0},
        "tokens": {"ledger_active": 10},
    }
    ranged = manifest_make(
        covered=covered_make(2, 4, ["a" * 64, "b" * 64, "c" * 64]),
        range_hash="r" * 64,
        interrupted_calls=["call_1"],
        loss={"kept": 1},
        **common,
    )
    assert set(ranged) == COMMON | {"covered", "range_hash", "interrupted_calls", "loss"}
    assert ranged["covered"] == {
        "seq_start": 2,
        "seq_end": 4,
        "entries": 3,
        "entry_hashes": ["a" * 64, "b" * 64, "c" * 64],
    }
    review = manifest_make(review={"request": 7}, **common)
    assert set(review) == COMMON | {"review"}
    with pytest.raises(TypeError, match="loss report"):
        manifest_make(covered=covered_make(1, 1, ["a" * 64]), **common)
    with pytest.raises(TypeError, match="unknown manifest key.*lost"):
        manifest_make(lost=True, **common)
