"""Ledger diff between two states (pure)."""

from ledger_app.fact_changes import state_diff


def _fact(fid, priority="P1", **kw):
    return {"id": fid, "category": "decision", "priority": priority, "text": fid, **kw}


def test_it_sorts_added_removed_and_changed_facts_by_priority():
    a = {"facts": {"x": _fact("x"), "gone": _fact("gone", "P3"), "same": _fact("same")}}
    b = {
        "facts": {
            "x": _fact("x", lifecycle="closed", closed_by=["h"]),
            "same": _fact("same", lifecycle="active"),
            "new": _fact("new", "P0"),
        }
    }
    d = state_diff(a, b)
    assert [(c.status, c.fact_id) for c in d.changes] == [
        ("added", "new"),
        ("changed", "x"),
        ("removed", "gone"),
    ]
    assert d.counts == {"added": 1, "removed": 1, "changed": 1}
    assert d.unchanged == 1  # an explicit "active" lifecycle is the default, not a change
    x = d.changes[1]
    assert [(f.name, f.before, f.after) for f in x.changes] == [
        ("closed_by", None, ["h"]),
        ("lifecycle", "active", "closed"),
    ]
    assert x.before["id"] == "x" and x.fact["lifecycle"] == "closed"


def test_identical_states_have_no_changes():
    s = {"facts": {"a": _fact("a")}}
    d = state_diff(s, s)
    assert d.changes == [] and d.unchanged == 1
