"""Horizontal bar charts for the dashboard, as SVG geometry. Pure module (no Django).

One chart per metric: a bar per session, longest first, scaled to the largest value; the
template draws the rectangles and the labels it gets (README "The UI", Dashboard).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

WIDTH = 560
ROW = 22
LABEL = 170
VALUE = 90


@dataclass(frozen=True)
class Bar:
    """One bar: the row's label, its value as shown, and its rectangle."""

    label: str
    shown: str
    y: float
    width: float
    href: str = ""


@dataclass
class BarChart:
    """A chart of ``bars`` (``width`` x ``height`` SVG units); empty when nothing is above 0."""

    title: str
    bars: list[Bar] = field(default_factory=list)
    width: int = WIDTH
    height: int = 0
    plot_left: int = LABEL
    plot_width: int = WIDTH - LABEL - VALUE

    @property
    def value_x(self) -> int:
        """Where the value labels start (right of the longest bar)."""
        return self.plot_left + self.plot_width + 6


def bar_chart(
    title: str,
    rows: Sequence[tuple[str, int | Decimal, str, str]],
    limit: int = 10,
) -> BarChart:
    """The ``limit`` largest of ``rows`` (``(label, value, shown, href)``) as bars.

    Rows with a value of 0 or less are left out; ties keep the rows' order.
    """
    kept = sorted((r for r in rows if r[1] and r[1] > 0), key=lambda r: -r[1])[:limit]
    chart = BarChart(title)
    if not kept:
        return chart
    top = max(r[1] for r in kept)
    for i, (label, value, shown, href) in enumerate(kept):
        width = round(float(value) / float(top) * chart.plot_width, 2)
        short = label if len(label) <= 24 else label[:23] + "…"
        chart.bars.append(Bar(short, shown, i * ROW + 4, max(1.0, width), href))
    chart.height = len(kept) * ROW + 8
    return chart
