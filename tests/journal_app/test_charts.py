"""The overview's token chart geometry (pure)."""

from journal_app.charts import FoldPoint, nice_ticks, short_number, token_chart


def test_nice_ticks_are_round_and_cover_the_top():
    assert nice_ticks(7600) == [0, 2000, 4000, 6000, 8000]
    assert nice_ticks(64, 6) == [0, 20, 40, 60, 80]
    assert nice_ticks(1) == [0, 1]
    assert nice_ticks(0) == [0]


def test_short_numbers_for_axis_labels():
    assert [short_number(n) for n in (0, 999, 1000, 1200, 2_500_000)] == [
        "0",
        "999",
        "1k",
        "1.2k",
        "2.5M",
    ]


def test_it_plots_cumulative_tokens_and_places_folds_on_both_series():
    chart = token_chart(
        [(10, 100), (20, 300), (30, 0)],
        [FoldPoint(1, 20, 50, "fold", "fallback"), FoldPoint(2, 30, None, "review", "accepted")],
        head_seq=30,
    )
    assert chart.total_tokens == 400 and chart.head_seq == 30 and not chart.empty
    points = [tuple(map(float, p.split(","))) for p in chart.journal_points.split()]
    assert len(points) == 4 and points[0] == (chart.plot_left, chart.plot_bottom)
    ys = [y for _, y in points]
    assert ys == sorted(ys, reverse=True)  # cumulative: never goes down (SVG y grows down)
    first, second = chart.markers
    assert (first.journal_tokens, first.ledger_tokens) == (400, 50)
    assert first.y > first.journal_y  # the ledger (50) sits below the journal (400)
    assert second.ledger_tokens is None and second.y == second.journal_y
    assert chart.ledger_points.count(",") == 1  # only folds with a ledger figure
    assert chart.y_ticks[-1][1] == "400" and chart.x_ticks[-1][1] == "30"


def test_an_empty_journal_is_an_empty_chart():
    chart = token_chart([], [], head_seq=0)
    assert chart.empty and chart.total_tokens == 0
