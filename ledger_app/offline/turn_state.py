"""One user turn as the offline writer reads it, and the facts a turn's end writes. Pure.

:class:`FoldReading` is what spans the turns of one fold (request parts still open,
approvals, pin kinds); :class:`Turn` is one instruction with the evidence that carries its
parts out and the assistant's closing message (docs/design.md 5.5). :func:`conclusion_fact`,
:func:`completion_fact`, :func:`close_request` and :func:`retirements` build the ops a turn
ends with; :class:`ledger_app.offline.offline_writer.OfflineWriter` drives them.

Privacy: every quote goes through :func:`ledger_app.fact_text.redact` or
:func:`ledger_app.entry_view.cite` (:mod:`journal_app.privacy`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from journal_app.privacy import filter_text
from ledger_app.entry_view import EntryView, cite, command_of
from ledger_app.fact_text import clip, redact
from ledger_app.facts import Fact
from ledger_app.mechanical import is_routine_read
from ledger_app.offline.decisions import Approvals
from ledger_app.offline.heuristics import sentences
from ledger_app.offline.request_parts import PartProgress, RequestParts, pin_kinds
from ledger_app.offline.testruns import is_check_command
from ledger_app.offline.turns import (
    cancellations,
    cancelled_pin,
    conclusion,
    instruction_parts,
    numbered_items,
    part_kind,
)
from ledger_app.outcomes import QUOTE_CHARS


def short_hash(text: str) -> str:
    """The first 16 hex digits of ``text``'s SHA-256 (the id suffix of a plan item's fact)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def first_line(text: str) -> str:
    """The first non-empty line of ``text``, stripped: exact text for a support quote."""
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:QUOTE_CHARS]


def quoted(view: EntryView, quote: str) -> dict[str, Any]:
    """A support item for ``quote`` in ``view``: byte range and chunks when the quote is exact
    text of the entry, else the quote alone (a normalised sentence)."""
    item = cite(view, quote)
    if "quote" not in item and "range" not in item and quote and not filter_text(quote).filtered:
        item["quote"] = quote
    return item


@dataclass
class FoldReading:
    """What spans the turns of one fold: the request parts still open, the approvals, and
    the ops the turns' results produced (flushed at each turn's end)."""

    parts: RequestParts
    approvals: Approvals
    #: the kind of each pin of the fold (:func:`pin_kinds`)
    kinds: dict[str, str] = field(default_factory=dict)
    ops: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, entries: Sequence[EntryView], state: dict[str, Any]) -> FoldReading:
        """The reading of a fold over ``entries`` from ``state`` (its pins' kinds first)."""
        kinds = pin_kinds(entries, state) if entries else {}
        parts = RequestParts(state, lambda m: kinds.get(f"pin:{m.entry_hash[:16]}", "governing"))
        requests = {pin for pin, kind in kinds.items() if kind == "request"}
        return cls(parts, Approvals(state, request_pins=requests), kinds)

    def pin_kind(self, message: EntryView) -> str:
        """The kind of ``message``'s pin (``"governing"`` when it has none)."""
        return self.kinds.get(f"pin:{message.entry_hash[:16]}", "governing")

    def flush(self) -> list[dict[str, Any]]:
        """The ops gathered since the last flush (and none kept)."""
        ops, self.ops = self.ops, []
        return ops


