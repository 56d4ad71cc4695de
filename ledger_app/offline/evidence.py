"""The evidence a fold's writer and the rules read: its entries indexed (docs/design.md 5.3). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ledger_app.entry_view import EntryView, command_of
from ledger_app.offline.testruns import RunCounts, parse_test_output


class EvidenceIndex:
    """Index over a fold's entries (and earlier cited ones) used by the writer and the rules.

    Args:
        entries: the covered entries in seq order.
        extra: earlier entries of the same scope (cited support), any order.
    """

    def __init__(self, entries: Sequence[EntryView], extra: Iterable[EntryView] = ()) -> None:
        self.entries = list(entries)
        self.by_hash: dict[str, EntryView] = {e.entry_hash: e for e in extra}
        self.by_hash.update({e.entry_hash: e for e in self.entries})
        self.calls: dict[str, EntryView] = {}
        self.results: dict[str, EntryView] = {}
        for e in self.by_hash.values():
            if e.kind == "tool_call" and e.tool_call_id:
                self.calls[e.tool_call_id] = e
            elif e.kind == "tool_result" and e.tool_call_id:
                self.results[e.tool_call_id] = e
        self._runs: dict[str, RunCounts | None] = {}

    def call_of(self, result: EntryView) -> EntryView | None:
        """The tool call a result answers, if it is in the index."""
        return self.calls.get(result.tool_call_id)

    def command(self, view: EntryView) -> str:
        """The shell command of a call, or of a result's call."""
        call = view if view.kind == "tool_call" else self.call_of(view)
        return command_of(call) if call is not None else ""

    def test_run(self, result: EntryView) -> RunCounts | None:
        """Parsed counts of a result when its output holds a test summary (cached)."""
        if result.entry_hash not in self._runs:
            output = result.content.get("output")
            run = parse_test_output(output) if isinstance(output, str) else None
            self._runs[result.entry_hash] = run
        return self._runs[result.entry_hash]

    def failed(self, result: EntryView) -> bool:
        """A result that shows a failure: an error result, or a test run with failures."""
        run = self.test_run(result)
        return result.is_error or (run is not None and not run.ok)
