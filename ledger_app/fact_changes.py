"""The difference between two ledger states (docs/design.md section 8: "a diff between any two folds").

Pure module. The operator UI reads a diff from the stored fact versions
(:func:`ledger_app.selectors.diff.fold_diff`, SQL, one page at a time) and shapes each changed
fact with :func:`field_changes`; :func:`state_diff` compares two whole parsed states (tests,
tools). Facts are matched by id: a fact only in the later state is *added*, only in the
earlier one *removed* (evicted by a consolidation), in both with different fields *changed*
(with the fields that changed, before and after). Order: by priority, then id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ledger_app.facts import Fact, priority_rank


@dataclass
class FieldChange:
    """One field of a changed fact: its value before and after (``None``: absent)."""

    name: str
    before: Any
    after: Any


@dataclass
class FactChange:
    """A fact in the diff: ``status`` is ``added``, ``removed`` or ``changed``.

    ``fact`` is the later version (the earlier one for ``removed``); ``changes`` lists the
    changed fields of a ``changed`` fact.
    """

    status: str
    fact_id: str
    fact: Fact
    before: Fact | None = None
    changes: list[FieldChange] = field(default_factory=list)


@dataclass
class StateDiff:
    """All changes from state ``a`` to state ``b`` and the counts per status."""

    changes: list[FactChange]
    unchanged: int

    def count(self, status: str) -> int:
        return sum(1 for c in self.changes if c.status == status)

    @property
    def counts(self) -> dict[str, int]:
        return {s: self.count(s) for s in ("added", "removed", "changed")}


def _order(change: FactChange) -> tuple[int, int, str]:
    status = {"added": 0, "changed": 1, "removed": 2}[change.status]
    return (priority_rank(str(change.fact.get("priority", ""))), status, change.fact_id)


def field_changes(before: Fact, after: Fact) -> list[FieldChange]:
    """The fields that differ between two versions of one fact, by name.

    ``lifecycle`` absent counts as ``active`` (the reducer's default), so a fact that only
    gained an explicit ``"lifecycle": "active"`` has no change.
    """
    norm_a = {"lifecycle": "active", **before}
    norm_b = {"lifecycle": "active", **after}
    return [
        FieldChange(name, norm_a.get(name), norm_b.get(name))
        for name in sorted(norm_a.keys() | norm_b.keys())
        if norm_a.get(name) != norm_b.get(name)
    ]


def birth_fold(births: list[int], since: int) -> int | None:
    """The fold a fact version was born in: the latest birth (``LedgerFact`` row with
    ``change="born"``) at or before the version's ``since``; the earliest birth when none
    precedes it (a history written before births were recorded); ``None`` without any."""
    earlier = [n for n in births if n <= since]
    if earlier:
        return max(earlier)
    return min(births) if births else None


def state_diff(a: dict[str, Any], b: dict[str, Any]) -> StateDiff:
    """Compare two ledger states (``{"facts": {id: fact}}``), ``a`` earlier, ``b`` later.

    ``lifecycle`` absent counts as ``active`` (the reducer's default), so a fact that only
    gained an explicit ``"lifecycle": "active"`` is unchanged.

    Returns:
        :class:`StateDiff`, changes ordered by priority, then added/changed/removed, then id.
    """
    fa: dict[str, Fact] = a.get("facts", {})
    fb: dict[str, Fact] = b.get("facts", {})
    changes: list[FactChange] = []
    unchanged = 0
    for fact_id in fa.keys() | fb.keys():
        before, after = fa.get(fact_id), fb.get(fact_id)
        if before is None and after is not None:
            changes.append(FactChange("added", fact_id, after))
        elif after is None and before is not None:
            changes.append(FactChange("removed", fact_id, before))
        elif before is not None and after is not None:
            fields = field_changes(before, after)
            if fields:
                changes.append(FactChange("changed", fact_id, after, before, fields))
            else:
                unchanged += 1
    changes.sort(key=_order)
    return StateDiff(changes, unchanged)
