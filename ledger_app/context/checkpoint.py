"""The ledger checkpoint message: the facts about the rounds folded out (DESIGN.md 6, step 4).

Pure module: no Django, no database. When API rounds leave the verbatim part of the request,
the facts whose support lies in them take their place, rendered by
:func:`ledger_app.budget.render_fact` with their support hashes so the model can ask for the
source. P0 and P1 facts always go in; P2/P3 facts fill the room left, newest first, and the
message says how many stay in the ledger unshown (DESIGN.md 5.4).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from journal_app.rounds import Round
from ledger_app.budget import render_fact
from ledger_app.facts import priority_rank
from ledger_app.validation import Meter, Scanner, redact

CHECKPOINT_MARK = "[ledger checkpoint"
#: Said in the checkpoint when P2/P3 facts did not fit (they stay in the ledger).
OMITTED = "(+{n} P2/P3 facts in the ledger, not shown)"


def fact_line(f: Mapping[str, Any], scan: Scanner | None = None) -> str:
    """One fact as the context shows it (:func:`render_fact`), secrets redacted."""
    return redact(render_fact(dict(f)), scan)[0]


class Checkpoint:
    """The ledger's active facts, by how the context renders them, and the checkpoint text.

    Args:
        ledger: the reducer state (``{"facts": {...}}``).
        position_of: entry hash -> position of its round among the droppable rounds
            (-1: a kept round, such as the tail or a message round).
        droppable: the droppable API rounds, oldest first.
        meter: token counting.
        line: renders one fact (:func:`fact_line` with the build's scanner).

    Attributes:
        pins: entry hash -> pin fact (any lifecycle).
        inactive_pins: entry hashes of pins no longer active (retired, superseded).
        obligations: active open obligations (they go in the task state, not here).
    """

    def __init__(
        self,
        ledger: Mapping[str, Any],
        position_of: Mapping[str, int],
        droppable: Sequence[Round],
        meter: Meter,
        line: Callable[[Mapping[str, Any]], str],
    ) -> None:
        all_facts = ledger.get("facts", {}).values()
        facts = [f for f in all_facts if f.get("lifecycle", "active") == "active"]
        self.pins = {
            f["support"][0]["entry"]: f for f in all_facts if f.get("pin") and f.get("support")
        }
        self.inactive_pins = {
            h for h, f in self.pins.items() if f.get("lifecycle", "active") != "active"
        }
        self.obligations = [
            f for f in facts if not f.get("pin") and f.get("category") == "open_obligation"
        ]
        self.ranked: list[tuple[int, dict[str, Any]]] = []
        for f in facts:
            if f.get("pin") or f.get("category") == "open_obligation":
                continue
            positions = [position_of.get(s.get("entry", ""), -2) for s in f.get("support", [])]
            known = [p for p in positions if p >= 0]
            if not known and all(p == -1 for p in positions):
                continue  # about kept material only (pins, tail)
            self.ranked.append((min(known) if known else -1, f))
        self.droppable = list(droppable)
        self.meter = meter
        self._render = line
        self._lines: dict[int, str] = {}
        self._texts: dict[tuple[int, int | None], tuple[str, list[str], int]] = {}
        self._costs: dict[int, int] = {}
        self._prefix: list[tuple[int, int]] | None = None

    def eligible(self, dropped: int) -> list[dict[str, Any]]:
        """Facts with support in one of the first ``dropped`` droppable rounds."""
        return [f for pos, f in self.ranked if pos < dropped]

    def line(self, f: Mapping[str, Any]) -> str:
        """The rendered line of one fact, remembered for the build."""
        line = self._lines.get(id(f))
        if line is None:
            line = self._lines[id(f)] = self._render(f)
        return line

    def text(self, dropped: int, fill: int | None) -> tuple[str, list[str], int]:
        """The checkpoint message for the first ``dropped`` droppable rounds, with P2/P3 facts
        newest first while they fit in ``fill`` tokens (``None``: all). Returns the text, the
        ids of facts left out, and the number of facts shown."""
        if dropped == 0:
            return "", [], 0
        key = (dropped, fill)
        if key not in self._texts:
            self._texts[key] = self._text(dropped, fill)
        return self._texts[key]

    def _text(self, dropped: int, fill: int | None) -> tuple[str, list[str], int]:
        eligible = self.eligible(dropped)
        must = [f for f in eligible if f.get("priority") in ("P0", "P1")]
        optional = [f for f in eligible if f.get("priority") not in ("P0", "P1")]
        optional.sort(key=lambda f: (-int(f.get("origin_fold", 0) or 0), str(f.get("id"))))
        lines = [self._head(dropped)] + [
            self.line(f)
            for f in sorted(
                must, key=lambda f: (priority_rank(f.get("priority", "")), str(f.get("id")))
            )
        ]
        shown: list[str] = []
        left: list[str] = [str(f.get("id")) for f in optional]
        if fill is None or fill > 0:
            note = self.meter.text(OMITTED.format(n=len(optional))) + self.meter.text("\n")
            budget = None if fill is None else fill - note
            left = []
            for f in optional:
                line = self.line(f)
                cost = self.meter.text(line) + self.meter.text("\n")
                if budget is None or cost <= budget:
                    shown.append(line)
                    if budget is not None:
                        budget -= cost
                else:
                    left.append(str(f.get("id")))
            lines += shown
            if left:
                lines.append(OMITTED.format(n=len(left)))
        return "\n".join(lines), left, len(must) + len(shown)

    def cost(self, dropped: int) -> int:
        """Tokens of the checkpoint with its P0/P1 facts only, summed per line (an upper bound
        of the joined text in practice; the built request is counted exactly anyway).

        Constant time after the first call: each fact's line is counted once and the sums
        over the first ``k`` droppable rounds are prefix sums (issue 13)."""
        if dropped == 0:
            return 0
        cached = self._costs.get(dropped)
        if cached is None:
            if self._prefix is None:
                self._prefix = self._prefix_sums()
            lines, n = self._prefix[min(dropped, len(self._prefix) - 1)]
            cached = (
                self.meter.per_message
                + self.meter.text(self._head(dropped))
                + lines
                + n * self.meter.text("\n")
            )
            self._costs[dropped] = cached
        return cached

    def _head(self, dropped: int) -> str:
        first = self.droppable[0].first_seq
        last = self.droppable[dropped - 1].last_seq
        return (
            f"{CHECKPOINT_MARK}: rounds seq {first}-{last} are folded out; each fact cites the "
            "journal entries it rests on]"
        )

    def _prefix_sums(self) -> list[tuple[int, int]]:
        """``[k] -> (tokens of the P0/P1 lines, their number)`` over facts with support in the
        first ``k`` droppable rounds (a fact at position -1 counts from ``k = 1``)."""
        size = len(self.droppable) + 1
        tokens = [0] * (size + 1)
        count = [0] * (size + 1)
        for pos, f in self.ranked:
            if f.get("priority") not in ("P0", "P1"):
                continue
            at = max(pos, 0) + 1  # in the checkpoint from k = pos + 1 on
            if at > size:
                continue
            tokens[at] += self.meter.text(self.line(f))
            count[at] += 1
        out: list[tuple[int, int]] = []
        t = n = 0
        for k in range(size):
            t += tokens[k]
            n += count[k]
            out.append((t, n))
        return out
