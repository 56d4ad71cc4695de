"""What a delta may read of the ledger state: the fact ids, pin entries and command keys.

Pure module: no Django, no database. A caller that loads only these facts (and the active
facts holding these keys) and applies the delta to them gets the same verdicts as over the
whole state (:func:`ledger_app.reducer.apply_delta`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def delta_reads(delta: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """What :func:`apply_delta` may read of the state: ``(fact ids, pin entry hashes)``.

    The ids every op names (targets, given fact ids, the ids an ``add`` without one would
    get) and the pin ids of the required pins; the entry hashes of the required pins, for
    the pins that cite them under another id. Applying the delta to a state holding only
    these facts (and every fact that is a pin citing one of these entries) gives the same
    verdicts and the same new versions of these facts as applying it to the whole state:
    the reducer reads no other fact. Malformed ops are skipped here (the reducer refuses
    them).
    """
    ids: set[str] = set()
    fold = delta.get("fold")
    for index, op in enumerate(delta.get("ops") or []):
        if not isinstance(op, dict):
            continue
        if "id" in op:
            ids.add(str(op["id"]))
        if "by" in op:
            ids.add(str(op["by"]))
        if op.get("op") == "close" and delta.get("lifecycle_rules"):
            ids |= carried_ids(str(op.get("id", "")), op.get("evidence"))
        fact = op.get("fact")
        if isinstance(fact, dict):
            ids.add(str(fact.get("id") or f"f{fold}.{index}"))
    entries = {str(p["entry"]) for p in delta.get("required_pins") or [] if isinstance(p, dict)}
    ids |= {f"pin:{e[:16]}" for e in entries}
    return ids, entries


def carried_ids(pin_id: str, evidence: Any) -> set[str]:
    """The ids of the facts a request's ``close`` ends with it: the outcome facts of its
    evidence (``tool:``/``test:`` + 16 hex of the result, as code names them) and its
    ``done:`` record (:func:`ledger_app.reducer.rules.end_carried`)."""
    if not pin_id.startswith("pin:") or not isinstance(evidence, list):
        return set()
    ids = {f"done:{pin_id[4:]}"}
    for h in evidence:
        if isinstance(h, str):
            ids |= {f"tool:{h[:16]}", f"test:{h[:16]}"}
    return ids


def delta_keys(delta: Mapping[str, Any]) -> set[str]:
    """The command keys :func:`apply_delta` may look up in the state (docs/design.md 5.5): those
    of the facts the delta adds, when it carries ``lifecycle_rules``; ``set()`` otherwise.

    The active facts holding these keys, with the facts :func:`delta_reads` names, are all
    the reducer reads of the state.
    """
    if not delta.get("lifecycle_rules"):
        return set()
    keys: set[str] = set()
    for op in delta.get("ops") or []:
        fact = op.get("fact") if isinstance(op, dict) else None
        if isinstance(fact, dict) and fact.get("command_key"):
            keys.add(str(fact["command_key"]))
    return keys
