"""Ledger fidelity in ``make bench``: the ``eval_ledger`` table for the offline writer.

Runs :func:`ledger_app.eval_service.eval_ledger` (every case of ``tests/fixtures/cases`` and
scenario of ``tests/scenarios``, folded by the offline writer, the context built at each
item's small budget, scored by :mod:`ledger_app.evaluation`), prints its table and returns
one summary row per rule: on how many of the items that check it the rule holds. The hard
rules' goal is every item.
"""

from __future__ import annotations

from typing import Any

from ledger_app.eval_service import eval_ledger
from ledger_app.evaluation import RULES


def run() -> dict[str, Any]:
    """Score the offline writer; ``{"report", "summary"}``."""
    report = eval_ledger(writer="offline")
    for line in report.lines():
        print(line)
    data = report.to_dict()
    summary = []
    for rule, t in data["totals"].items():
        hard = RULES[rule][0]
        summary.append(
            {
                "metric": f"{rule}{' (hard)' if hard else ''}: items holding it",
                "what": "eval_ledger --writer offline over every case and scenario: items "
                "whose folded ledger holds the rule | no baseline",
                "value": f"{t['held']}/{t['items']}",
                "target": "all" if hard else None,
                **({"met": t["held"] == t["items"]} if hard else {}),
            }
        )
    return {"report": data, "summary": summary, "seconds": report.seconds}
