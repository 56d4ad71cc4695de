"""The outside count stays outside, and the agreement rows say what they compare. No timing.

``bench/outside.py`` checks the bench's ``ingest`` and ``storage`` rows (bench/README.md,
"The outside count"); it is only a check while it shares no code with them.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from bench.__main__ import BENCHMARKS
from bench.agreement import compare, rows
from bench.cpu import cpu_between

OUTSIDE = Path(__file__).resolve().parents[2] / "bench" / "outside.py"


def test_the_outside_count_imports_only_the_standard_library_and_psycopg():
    tree = ast.parse(OUTSIDE.read_text(encoding="utf-8"))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "no relative import: nothing of the bench"
            roots.add((node.module or "").split(".")[0])
    foreign = roots - set(sys.stdlib_module_names) - {"__future__", "psycopg"}
    assert foreign == set()


def test_agreement_runs_after_the_rows_it_checks():
    order = list(BENCHMARKS)
    assert order.index("ingest") < order.index("storage") < order.index("agreement")


@pytest.mark.parametrize(
    ("bench", "outside", "agrees"),
    [(100.0, 109.0, True), (100.0, 91.0, True), (100.0, 111.0, False), (100.0, 89.0, False)],
)
def test_two_counts_agree_within_ten_percent_of_the_bench_figure(bench, outside, agrees):
    ratio, ok = compare(bench, outside)
    assert ratio == pytest.approx(outside / bench)
    assert ok is agrees


def test_the_agreement_rows_put_the_bench_figure_as_baseline():
    ours = {"entries": 1000, "import_seconds": 10.0, "copy_seconds": 0.5, "ratio": 0.05}
    ours |= {"import_cpu_seconds": 5.0, "copy_cpu_seconds": 0.25, "cpu_ratio": 0.05}
    stored = {"disk_over_deltas": 6.0, "rows_over_deltas": 4.0}
    outside = {
        "import_entries_per_s": 105.0,
        "copy_entries_per_s": 2500.0,
        "import_over_copy": 0.042,
        "import_entries_per_cpu_s": 190.0,
        "copy_entries_per_cpu_s": 4100.0,
        "import_over_copy_cpu": 0.0505,
        "disk_over_deltas": 6.3,
        "rows_over_deltas": 4.0,
    }
    got = {r["metric"]: (r["baseline"], r["value"], r["met"]) for r in rows(ours, stored, outside)}
    assert got == {
        "outside count: whole import": (100.0, 105.0, True),
        "outside count: COPY baseline of the import": (2000.0, 2500.0, False),
        "outside count: whole import / COPY": (0.05, 0.042, False),
        "outside count: whole import, CPU": (200.0, 190.0, True),
        "outside count: COPY baseline, CPU": (4000.0, 4100.0, True),
        "outside count: whole import / COPY, CPU": (0.05, 0.0505, True),
        "outside count: storage on disk / deltas": (6.0, 6.3, True),
        "outside count: storage row data / deltas": (4.0, 4.0, True),
    }


def test_cpu_between_counts_a_session_opened_meanwhile_from_zero():
    assert cpu_between((1.0, None, 0.0), (3.0, 7, 5.0)) == 7.0
    assert cpu_between((1.0, 7, 4.0), (3.0, 7, 5.0)) == 3.0


def test_a_failed_benchmark_is_a_missed_row_not_a_lost_table():
    from bench.__main__ import summarize

    assert summarize("proxy", {"failed": "AssertionError: b''"}) == [
        {"metric": "FAILED", "value": "AssertionError: b''", "met": False}
    ]
