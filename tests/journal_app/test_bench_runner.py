"""The benchmark runner's one table and its size flags. No timing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.__main__ import _call, table_lines


class _Module:
    def __init__(self) -> None:
        self.seen: dict = {}

    def run(self, *, small: bool = False, full: bool = False) -> dict:
        self.seen = {"small": small, "full": full}
        return {}


class _Old:
    def run(self, *, small: bool = False) -> dict:
        return {"small": small}


def test_the_table_has_one_line_per_summary_row_with_goal_measured_and_met():
    lines = table_lines(
        {
            "ingest": [
                {"metric": "append", "value": 0.5, "unit": "x", "target": ">= 1/3", "met": True},
                {"metric": "append, eager", "value": 12_000.0, "unit": "entries/s"},
            ],
            "verify": [{"metric": "verify", "value": 0.2, "target": ">= 1/2", "met": False}],
        }
    )
    assert lines[0] == (
        "benchmark", "metric", "goal", "measured", "unit", "baseline", "ratio", "met"
    )  # fmt: skip
    assert lines[1] == ("ingest", "append", ">= 1/3", "0.5", "x", "-", "-", "met")
    assert lines[2][-1] == "" and lines[2][3] == "12,000"
    assert lines[3] == ("verify", "verify", ">= 1/2", "0.2", "", "-", "-", "MISSED")


def test_full_reaches_only_benchmarks_that_take_it():
    module = _Module()
    _call(module, small=False, profile=False, full=True)
    assert module.seen == {"small": False, "full": True}
    assert _call(_Old(), small=True, profile=False, full=True) == {"small": True}


def test_a_failed_context_build_is_never_met():
    from bench.context_build import summary_rows

    rows = [
        {"entries": 2_000, "seconds": 0.1, "response_bytes": 10, "status": "ok"},
        {"entries": 20_000, "seconds": 1.0, "response_bytes": 10, "status": "failed"},
    ]
    out = summary_rows(rows, 1.0)
    # per size, then against trim_messages per size (no baseline measured: not judged), then
    # the exponent
    assert [r["met"] for r in out] == [None, False, None, None, False]
    rows[1]["status"] = "ok"
    assert [r["met"] for r in summary_rows(rows, 1.0)] == [None, True, None, None, True]


def test_the_build_is_judged_against_trim_messages_at_every_size():
    from bench.context_build import summary_rows

    rows = [
        {
            "entries": 1_000,
            "seconds": 0.3,
            "cpu_seconds": 0.3,
            "trim_cpu_seconds": 0.1,
            "response_bytes": 10,
            "status": "ok",
        },
        {
            "entries": 10_000,
            "seconds": 1.5,
            "cpu_seconds": 1.5,
            "trim_cpu_seconds": 1.0,
            "response_bytes": 10,
            "status": "ok",
        },
    ]
    trim = [r for r in summary_rows(rows, 1.0) if "trim_messages" in r["metric"]]
    assert [(r["baseline"], r["ratio"], r["met"]) for r in trim] == [
        (0.1, 3.0, False),
        (1.0, 1.5, True),
    ]
    assert all(r["what"] for r in summary_rows(rows, 1.0))


def test_the_scratch_database_is_never_the_configured_one(tmp_path):
    from bench.__main__ import BenchError, scratch_name

    assert scratch_name("ledgerkeep", "postgresql", None) == "ledgerkeep_bench"
    assert scratch_name("ledgerkeep", "postgresql", "mine_bench") == "mine_bench"
    with pytest.raises(BenchError, match="is the database of DATABASE_URL"):
        scratch_name("ledgerkeep", "postgresql", "ledgerkeep")
    db = tmp_path / "real.sqlite3"
    with pytest.raises(BenchError, match="is the database of DATABASE_URL"):
        scratch_name(str(db), "sqlite", str(tmp_path / "." / "real.sqlite3"))


def _bench(*args: str, **env: str | None) -> subprocess.CompletedProcess[str]:
    """``python -m bench ARGS`` in a subprocess; ``env`` overrides the environment (``None``
    removes a variable)."""
    environ = {**os.environ, **{k: v for k, v in env.items() if v is not None}}
    for k, v in env.items():
        if v is None:
            environ.pop(k, None)
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_an_existing_database_the_bench_did_not_make_is_refused_and_kept(tmp_path):
    """A run would create the scratch database afresh and drop it: one that exists under a
    name without "bench" is refused before anything is touched (exit 2, one line)."""
    victim = tmp_path / "precious.sqlite3"
    victim.write_bytes(b"keep me")
    done = _bench(
        "ui", "--small", "--out", str(tmp_path / "r.json"),
        DATABASE_URL=None, BENCH_DATABASE_NAME=str(victim),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "exists and is not one the bench made" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert victim.read_bytes() == b"keep me"


def test_an_unwritable_out_file_is_refused_before_the_run(tmp_path):
    (tmp_path / "file").write_text("x")
    done = _bench("reducer", "--out", str(tmp_path / "file" / "r.json"), DATABASE_URL=None)
    assert done.returncode == 2 and "cannot write there" in done.stderr
    assert "== reducer" not in done.stdout


def test_a_page_is_sampled_after_the_background_work_its_first_view_queued():
    """The ui rows time a page, not the stored check its first view leaves running on the
    background thread (bench/ui_pages.py `_time`)."""
    import threading
    import time

    from bench.ui_pages import _time
    from ledger_app.background import run_in_background

    done = threading.Event()
    seen: list[bool] = []

    def page() -> None:
        if not seen:
            run_in_background(lambda: (time.sleep(0.3), done.set()))
        seen.append(done.is_set())

    first, samples, waited = _time(page, 3)
    assert seen == [False, True, True, True]  # every sample after the check finished
    assert len(samples) == 3 and waited >= 0.2


def test_an_unreachable_database_is_one_line_before_any_benchmark(tmp_path):
    done = _bench(
        "ui", "--small", "--out", str(tmp_path / "r.json"),
        DATABASE_URL="postgres://postgres@127.0.0.1:1/nothing",
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        line for line in done.stderr.strip().splitlines() if "cannot reach the database" in line
    ]
    assert "== ui" not in done.stdout
