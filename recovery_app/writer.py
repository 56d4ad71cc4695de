"""Recovered facts enter the ledger through an ordinary fold (DESIGN.md section 7). Pure.

:class:`RecoveryWriter` wraps the fold's writer: it proposes what that writer proposes, then
one ``add`` per recovered claim, citing the raw entries with their exact quotes. The ops go
through the same verifier as every other op (the reducer's rules, and the model verifier
where one is configured): recovered evidence earns no shortcut. :func:`recovered_fact`
builds those facts from analyst claims.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger_app.mechanical import EntryView
from ledger_app.writers import Writer


def recovered_fact(
    claim: dict[str, Any], *, revision: int, kinds: dict[str, tuple[str, bool]]
) -> dict[str, Any]:
    """The ledger fact for one accepted analyst claim.

    Args:
        claim: ``{"claim", "status", "citations": [{"entry", "quote", "range", ...}]}``.
        revision: the snapshot's revision (the claim is current *at* it).
        kinds: ``{entry hex: (kind, is_error)}`` of the cited entries.

    Returns:
        A fact: id ``recovered:<first cited hash[:16]>``, category ``history`` at ``P2``
        (a current failure: ``blocker`` at ``P1``), author ``recovery``; confidence
        ``verified`` when a successful tool result is cited, ``reported`` for a message,
        ``uncertain`` for an unresolved call, ``inferred`` for a past failure (a failed result
        supports only a blocker). Support items carry the quote and byte range.
    """
    cites = claim["citations"]
    infos = [kinds.get(c["entry"], ("", False)) for c in cites]
    ok_result = any(k == "tool_result" and not err for k, err in infos)
    failed = any(k == "tool_result" and err for k, err in infos) and not ok_result
    status = claim["status"]
    category, priority = "history", "P2"
    if status == "reported":
        confidence = "reported"
    elif status == "unresolved":
        confidence = "uncertain"
    elif ok_result:
        confidence = "verified"
    elif failed and status == "current":
        category, priority, confidence = "blocker", "P1", "verified"
    else:
        confidence = "inferred"
    return {
        "id": f"recovered:{cites[0]['entry'][:16]}",
        "category": category,
        "priority": priority,
        "lifecycle": "active",
        "confidence": confidence,
        "text": f"Recovered from the journal ({status} at revision {revision}): {claim['claim']}",
        "support": [
            {"entry": c["entry"], "quote": c["quote"], "range": list(c["range"])} for c in cites
        ],
        "author": "recovery",
        "recovery": {"status": status, "revision": revision, "query": claim.get("query", "")},
    }


class RecoveryWriter:
    """The base writer's ops, then the recovered ``add`` ops not already in the ledger.

    ``id`` and ``prompt_version`` are the base writer's (the fold's outcome and manifest
    describe the base writer); ``label`` says recovered facts rode along.
    """

    def __init__(self, base: Writer, ops: Sequence[dict[str, Any]], note: str = "") -> None:
        self.base = base
        self.ops = [dict(op) for op in ops]
        self.id = base.id
        self.prompt_version = base.prompt_version
        self.label = f"{base.label} + recovery" + (f" ({note})" if note else "")
        self.proposed: list[str] = []

    def propose(self, entries: Sequence[EntryView], state: dict[str, Any]) -> list[dict[str, Any]]:
        """Base ops plus recovered adds whose fact id is neither in ``state`` nor proposed."""
        ops = list(self.base.propose(entries, state))
        taken = set(state.get("facts", {})) | {
            op["fact"]["id"]
            for op in ops
            if isinstance(op.get("fact"), dict) and "id" in op["fact"]
        }
        self.proposed = []
        for op in self.ops:
            fact_id = op["fact"]["id"]
            if fact_id not in taken:
                taken.add(fact_id)
                ops.append(op)
                self.proposed.append(fact_id)
        return ops
