"""Fact vocabulary of the ledger (docs/design.md section 5.1). Pure.

A fact is a plain dict so that states and deltas serialise to canonical JSON unchanged::

    {"id": "pin:1a2b...", "category": "constraint", "priority": "P0",
     "lifecycle": "active", "confidence": "verified", "text": "...",
     "support": [{"entry": "<hex>", "quote": "...optional..."}],
     "pin": true, "author": "code", "origin_fold": 1}
"""

from __future__ import annotations

from typing import Any

CATEGORIES = (
    "objective",
    "constraint",
    "decision",
    "verified_state",
    "open_obligation",
    "blocker",
    "artifact",
    "history",
)
PRIORITIES = ("P0", "P1", "P2", "P3")
LIFECYCLES = ("active", "superseded", "retired", "closed", "cancelled")
CONFIDENCES = ("verified", "reported", "inferred", "uncertain")
AUTHORS = ("code", "offline", "writer", "recovery")

#: Roles whose messages are authoritative (pins; P0 retirement evidence): docs/design.md 5.2.
AUTHORITATIVE_ROLES = ("system", "developer", "user")

Fact = dict[str, Any]


def support_hashes(fact: Fact) -> list[str]:
    """The entry hashes (hex) a fact cites, in order."""
    return [s["entry"] for s in fact.get("support", [])]


_PRIORITY_RANK = {p: i for i, p in enumerate(PRIORITIES)}


def priority_rank(priority: str) -> int:
    """0 for P0 ... 3 for P3, 4 for anything else (for sorting; a dict lookup: the diff
    ranks every changed fact)."""
    return _PRIORITY_RANK.get(priority, len(PRIORITIES))
