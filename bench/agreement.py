"""Does an outside count agree with the ``ingest`` and ``storage`` rows?

Runs ``bench/outside.py`` (which imports nothing of the bench or the product: the user's
commands as subprocesses, plain SQL through ``psycopg``) in a subprocess over the same
generated file the whole-import row imported in this run (regenerated with the same seed;
its SHA-256 is checked against the imported one's), in the same scratch database, and
compares: the whole import's entries/s, its COPY baseline's entries/s and the ratio of the
two (``ingest``), and on disk / deltas and row data / deltas (``storage``). A row agrees when
the two figures are within ``TOLERANCE`` (10%) of each other. PostgreSQL only. When
``ingest`` did not run in this process, its whole import runs first.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from django.db import connection

#: how far apart (relative to the bench's figure) the two counts may be
TOLERANCE = 0.10


def compare(bench: float, outside: float) -> tuple[float, bool]:
    """``(outside / bench, agrees)``: agrees when ``|outside / bench - 1| <= TOLERANCE``."""
    ratio = outside / bench if bench else float("inf")
    return ratio, abs(ratio - 1) <= TOLERANCE


def rows(ours: dict[str, Any], stored: dict[str, Any], outside: dict[str, Any]) -> list[dict]:
    """The table rows: per compared figure, the bench's value as the baseline and the
    outside count's as the measured value; ``met`` when they agree within 10%."""
    figures = [
        ("whole import", ours["entries"] / ours["import_seconds"],
         outside["import_entries_per_s"], "entries/s"),
        ("COPY baseline of the import", ours["entries"] / ours["copy_seconds"],
         outside["copy_entries_per_s"], "entries/s"),
        ("whole import / COPY", ours["ratio"], outside["import_over_copy"], ""),
        ("whole import, CPU", ours["entries"] / ours["import_cpu_seconds"],
         outside["import_entries_per_cpu_s"], "entries/CPU s"),
        ("COPY baseline, CPU", ours["entries"] / ours["copy_cpu_seconds"],
         outside["copy_entries_per_cpu_s"], "entries/CPU s"),
        ("whole import / COPY, CPU", ours["cpu_ratio"], outside["import_over_copy_cpu"], ""),
        ("storage on disk / deltas", stored["disk_over_deltas"],
         outside["disk_over_deltas"], "x"),
        ("storage row data / deltas", stored["rows_over_deltas"],
         outside["rows_over_deltas"], "x"),
    ]  # fmt: skip
    out = []
    for label, bench, other, unit in figures:
        ratio, agrees = compare(bench, other)
        out.append(
            {
                "metric": f"outside count: {label}",
                "value": other,
                "unit": unit,
                "baseline": bench,
                "ratio": ratio,
                "target": "within 10%",
                "met": agrees,
                "what": f"{label} as bench/outside.py counts it (manage.py import_journal and "
                "compact as subprocesses, plain SQL) | baseline: the bench's own figure, same run",
            }
        )
    out[0]["what"] = (
        "bench/outside.py (no bench or product import): the import_journal command's wall "
        "time minus a one-message import's, COPY of the stored rows read back, "
        "pg_total_relation_size growth | baseline: the bench's own row in this run"
    )
    return out


def run(small: bool = False, full: bool = False) -> dict[str, Any]:
    """Run the outside count over this run's whole-import file and compare (see module)."""
    if connection.vendor != "postgresql":
        return {"skipped": f"the outside count needs PostgreSQL, not {connection.vendor}"}
    from bench import ingest, storage

    n = 1_000 if small else ingest.IMPORT_ENTRIES[1] if full else ingest.IMPORT_ENTRIES[0]
    ours = ingest.LAST_IMPORT.get(n) or ingest.whole_import(n)
    stored = storage.LAST[n]
    with tempfile.TemporaryDirectory(prefix="bench-outside-") as folder:
        path, _ = ingest.import_file(n, directory=folder)
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        assert digest == ours["file_sha256"], "the regenerated file differs from the imported"
        done = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("outside.py")), path, "--json",
             "--database-url", os.environ["BENCH_DATABASE_URL"]],
            capture_output=True, text=True,
        )  # fmt: skip
    if done.returncode != 0:  # the FAILED row names the outside script's own last words
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"bench/outside.py exited {done.returncode}: {tail}")
    outside = json.loads(done.stdout.strip().splitlines()[-1])
    summary = rows(ours, stored, outside)
    for r in summary:
        print(
            f"{r['metric']:<45} bench {r['baseline']:>12.4g}  outside {r['value']:>12.4g}  "
            f"outside/bench {r['ratio']:.3f} {'agrees' if r['met'] else 'DISAGREES'}"
        )
    return {"outside": outside, "summary": summary}
