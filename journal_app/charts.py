"""The session overview's token chart, computed server-side as SVG geometry (docs/design.md 8).

Pure module. The x axis is the journal's seq (its own clock: imported transcripts all carry
one import time), the y axis tokens, linear or logarithmic (``scale="log"``: a ledger of a
few thousand tokens stays visible next to a journal of ten million). Two series: the journal's cumulative tokens, and the
ledger's active tokens after each fold (the compacted size), with a marker per fold.
The template draws the numbers it gets; nothing here knows about HTML.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

WIDTH = 760
HEIGHT = 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 36


@dataclass(frozen=True)
class FoldPoint:
    """A fold on the chart: its number, the seq it ends at, the ledger's active tokens."""

    number: int
    seq: int
    ledger_tokens: int | None
    kind: str = "fold"
    outcome: str = ""


@dataclass
class Marker:
    x: float
    y: float
    journal_y: float
    number: int
    seq: int
    journal_tokens: int
    ledger_tokens: int | None
    kind: str
    outcome: str


@dataclass
class TokenChart:
    """Geometry of the chart, in SVG user units (``width`` x ``height``)."""

    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_top: int
    plot_bottom: int
    journal_points: str
    ledger_points: str
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    total_tokens: int = 0
    head_seq: int = 0
    scale: str = "linear"

    @property
    def empty(self) -> bool:
        return self.head_seq == 0


def nice_ticks(top: float, count: int = 5) -> list[int]:
    """Round tick values from 0 to at least ``top`` (1, 2 or 5 times a power of ten apart)."""
    if top <= 0:
        return [0]
    raw = top / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    step = max(int(step), 1)
    ticks = list(range(0, int(math.ceil(top / step) * step) + 1, step))
    return ticks


def short_number(n: int) -> str:
    """``1200`` -> ``1.2k``, ``3400000`` -> ``3.4M`` (axis labels)."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= size:
            text = f"{n / size:.1f}".rstrip("0").rstrip(".")
            return text + suffix
    return str(n)


def token_chart(
    buckets: Sequence[tuple[int, int]],
    folds: Sequence[FoldPoint],
    *,
    head_seq: int,
    width: int = WIDTH,
    height: int = HEIGHT,
    scale: str = "linear",
) -> TokenChart:
    """Lay out the chart.

    Args:
        buckets: ``(last_seq, tokens)`` per consecutive seq range, in seq order; the tokens
            of the entries up to ``last_seq`` since the previous bucket (a few hundred
            buckets are plenty: the database sums them).
        folds: the folds to mark, in order.
        head_seq: the journal's head (the x axis ends there).
        scale: ``"linear"`` or ``"log"`` (y = log10(1 + tokens), ticks at powers of ten).

    Returns:
        :class:`TokenChart`; ``empty`` when the journal has no entries.
    """
    left, right, top, bottom = LEFT, width - RIGHT, TOP, height - BOTTOM
    cumulative: list[tuple[int, int]] = [(0, 0)]
    total = 0
    for last_seq, tokens in buckets:
        total += tokens
        cumulative.append((last_seq, total))
    ledger_max = max((f.ledger_tokens or 0 for f in folds), default=0)
    log = scale == "log"
    if log:
        decades = max(1, math.ceil(math.log10(max(total, ledger_max, 1) + 1)))
        y_ticks = [0] + [10**d for d in range(0, decades + 1)]
        y_top_log = math.log10(y_ticks[-1] + 1)
    else:
        y_ticks = nice_ticks(max(total, ledger_max, 1))
    y_top = y_ticks[-1] or 1
    x_ticks = nice_ticks(max(head_seq, 1), 6)
    x_end = x_ticks[-1] or 1

    def sx(seq: float) -> float:
        return round(left + (right - left) * seq / x_end, 1)

    def sy(tokens: float) -> float:
        if log:
            return round(bottom - (bottom - top) * math.log10(tokens + 1) / y_top_log, 1)
        return round(bottom - (bottom - top) * tokens / y_top, 1)

    seqs = [s for s, _ in cumulative]

    def journal_at(seq: int) -> int:
        return cumulative[max(bisect_right(seqs, seq) - 1, 0)][1]

    markers = []
    ledger = []
    for f in folds:
        jt = journal_at(f.seq)
        y = sy(f.ledger_tokens) if f.ledger_tokens is not None else sy(jt)
        markers.append(
            Marker(sx(f.seq), y, sy(jt), f.number, f.seq, jt, f.ledger_tokens, f.kind, f.outcome)
        )
        if f.ledger_tokens is not None:
            ledger.append(f"{sx(f.seq)},{sy(f.ledger_tokens)}")
    return TokenChart(
        width=width,
        height=height,
        plot_left=left,
        plot_right=right,
        plot_top=top,
        plot_bottom=bottom,
        journal_points=" ".join(f"{sx(s)},{sy(t)}" for s, t in cumulative),
        ledger_points=" ".join(ledger),
        x_ticks=[(sx(t), short_number(t)) for t in x_ticks],
        y_ticks=[(sy(t), short_number(t)) for t in y_ticks],
        markers=markers,
        total_tokens=total,
        head_seq=head_seq,
        scale="log" if log else "linear",
    )
