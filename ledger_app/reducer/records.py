"""The reducer's vocabulary: the ops, the empty state, its errors and its verdicts.

Pure module: no Django, no database (the package docstring, :mod:`ledger_app.reducer`, says
what a delta holds and the rules it is judged by).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Version of the lifecycle rules (docs/design.md 5.5) a fold's delta is written against
#: (``delta["lifecycle_rules"]``); a delta without it replays under the rules before them.
LIFECYCLE_RULES = 1

OPS = ("add", "supersede", "retire", "close", "cancel", "review", "evict", "withdraw")
EMPTY_STATE: dict[str, Any] = {"facts": {}, "folds": 0}


class PinViolation(Exception):
    """A state in which a required pin is missing or differs from the journal text.

    The fold that produced it is refused (docs/design.md section 5.2).
    """

    def __init__(self, entry: str, reason: str) -> None:
        self.entry = entry
        self.reason = reason
        super().__init__(f"pin for entry sha256:{entry}: {reason}")


class DeltaInvalid(ValueError):
    """Bad input, not a rule breach: the whole delta is refused and nothing of it is stored.

    Raised for a malformed op (not an object, unknown ``op``, a fact without its fields), a
    reference to an unknown fact, and a support or evidence hash that is not a raw entry of
    the scope at or before the fold's revision. Rule breaches (authority, confidence,
    closing without evidence) are *rejected ops* kept in the delta instead.

    Attributes: ``index`` (the op's position, or -1 for the delta), ``op``, ``field``.
    """

    def __init__(self, reason: str, *, index: int = -1, op: str = "", field: str = "") -> None:
        self.index, self.op, self.field, self.reason = index, op, field, reason
        where = f"op {index} ({op!r})" if index >= 0 else "delta"
        super().__init__(f"{where}" + (f", field {field!r}" if field else "") + f": {reason}")


@dataclass
class OpResult:
    """The reducer's verdict on one op: ``status`` accepted/rejected/pending and why."""

    index: int
    op: str
    status: str
    reason: str = ""
    fact_id: str = ""


@dataclass
class Reduction:
    """Output of :func:`apply_delta`: the new state and one :class:`OpResult` per op."""

    state: dict[str, Any]
    results: list[OpResult] = field(default_factory=list)

    @property
    def rejected(self) -> list[OpResult]:
        return [r for r in self.results if r.status == "rejected"]
