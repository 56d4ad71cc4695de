"""Grouping journal entries into API rounds (docs/design.md section 4, "Rounds and tails").

Pure module. An *API round* is one model response (assistant messages, reasoning and tool
calls that arrive before any result) followed by all results of its calls. Parallel calls
sit in one round. Authoritative messages (system, developer, user) form rounds of their own
(``kind="message"``) and close the API round before them. Runtime events join the open round
or stand alone.

A round whose calls did not all get a result is ``interrupted``; it is never complete, and
``at_tail`` says whether it is the last round of the journal (the run stopped mid-turn).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol


class EntryLike(Protocol):
    """What grouping needs of an entry: ``seq``, ``kind``, ``role``, ``tool_call_id``."""

    seq: int
    kind: str
    role: str
    tool_call_id: str


@dataclass
class Round:
    """One group of entries.

    Attributes:
        index: 0-based position among the journal's rounds.
        kind: ``"api"`` (model response and tool traffic), ``"message"`` (an authoritative
            message) or ``"event"`` (runtime events outside any API round).
        seqs: the entries' ``seq`` values in order.
        call_ids: tool call ids issued in the round, in order.
        answered: call ids that have a result.
        at_tail: the last round of the journal.
    """

    index: int
    kind: str
    seqs: list[int] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)
    at_tail: bool = False

    @property
    def interrupted_call_ids(self) -> list[str]:
        """Calls of this round that never got a result, in call order."""
        return [c for c in self.call_ids if c not in self.answered]

    @property
    def status(self) -> str:
        """``"complete"`` or ``"interrupted"`` (a call without its result)."""
        return "interrupted" if self.interrupted_call_ids else "complete"

    @property
    def parallel(self) -> bool:
        """True when the round issued more than one tool call."""
        return len(self.call_ids) > 1

    @property
    def first_seq(self) -> int:
        return self.seqs[0]

    @property
    def last_seq(self) -> int:
        return self.seqs[-1]


_RESPONSE_KINDS = ("message", "tool_call", "reasoning")


def group_rounds(entries: Iterable[EntryLike]) -> list[Round]:
    """Group ``entries`` (in ``seq`` order) into :class:`Round` objects.

    Args:
        entries: objects with ``seq``, ``kind``, ``role``, ``tool_call_id``.

    Returns:
        Rounds in order; every entry belongs to exactly one round.

    A tool result joins the round that issued its call, even if other rounds came between
    (out-of-order results are kept with their call, never split from it).
    """
    rounds: list[Round] = []
    current: Round | None = None
    has_results = False
    round_of_call: dict[str, Round] = {}

    def start(kind: str) -> Round:
        r = Round(index=len(rounds), kind=kind)
        rounds.append(r)
        return r

    for e in entries:
        authoritative = e.kind == "message" and e.role in ("system", "developer", "user")
        if authoritative:
            current, has_results = None, False
            start("message").seqs.append(e.seq)
        elif e.kind == "tool_result":
            owner = round_of_call.get(e.tool_call_id) or current
            if owner is None:
                owner = start("api")
                current = owner
            owner.seqs.append(e.seq)
            owner.answered.add(e.tool_call_id)
            if owner is current:
                has_results = True
        elif e.kind in _RESPONSE_KINDS:
            if current is None or current.kind != "api" or has_results:
                current, has_results = start("api"), False
            current.seqs.append(e.seq)
            if e.kind == "tool_call":
                current.call_ids.append(e.tool_call_id)
                round_of_call[e.tool_call_id] = current
        else:  # runtime events
            if current is not None:
                current.seqs.append(e.seq)
            else:
                start("event").seqs.append(e.seq)
    for r in rounds:
        r.seqs.sort()
    if rounds:
        rounds[-1].at_tail = True
    return rounds


def complete_prefix_end(rounds: Sequence[Round]) -> int | None:
    """The ``seq`` ending the longest prefix of rounds that is safe to fold.

    A trailing interrupted round (the run may still deliver its results) is left out;
    interrupted rounds followed by later rounds are final and included. Returns ``None``
    when no round qualifies.
    """
    end: int | None = None
    for r in rounds:
        if r.status == "interrupted" and r.at_tail:
            break
        end = r.last_seq if end is None else max(end, r.last_seq)
    return end


def round_duration(started: datetime | None, times: Sequence[datetime]) -> timedelta | None:
    """How long a round took: from ``started`` (when its first entry's work began: the user
    message, the reasoning, the model call's start, not its first tool call) to the latest
    of ``times`` (its timed entries). Without ``started`` (the first entry is elsewhere,
    e.g. on an earlier page) the earliest of ``times`` stands in. ``None`` when there is
    nothing to measure (no times, or a single instant with no known start)."""
    if not times:
        return None
    start = started if started is not None else min(times)
    if len(times) < 2 and max(times) <= start:
        return None  # one instant: nothing took any time
    return max(max(times) - start, timedelta(0))
