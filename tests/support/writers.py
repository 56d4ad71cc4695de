"""Test-only writers (moved out of the product: issue 12, item 7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger_app.entry_view import EntryView


class ScriptedWriter:
    """Returns fixed ops: tests of the reducer's rules and of the fold service."""

    label = "scripted"
    prompt_version = None

    def __init__(self, ops: list[dict[str, Any]], writer_id: str = "scripted") -> None:
        self.id = writer_id
        self._ops = ops

    def propose(self, entries: Sequence[EntryView], state: dict[str, Any]) -> list[dict[str, Any]]:
        """The ops given at construction, unchanged."""
        return [dict(op) for op in self._ops]
