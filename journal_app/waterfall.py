"""A session's waterfall: its model calls and tool runs as spans on a time axis. Pure module.

A *call* span is one model call: the run of consecutive assistant entries (messages,
reasoning, tool calls) that one answer produced. It starts when the work began (the entry's
``turn_context`` time, :func:`journal_app.selectors.entry_started`) or, without one, at the
time of the entry before it (the last input the model saw); it ends at the latest time of
its entries. A *tool* span is a tool call's run: from the call's time to its result's time
(matched by ``tool_call_id``). Durations need source times; entries without them give spans
with no duration (drawn in seq order). The geometry is computed here, in SVG user units; the
template draws one bar per row. README "The UI" (Waterfall) describes the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

#: width of a row's bar area, SVG user units
BAR_WIDTH = 320
#: the narrowest bar drawn (a span too short to see still shows)
MIN_BAR = 2.0


@dataclass(frozen=True)
class Step:
    """One entry as the waterfall reads it."""

    seq: int
    kind: str
    role: str
    tool_call_id: str = ""
    tool_name: str = ""
    at: datetime | None = None
    started: datetime | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal | None = None
    is_error: bool = False
    model: str = ""


@dataclass
class Span:
    """A model call (``kind="call"``) or a tool run (``kind="tool"``) and its bar."""

    kind: str
    label: str
    first_seq: int
    last_seq: int
    start: datetime | None = None
    end: datetime | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal | None = None
    #: model answers of the call that reported tokens but could not be priced
    unpriced: int = 0
    failed: bool = False
    open: bool = False
    x: float = 0.0
    width: float = 0.0
    offset: timedelta | None = None

    @property
    def cost_note(self) -> str:
        """Why :attr:`cost` is ``None`` or partial, in words (``""`` when it is whole): a tool
        run has no model cost; a call whose source names no model, or reports no tokens,
        cannot be priced; otherwise ``LEDGER_MODEL_PRICES`` has no price for its model. A
        call some of whose answers could not be priced says how many (its cost is a part)."""
        if self.cost is not None:
            if self.unpriced:
                answers = "answer" if self.unpriced == 1 else "answers"
                return f"partial: {self.unpriced} model {answers} of this call could not be priced"
            return ""
        if self.kind != "call":
            return "a tool run has no model cost"
        if self.label == "model call":
            return "the source names no model for this call"
        if not (self.input_tokens or self.output_tokens):
            return "the source reports no token usage for this call"
        return f"no price for model {self.label!r} in LEDGER_MODEL_PRICES"

    @property
    def duration(self) -> timedelta | None:
        """``end - start`` when both are known, else ``None``."""
        if self.start is None or self.end is None:
            return None
        return max(self.end - self.start, timedelta(0))


@dataclass
class Waterfall:
    """The spans of a run of entries, placed on one time axis (``origin`` .. ``origin+span``)."""

    spans: list[Span] = field(default_factory=list)
    origin: datetime | None = None
    total: timedelta | None = None
    timed: bool = False


def _assistant_output(step: Step) -> bool:
    return step.role == "assistant" and step.kind in ("message", "reasoning", "tool_call")


def _add_cost(a: Decimal | None, b: Decimal | None) -> Decimal | None:
    if b is None:
        return a
    return b if a is None else a + b


def spans_of(steps: Sequence[Step]) -> list[Span]:
    """The call and tool spans of ``steps`` (in seq order), in order of their first seq.

    A tool call without a result among ``steps`` is a span with ``open=True`` and no end.
    """
    spans: list[Span] = []
    tools: dict[str, Span] = {}
    call: Span | None = None
    previous_at: datetime | None = None
    for step in steps:
        if _assistant_output(step):
            if call is None:
                call = Span(
                    "call",
                    step.model or "model call",
                    step.seq,
                    step.seq,
                    start=step.started or previous_at or step.at,
                )
                spans.append(call)
            call.last_seq = step.seq
            if step.at is not None and (call.end is None or step.at > call.end):
                call.end = step.at
            if step.started is not None and (call.start is None or step.started < call.start):
                call.start = step.started
            call.input_tokens += step.input_tokens
            call.output_tokens += step.output_tokens
            call.cost = _add_cost(call.cost, step.cost)
            if step.cost is None and (step.input_tokens or step.output_tokens):
                call.unpriced += 1
            if step.model and call.label == "model call":
                call.label = step.model
            if step.kind == "tool_call" and step.tool_call_id:
                tool = Span(
                    "tool",
                    step.tool_name or "tool",
                    step.seq,
                    step.seq,
                    start=step.at,
                    open=True,
                )
                tools[step.tool_call_id] = tool
                spans.append(tool)
        else:
            call = None
            if step.kind == "tool_result" and step.tool_call_id in tools:
                tool = tools.pop(step.tool_call_id)
                tool.last_seq = step.seq
                tool.end = step.at
                tool.failed = step.is_error
                tool.open = False
        if step.at is not None:
            previous_at = step.at
    spans.sort(key=lambda s: (s.first_seq, s.kind != "call"))
    return spans


def waterfall(steps: Sequence[Step], width: int = BAR_WIDTH) -> Waterfall:
    """The spans of ``steps`` with their bars: ``x`` and ``width`` in ``0..width`` units of
    the page's time window (the earliest start to the latest end). Without any time, bars
    are laid out by seq instead and ``timed`` is ``False``."""
    spans = spans_of(steps)
    times = [t for s in spans for t in (s.start, s.end) if t is not None]
    out = Waterfall(spans=spans)
    if len(times) >= 2 and max(times) > min(times):
        origin, last = min(times), max(times)
        total = (last - origin).total_seconds()
        out.origin, out.total, out.timed = origin, last - origin, True
        for s in spans:
            start = s.start or s.end
            if start is None:
                continue
            end = s.end or start
            s.offset = start - origin
            s.x = round((start - origin).total_seconds() / total * width, 2)
            s.width = round(max(MIN_BAR, (end - start).total_seconds() / total * width), 2)
            s.x = min(s.x, round(width - s.width, 2))
        return out
    if steps:
        first, last_seq = steps[0].seq, steps[-1].seq
        scale = width / max(1, last_seq - first + 1)
        for s in spans:
            s.x = round((s.first_seq - first) * scale, 2)
            s.width = round(max(MIN_BAR, (s.last_seq - s.first_seq + 1) * scale), 2)
    return out
