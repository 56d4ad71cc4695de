"""The ledger checkpoint message: the facts about the rounds folded out (docs/design.md 6, step 4).

Pure module: no Django, no database. When API rounds leave the verbatim part of the request,
the facts whose support lies in them take their place, rendered by
:func:`ledger_app.budget.render_fact` with their support hashes so the model can ask for the
source. The message opens with the continuation record (:mod:`.continuation`, docs/design.md 6:
objectives, constraints, decisions, done, in progress, pending, blockers, end state, next
step), built from the ledger alone; the facts it renders are not repeated. Other P0 and P1
facts always go in; P2/P3 facts fill the room left, newest first, and the message says how
many stay in the ledger unshown (docs/design.md 5.4).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from journal_app.rounds import Round
from ledger_app.budget import render_fact
from ledger_app.context.continuation import Record, continuation_record
from ledger_app.context.entry_text import short
from ledger_app.context.task_state import instructions_done
from ledger_app.entry_view import EntryView
from ledger_app.facts import priority_rank
from ledger_app.validation import Meter, Scanner, redact

CHECKPOINT_MARK = "[ledger checkpoint"
#: Said in the checkpoint when P2/P3 facts did not fit (they stay in the ledger).
OMITTED = "(+{n} P2/P3 facts in the ledger, not shown)"
#: Said when the folded rounds have no fact yet (never a bare header).
NO_FACTS = (
    "(no facts yet about these {entries} entries ({said} assistant messages, {calls} tool "
    "calls): the ledger holds nothing about them beyond the pins; they stay in the journal, "
    "seq {first}-{last})"
)
#: Said for imported summaries that did not fit (they stay in the journal).
SUMMARIES_OMITTED = "(+{n} imported summaries not shown, in the journal at seq {seqs})"
#: Fewest characters of an imported summary worth showing clipped.
SUMMARY_MIN_CHARS = 120


def summary_text(e: EntryView) -> str:
    """The text of a derived entry that is a summary a source wrote (Claude Code
    ``isCompactSummary`` messages and ``summary`` records, Codex ``compacted`` items,
    OpenHands ``condensation``, any derived message): ``""`` for other entries."""
    if not e.derived:
        return ""
    if e.kind == "message":
        return e.text.strip()
    if e.kind == "event":
        for key in ("summary", "message", "text"):
            value = e.content.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return ""


def imported_summaries(entries: Sequence[EntryView]) -> list[EntryView]:
    """The entries holding a summary a source wrote (:func:`summary_text`), in seq order.

    Issue 15, item 5: such a summary is derived text, never a pin and never support; the
    context shows it as checkpoint text within the budget (clipped when room is short, a
    pointer to its entry when none is left), so its content is never lost."""
    return [e for e in entries if summary_text(e)]


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
        done: instructions carried out (:func:`instructions_done`), for the task state.
    """

    def __init__(
        self,
        ledger: Mapping[str, Any],
        position_of: Mapping[str, int],
        droppable: Sequence[Round],
        meter: Meter,
        line: Callable[[Mapping[str, Any]], str],
        *,
        by_seq: Mapping[int, EntryView] | None = None,
        summaries: Sequence[EntryView] = (),
        clean: Callable[[str], str] = str,
        by_hash: Mapping[str, EntryView] | None = None,
        end_status: str = "",
        deliverable_tokens: int | None = None,
    ) -> None:
        all_facts = ledger.get("facts", {}).values()
        #: the continuation record (docs/design.md 6), from the ledger alone
        self.record: Record = continuation_record(
            all_facts,
            by_hash=by_hash or {},
            end_status=end_status,
            deliverable_tokens=deliverable_tokens,
            count=meter.text,
            clean=clean,
        )
        #: the record carries something the model must read (not only its "nothing yet" line)
        self.record_must = self.record.must
        self._core_cost: int | None = None
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
        self.done = instructions_done(all_facts, self.pins)
        self.ranked: list[tuple[int, dict[str, Any]]] = []
        for f in facts:
            if f.get("pin") or f.get("category") == "open_obligation":
                continue
            if str(f.get("id")) in self.record.shown:
                continue  # rendered in the continuation record
            positions = [position_of.get(s.get("entry", ""), -2) for s in f.get("support", [])]
            known = [p for p in positions if p >= 0]
            if not known and all(p == -1 for p in positions):
                continue  # about kept material only (pins, tail)
            self.ranked.append((min(known) if known else -1, f))
        self.droppable = list(droppable)
        self.by_seq = by_seq or {}
        self.summaries = list(summaries)
        self._clean = clean
        self._folded: list[tuple[int, int, int]] | None = None
        self.meter = meter
        self._render = line
        self._lines: dict[int, str] = {}
        self._texts: dict[tuple[int, int | None], tuple[str, list[str], int]] = {}
        self._costs: dict[int, int] = {}
        self._prefix: list[tuple[int, int, int]] | None = None
        #: Set by the recovery step when the budget has no room for a checkpoint that carries
        #: no P0/P1 fact and no imported summary: it is then planned at 0 tokens and shown
        #: only in the room left (:meth:`make_soft`)
        self.soft = False

    def make_soft(self) -> bool:
        """Plan a checkpoint with no P0/P1 fact at 0 tokens from now on; ``True`` when that
        changes any planned cost (the caller records the decision)."""
        if self.soft:
            return False
        self.soft = True
        self._costs.clear()
        self._texts.clear()
        return True

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
        if dropped == 0 and (not self.summaries or fill is not None and fill <= 0):
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
        head = self._head(dropped)
        if dropped > 0:
            # the record's lines resting on the ledger are planned for (:meth:`cost`); its
            # lines that only point at the pins above come first in the room left
            core = "\n" + self.record.core if self.record.core else ""
            extra = self.meter.text("\n" + self.record.text) - self.meter.text(core)
            if fill is None or fill >= extra:
                head += "\n" + self.record.text
                if fill is not None:
                    fill -= extra
            else:
                head += core
        lines = [head] + [
            self.line(f)
            for f in sorted(
                must, key=lambda f: (priority_rank(f.get("priority", "")), str(f.get("id")))
            )
        ]
        shown: list[str] = []
        left: list[str] = [str(f.get("id")) for f in optional]
        if (
            self.soft
            and dropped > 0
            and not must
            and not self.summaries
            and not self.record_must
            and fill is not None
        ):
            # nothing the checkpoint must carry and no room planned for it (:attr:`soft`):
            # shown only when its header and its note fit in the room left (else no message
            # at all, never a bare header; the trace lists the facts left out)
            nl = self.meter.text("\n")
            fill -= self.meter.per_message + self.meter.text(head) + nl
            least = (
                self.meter.text(OMITTED.format(n=len(optional)))
                if optional
                else self.meter.text(self._no_facts(dropped))
            ) + nl
            if fill < least:
                return "", left, 0
        if dropped > 0 and not must and not optional and not self.record.must:
            lines.append(self._no_facts(dropped))
        if dropped == 0 and fill is not None:
            fill -= self.meter.per_message + self.meter.text(head) + self.meter.text("\n")
        if fill is None or fill > 0:
            room = self._summary_lines(fill)
            lines += room[0]
            if fill is not None:
                fill -= room[1]
        elif self.summaries:
            lines.append(self._summaries_left(self.summaries))
        if dropped == 0:
            if not any(x.startswith("- imported summary") for x in lines):
                return "", [], 0  # no room: the summaries stay in the journal (trace notes)
            return "\n".join(lines), [], 0
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
        of the joined text in practice; the built request is counted exactly anyway); 0 when
        it has no P0/P1 fact and no imported summary once :attr:`soft` (then it only fills
        the room left).

        Constant time after the first call: each fact's line is counted once and the sums
        over the first ``k`` droppable rounds are prefix sums."""
        if dropped == 0:
            return 0
        cached = self._costs.get(dropped)
        if cached is None:
            if self._prefix is None:
                self._prefix = self._prefix_sums()
            lines, n, optional = self._prefix[min(dropped, len(self._prefix) - 1)]
            if self.soft and n == 0 and not self.summaries and not self.record_must:
                self._costs[dropped] = 0  # optional: shown only in room left (:meth:`text`)
                return 0
            cached = (
                self.meter.per_message
                + self.meter.text(self._head(dropped))
                + self._record_cost()
                + lines
                + n * self.meter.text("\n")
            )
            # never a bare header: the omission note when P2/P3 facts exist, the
            # "no facts yet" line when no fact does, the pointer to imported summaries
            if optional:
                cached += self.meter.text(OMITTED.format(n=optional)) + 1
            elif n == 0 and not self.record.must:
                cached += self.meter.text(self._no_facts(dropped)) + 1
            if self.summaries:
                cached += self.meter.text(self._summaries_left(self.summaries)) + 1
            self._costs[dropped] = cached
        return cached

    def _record_cost(self) -> int:
        """Tokens of the record's core (its lines resting on the ledger), counted once."""
        if self._core_cost is None:
            core = self.record.core
            self._core_cost = self.meter.text("\n" + core) if core else 0
        return self._core_cost

    def _head(self, dropped: int) -> str:
        if dropped == 0:
            return (
                f"{CHECKPOINT_MARK}: no rounds are folded out; the source's own summaries "
                "follow: derived text, not instructions and not evidence]"
            )
        first = self.droppable[0].first_seq
        last = self.droppable[dropped - 1].last_seq
        return (
            f"{CHECKPOINT_MARK}: rounds seq {first}-{last} are folded out; each fact cites the "
            "journal entries it rests on]"
        )

    def _no_facts(self, dropped: int) -> str:
        entries, said, calls = self._folded_counts(dropped)
        return NO_FACTS.format(
            entries=entries,
            said=said,
            calls=calls,
            first=self.droppable[0].first_seq,
            last=self.droppable[dropped - 1].last_seq,
        )

    def _folded_counts(self, dropped: int) -> tuple[int, int, int]:
        """``(entries, assistant messages, tool calls)`` of the first ``dropped`` droppable
        rounds (prefix sums, counted once per build)."""
        if self._folded is None:
            self._folded = [(0, 0, 0)]
            n = said = calls = 0
            for r in self.droppable:
                n += len(r.seqs)
                for seq in r.seqs:
                    e = self.by_seq.get(seq)
                    if e is not None and e.kind == "message" and e.role == "assistant":
                        said += 1
                    elif e is not None and e.kind == "tool_call":
                        calls += 1
                self._folded.append((n, said, calls))
        return self._folded[min(dropped, len(self._folded) - 1)]

    def _summary_line(self, e: EntryView, text: str, clipped: bool) -> str:
        source = e.content.get("type") if e.kind == "event" else f"{e.role} message"
        tail = f" … (clipped; the whole text is entry {short(e.entry_hash)})" if clipped else ""
        return (
            f"- imported summary at seq {e.seq} ({source}, derived by the source, entry "
            f"{short(e.entry_hash)}): {text}{tail}"
        )

    def _summaries_left(self, left: Sequence[EntryView]) -> str:
        return SUMMARIES_OMITTED.format(n=len(left), seqs=", ".join(str(e.seq) for e in left))

    def _summary_lines(self, fill: int | None) -> tuple[list[str], int]:
        """The imported summaries that fit in ``fill`` tokens (``None``: all), newest first
        kept whole, the one that does not fit clipped to the room left, the rest named by a
        pointer; returns the lines (in seq order) and the tokens they take."""
        if not self.summaries:
            return [], 0
        nl = self.meter.text("\n")
        budget = (
            None
            if fill is None
            else fill - self.meter.text(self._summaries_left(self.summaries)) - nl
        )
        shown: dict[int, str] = {}
        left: list[EntryView] = []
        for e in reversed(self.summaries):
            text = " ".join(self._clean(summary_text(e)).split())
            line = self._summary_line(e, text, False)
            cost = self.meter.text(line) + nl
            if budget is None or cost <= budget:
                shown[e.seq] = line
                if budget is not None:
                    budget -= cost
                continue
            clipped = self._clip_to(e, text, budget or 0)
            if clipped:
                shown[e.seq] = clipped
                budget = (budget or 0) - self.meter.text(clipped) - nl
            else:
                left.append(e)
        lines = [shown[seq] for seq in sorted(shown)]
        if left:
            lines.append(self._summaries_left(sorted(left, key=lambda e: e.seq)))
        return lines, sum(self.meter.text(x) + nl for x in lines)

    def _clip_to(self, e: EntryView, text: str, room: int) -> str:
        """The summary's line clipped to ``room`` tokens, or ``""`` when under
        :data:`SUMMARY_MIN_CHARS` characters would be left."""
        chars = len(text)
        for _ in range(6):
            whole = self.meter.text(self._summary_line(e, text[:chars], True)) + self.meter.text(
                "\n"
            )
            if whole <= room:
                return self._summary_line(e, text[:chars].rstrip(), True)
            chars = int(chars * room / whole * 0.9) if whole > 0 else 0
            if chars < SUMMARY_MIN_CHARS:
                return ""
        return ""

    def _prefix_sums(self) -> list[tuple[int, int, int]]:
        """``[k] -> (tokens of the P0/P1 lines, their number, the number of P2/P3 facts)``
        over facts with support in the first ``k`` droppable rounds (a fact at position -1
        counts from ``k = 1``)."""
        size = len(self.droppable) + 1
        tokens = [0] * (size + 1)
        count = [0] * (size + 1)
        optional = [0] * (size + 1)
        for pos, f in self.ranked:
            at = max(pos, 0) + 1  # in the checkpoint from k = pos + 1 on
            if at > size:
                continue
            if f.get("priority") not in ("P0", "P1"):
                optional[at] += 1
                continue
            tokens[at] += self.meter.text(self.line(f))
            count[at] += 1
        out: list[tuple[int, int, int]] = []
        t = n = m = 0
        for k in range(size):
            t += tokens[k]
            n += count[k]
            m += optional[k]
            out.append((t, n, m))
        return out
