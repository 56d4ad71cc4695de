"""``verify_ledger``: replay every delta and compare with what is stored (DESIGN.md 5.2)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from journal_app.models import Journal
from ledger_app import reducer
from ledger_app.model_writer import FALLBACK_NOTE as FALLBACK_NOTE  # re-exported: views
from ledger_app.models import Fold
from ledger_app.services.common import _verdicts


def fold_deltas(journal: Journal) -> list[dict[str, Any]]:
    """Every stored delta of ``journal`` in fold order, verdicts removed (the reducer recomputes them)."""
    out = []
    for raw in (
        Fold.objects.filter(journal=journal).order_by("number").values_list("delta", flat=True)
    ):
        d = json.loads(raw)
        d.pop("verdicts", None)
        out.append(d)
    return out


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Id of the first fact (in id order) that differs between two states, ``"(folds)"`` for the counter."""
    fa, fb = a.get("facts", {}), b.get("facts", {})
    for fact_id in sorted(fa.keys() | fb.keys()):
        if fa.get(fact_id) != fb.get(fact_id):
            return fact_id
    return None if a == b else "(state fields)"


@dataclass
class LedgerVerifyReport:
    """Result of :func:`ledger_verify`. ``mismatch`` names the fold and first differing fact."""

    folds: int = 0
    mismatch: dict[str, Any] | None = None
    checks: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.mismatch is None


def ledger_verify(*, journal: Journal) -> LedgerVerifyReport:
    """Replay every delta from scratch and compare with what is stored (DESIGN.md 5.2).

    Two comparisons per fold N: ``reduce(None, deltas[:N])`` against fold N's stored state
    (replay from scratch), and ``apply(stored state N-1, delta N)`` against it (checkpoint
    plus later deltas); also each stored ``state_hash`` against its state and each op verdict.

    Returns:
        :class:`LedgerVerifyReport` with the first mismatch (fold, fact id, which comparison).
    """
    report = LedgerVerifyReport()
    replay: dict[str, Any] = dict(reducer.EMPTY_STATE)
    stored_prev: dict[str, Any] = dict(reducer.EMPTY_STATE)
    for fold in Fold.objects.filter(journal=journal).order_by("number"):
        report.folds += 1
        delta = json.loads(fold.delta)
        verdicts = delta.pop("verdicts", [])
        stored = json.loads(fold.state)
        try:
            replayed = reducer.apply_delta(replay, delta)
            from_checkpoint = reducer.apply_delta(stored_prev, delta).state
        except (reducer.PinViolation, reducer.DeltaInvalid) as exc:
            report.mismatch = {
                "fold": fold.number,
                "fact": None,
                "check": "replay",
                "detail": str(exc),
            }
            return report
        replay = replayed.state
        for name, candidate in (
            ("replay from scratch", replay),
            ("checkpoint plus delta", from_checkpoint),
        ):
            if reducer.state_bytes(candidate) != fold.state.encode("utf-8"):
                report.mismatch = {
                    "fold": fold.number,
                    "fact": first_difference(stored, candidate),
                    "check": name,
                    "detail": f"stored state differs from {name}",
                }
                return report
        if reducer.state_hash(stored) != fold.state_hash:
            report.mismatch = {
                "fold": fold.number,
                "fact": None,
                "check": "state_hash",
                "detail": "state_hash does not match the stored state",
            }
            return report
        if _verdicts(replayed) != verdicts:
            report.mismatch = {
                "fold": fold.number,
                "fact": None,
                "check": "verdicts",
                "detail": "stored op verdicts differ from the reducer's",
            }
            return report
        stored_prev = stored
    report.checks = ["replay from scratch", "checkpoint plus delta", "state_hash", "verdicts"]
    return report
