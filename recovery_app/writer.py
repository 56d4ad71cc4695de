"""Recovered facts enter the ledger through an ordinary fold (docs/design.md section 7). Pure.

:func:`recovered_fact` builds the ``add`` op's fact for one accepted analyst claim, citing
the raw entries with their exact quotes. The one fold service
(:func:`ledger_app.services.ledger_fold`) adds those ops to the fold after its writer's, and
the reducer judges them like every other op: recovered evidence earns no shortcut.
"""

from __future__ import annotations

from typing import Any


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
