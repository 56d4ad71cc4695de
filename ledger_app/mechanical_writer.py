"""The writer protocol, and the mechanical writer that meets it with tool outcomes only. Pure.

Writers propose the non-pin ops of a fold (docs/design.md section 5.3). Pins are never a writer's
business: the fold service always adds them by code. A writer sees the covered entries and
the current state and returns ops for the reducer to judge. The other writers are
:class:`ledger_app.offline.OfflineWriter` and :class:`ledger_app.model_writer.ModelWriter`;
:mod:`ledger_app.services.writer_registry` picks one from the settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ledger_app.entry_view import EntryView
from ledger_app.mechanical import interrupted_fact, outcome_fact
from ledger_app.pending import CALL_KEY, late_result_closes


class Writer(Protocol):
    """``id`` names the writer in the manifest; ``label`` says what it is to a reader."""

    id: str
    label: str
    prompt_version: str | None

    def propose(self, entries: Sequence[EntryView], state: dict[str, Any]) -> list[dict[str, Any]]:
        """Ops (``add``/``supersede``/``retire``/``close``/``cancel``) for ``entries``."""
        ...


class MechanicalWriter:
    """Tool outcomes only (the first fold and the fallback): no model, no judgement."""

    id = "mechanical"
    label = "mechanical (no model)"
    prompt_version = None

    def state_keys(self, entries: Sequence[EntryView]) -> tuple[set[str], set[str]]:
        """``(command keys, fact ids)`` :meth:`propose` may read: the covered results' call
        obligations (the fold service loads only those)."""
        return {CALL_KEY + e.tool_call_id for e in entries if e.kind == "tool_result"}, set()

    def propose(self, entries: Sequence[EntryView], state: dict[str, Any]) -> list[dict[str, Any]]:
        """One ``add`` per tool call: its outcome, or "did not complete" / "pending" (see
        mechanical); a ``close`` for an earlier call's obligation whose result is here."""
        results = {e.tool_call_id: e for e in entries if e.kind == "tool_result"}
        ops: list[dict[str, Any]] = []
        for e in entries:
            if e.kind == "tool_call":
                result = results.get(e.tool_call_id)
                fact = outcome_fact(e, result) if result is not None else interrupted_fact(e)
                ops.append({"op": "add", "fact": fact})
        return ops + late_result_closes(entries, state)
