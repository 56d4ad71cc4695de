"""Calls a runtime declared pending, and their obligations. Pure.

A runtime marks a tool call ``metadata.pending: true`` when it legitimately waits for the
result (an approval, a long job). The fold records such a call as an open obligation "pending
since seq N" (outcome ``pending``), never "did not complete"; the context's task state says
the same; and when the result arrives, in a later fold, :func:`late_result_closes` closes
the obligation with the result as its completion evidence (docs/design.md 5.2). Interrupted calls
(no result, not declared pending) close the same way when a late result arrives.

The obligation carries ``command_key`` ``call:<call id>``: the writers' state holds the
active facts with a command key (:func:`ledger_app.services.state.writer_state`), so the
fold that holds the result finds the obligation by its call id without reading the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: ``command_key`` prefix of a call's open obligation.
CALL_KEY = "call:"


def is_pending(call: Any) -> bool:
    """A tool call entry (:class:`ledger_app.entry_view.EntryView`) whose metadata says
    ``pending: true``."""
    meta = getattr(call, "meta", None)
    return call.kind == "tool_call" and isinstance(meta, dict) and meta.get("pending") is True


def pending_text(seq: int) -> str:
    """How a fact states a pending call (after the call's description)."""
    return f"is pending since seq {seq} (declared by the runtime; its result has not arrived)"


def call_obligation(fact: dict[str, Any], call: Any) -> dict[str, Any]:
    """``fact`` (the open obligation of ``call``, no result yet) made findable by the call
    id, and, for a pending call, stated as pending (outcome ``pending``, confidence
    ``reported``: the runtime said so) instead of "did not complete". Returns ``fact``."""
    fact["call_id"] = call.tool_call_id
    fact["command_key"] = CALL_KEY + call.tool_call_id
    if is_pending(call):
        head = fact["text"].split(" was called and did not complete", 1)[0]
        fact["text"] = f"{head} {pending_text(call.seq)}"
        fact["outcome"] = "pending"
        fact["confidence"] = "reported"
    return fact


def late_result_closes(entries: Sequence[Any], state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``close`` ops for the open obligations of earlier calls (pending or interrupted, see
    :func:`call_obligation`) whose successful result is among ``entries``.

    Args:
        entries: a fold's covered entries.
        state: the ledger state the writer reads (``{"facts": {id: fact}}``).

    Returns:
        One ``close`` per such obligation, its evidence the result's entry hash (the reducer
        accepts a non-failed tool result as completion evidence, docs/design.md 5.2). An error
        result closes nothing: the obligation stays open.
    """
    waiting = {
        str(f["command_key"])[len(CALL_KEY) :]: fid
        for fid, f in state.get("facts", {}).items()
        if f.get("lifecycle", "active") == "active"
        and f.get("category") == "open_obligation"
        and str(f.get("command_key", "")).startswith(CALL_KEY)
    }
    ops: list[dict[str, Any]] = []
    for e in entries:
        fid = waiting.get(e.tool_call_id) if e.kind == "tool_result" else None
        if fid is not None and not e.is_error:
            del waiting[e.tool_call_id]
            ops.append(
                {
                    "op": "close",
                    "id": fid,
                    "evidence": [e.entry_hash],
                    "reason": f"the call's result arrived at seq {e.seq}",
                }
            )
    return ops