@dataclass
class Turn:
    """One user turn as the writer reads it: the instruction, its parts and the evidence
    that carries each out, and the assistant's closing message (docs/design.md 5.5).

    A request closes only when each part has completion evidence (:class:`PartProgress`:
    an edit of a named file does not carry out "add a regression test"; a test file
    written and a passing run do). Then the turn adds its ``done:`` fact and, when the pin
    is a request, a ``close`` of the pin citing the results (``seq``: the last one). The
    items of a numbered list are obligations of their own (:class:`RequestParts`)."""

    instruction: EntryView | None = None
    reading: FoldReading = field(default_factory=lambda: FoldReading.of([], {}))
    last_said: EntryView | None = None
    done: tuple[EntryView, EntryView, Fact] | None = None
    parts: list[PartProgress] = field(default_factory=list)
    #: the instruction is a numbered list: its parts are :class:`RequestParts` obligations
    listed: bool = False
    ended: bool = False
    #: the turn's latest successful change, and latest check with whether it passed
    last_change: EntryView | None = None
    last_check: tuple[EntryView, bool] | None = None

    def __post_init__(self) -> None:
        if self.instruction is not None:
            self.listed = numbered_items(self.instruction.text) is not None
            if not self.listed:
                self.parts = [
                    PartProgress(p, part_kind(p)) for p in instruction_parts(self.instruction.text)
                ]

    @property
    def said(self) -> EntryView | None:
        """The assistant's latest message of the turn (``None`` once a call followed it)."""
        return self.last_said

    @said.setter
    def said(self, message: EntryView | None) -> None:
        # an assistant message may name the request part the latest results carried out
        if message is not None and message is not self.last_said:
            self.reading.ops += self.reading.parts.said(message)
        self.last_said = message

    def record(self, call: EntryView, result: EntryView, fact: Fact) -> None:
        """Take ``call``'s ``result`` (its outcome ``fact``) as evidence for the turn's parts."""
        ok = fact.get("outcome") != "failure"
        if (ok and fact.get("result") not in ("success", "submitted", None)) or is_routine_read(
            call
        ):
            return  # reads find, rejections and plans are read elsewhere: they carry nothing out
        check = "test" in fact or is_check_command(command_of(call))
        if fact.get("result") == "submitted":
            self._submitted(call, result, fact)
            return
        if check:
            self.last_check = (result, ok)
        elif ok:
            self.last_change = result
        self.reading.ops += self.reading.parts.see(call, result, ok=ok, check=check)
        if ok and not check:
            self.reading.ops += self.reading.approvals.result(call, result, fact)
        if self.instruction is None or self.listed or self.ended:
            return
        for part in self.parts:
            part.see(call, result, ok=ok, check=check)
        if not self.parts or not all(p.done for p in self.parts):
            self.done = None
        elif self.done is None:
            self.done = (call, result, fact)

    def _submitted(self, call: EntryView, result: EntryView, fact: Fact) -> None:
        """A run that submits its output (SWE-agent ``submit``) after a change and a passing
        check has carried out its request: the change, the check and the submission are
        the evidence of every part still open. Without both, a submission proves nothing."""
        if self.instruction is None or self.listed or self.ended:
            return
        check = self.last_check
        if self.last_change is None or check is None or not check[1]:
            return
        for part in self.parts:
            if not part.done:
                part.evidence = [self.last_change, check[0], result]
        if self.parts and all(p.done for p in self.parts) and self.done is None:
            self.done = (call, result, fact)

    def end(self, final: bool = False) -> list[dict[str, Any]]:
        """The ops of the turn's end: its conclusion, the gathered ops, its completion and
        the close of a request pin (``final``: the fold's last turn, approvals end too)."""
        ops: list[dict[str, Any]] = []
        if self.said is not None:
            ops.append({"op": "add", "fact": conclusion_fact(self.said, final)})
        if final:
            ops += self.reading.approvals.end(self.said)
        ops += self.reading.flush()
        if self.instruction is not None and self.done is not None and not self.ended:
            ops.append({"op": "add", "fact": completion_fact(self.instruction, *self.done)})
            pin = f"pin:{self.instruction.entry_hash[:16]}"
            closed = self.reading.approvals.closed_pins
            if self.reading.pin_kind(self.instruction) == "request" and pin not in closed:
                closed.add(pin)
                ops.append(close_request(self.instruction, self.parts))
            self.ended = True
        self.said, self.done = None, None
        return ops


def close_request(instruction: EntryView, parts: list[PartProgress]) -> dict[str, Any]:
    """The ``close`` of a request's pin: evidence the results that carried its parts out,
    ``seq`` the last of them (docs/design.md 5.2, 5.5)."""
    shown = sorted(
        {v.entry_hash: v for p in parts for v in p.evidence or []}.values(), key=lambda v: v.seq
    )
    return {
        "op": "close",
        "id": f"pin:{instruction.entry_hash[:16]}",
        "evidence": [v.entry_hash for v in shown],
        "reason": f"every part of the request ({len(parts)}) carried out; the last at seq "
        f"{shown[-1].seq}",
        "seq": shown[-1].seq,
    }


#: ``command_key`` of the fact holding the latest end-of-fold conclusion (one active at a time)
END_STATE_KEY = "assistant:end-state"


def conclusion_fact(said: EntryView, final: bool) -> Fact:
    """The assistant's closing message of a turn, kept at ``reported`` (docs/design.md 5.5)."""
    excerpt, quote, awaits = conclusion(said.text)
    waits = " It awaits the user's reply." if awaits else ""
    fact: Fact = {
        "id": f"said:{said.entry_hash[:16]}",
        "category": "history",
        "priority": "P1" if final else "P2",
        "confidence": "reported",
        "text": f"Assistant concluded (seq {said.seq}): {redact(excerpt)}{waits}",
        "support": [quoted(said, quote)],
        "author": "offline",
        "awaits_user": awaits,
    }
    if final:
        fact["command_key"] = END_STATE_KEY
    return fact


def completion_fact(instruction: EntryView, call: EntryView, result: EntryView, tool: Fact) -> Fact:
    """An instruction carried out, with its evidence (docs/design.md 5.5).

    Fields for the context's task state: ``completes`` (the pin id), ``evidence_entry``
    (hex hash of the result that shows it) and ``evidence_seq``.
    """
    return {
        "id": f"done:{instruction.entry_hash[:16]}",
        "category": "verified_state",
        "priority": "P1",
        "confidence": "inferred",
        "text": (
            f"The instruction at seq {instruction.seq} was carried out at seq {result.seq} "
            f"(evidence sha256:{result.entry_hash}): {tool['text']}"
        ),
        "support": [quoted(instruction, first_line(instruction.text)), *tool["support"]],
        "author": "offline",
        "completes": f"pin:{instruction.entry_hash[:16]}",
        "evidence_entry": result.entry_hash,
        "evidence_seq": result.seq,
    }


def retirements(message: EntryView, pins: dict[str, Fact]) -> list[dict[str, Any]]:
    """``retire`` ops for the earlier pins an authoritative message cancels (docs/design.md 5.2).

    The reducer holds each as a pending retirement for the review queue (docs/design.md 5.2).
    """
    ops: list[dict[str, Any]] = []
    for sentence in cancellations(sentences(message.text)):
        target = cancelled_pin(sentence, pins)
        if target is None:
            continue
        ops.append(
            {
                "op": "retire",
                "id": target,
                "evidence": [message.entry_hash],
                "reason": f"a later {message.role} message (seq {message.seq}) cancels it: "
                f"{clip(redact(sentence), 200)}",
            }
        )
        pins = {k: v for k, v in pins.items() if k != target}
    return ops
