"""Peak memory of importing the largest corpus source, and how it grows with size (streaming
import: goal flat growth, at most +200 MB).

Each import runs ``journal_app.services.journal_import`` in a fresh process against the
bench database; the figure is the peak resident set the import adds (Linux: the high-water
mark ``VmHWM`` reset through ``/proc/self/clear_refs`` just before, minus ``VmRSS`` then;
elsewhere ``ru_maxrss``), read twice: at the end of the import's transaction, and after
the commit ran the post-commit derivation (identifiers, search index). No fold runs inside
(the fold threshold is raised for the child), and the tokenizer is loaded before the mark
is reset (about 80 MB once per process, not per import).

Sources: the largest source in ``tests/fixtures/corpus`` (by bytes; a folder export counts
as the sum of its files), then synthetic Claude Code JSONL transcripts of 10, 20 and 40 MB
(5 and 10 MB with ``--small``; the issue's 20, 80 and 400 MB with ``BENCH_IMPORT_MB=20,80,400``,
about 0.5 s per MB on this 2-core machine since the hashing and identifier rework, so
several minutes: not by default) written entry by entry by
:func:`bench.generator.write_large` from the corpus-measured profile. The child imports
through ``journal_import`` in the embedded default, so the post-commit derivation
(identifiers, search index) runs in the same process and counts too. The fitted exponent of
peak growth on file size says whether the import streams (about 0) or holds the whole source
in memory (about 1; 0.88 before the streaming import). Baseline: the file size itself (peak / file bytes).
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.generator import write_large

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus"

CHILD = """
import json, sys, uuid
import django
django.setup()
from django.db import transaction
from bench.memory import peak_reset, rss_kb
from journal_app.services import journal_import
from journal_app.tokens import count_tokens
count_tokens("warm up")  # the tokenizer's tables are loaded once per process, not per import
before = peak_reset()
with transaction.atomic():  # post-commit work (identifiers, search index) runs at its exit
    result = journal_import(
        path=sys.argv[1], tenant="bench-memory", session="m-" + uuid.uuid4().hex[:12]
    )
    import_peak = rss_kb("VmHWM")
print(json.dumps({"entries": sum(j.head_seq for j in result.journals),
                  "rss_before_kb": before, "import_peak_kb": import_peak,
                  "peak_kb": rss_kb("VmHWM")}))
"""


def rss_kb(field: str = "VmRSS") -> int:
    """``VmRSS`` or ``VmHWM`` of this process in KiB (``ru_maxrss`` where /proc is missing)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_reset() -> int:
    """Reset the peak-RSS mark (Linux ``clear_refs``) and return the current RSS in KiB."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    return rss_kb("VmRSS")


def source_bytes(path: Path) -> int:
    """Bytes of a source file, or of every file in a folder source."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def largest_source(corpus: Path = CORPUS) -> Path:
    """The corpus source (file, or export folder) with the most bytes."""
    files = [
        p
        for p in corpus.glob("*/*")
        if p.is_file()
        and p.suffix in (".json", ".jsonl", ".traj")
        and p.parent.name != "opencode-export"
    ]
    folders = [p for p in (corpus / "opencode-export").glob("*") if p.is_dir()]
    return max(files + folders, key=source_bytes)


def measure_import(path: Path) -> dict[str, Any]:
    """Import ``path`` in a fresh process; return entries, peak and file figures (MB)."""
    with tempfile.TemporaryDirectory(prefix="bench-media-") as media:
        return _measure_import(path, media)


def _measure_import(path: Path, media: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "false",
        "DATABASE_URL": os.environ.get("BENCH_DATABASE_URL", os.environ.get("DATABASE_URL", "")),
        "LEDGER_FOLD_THRESHOLD_TOKENS": str(10**12),
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY") or "bench-" + "x" * 60,
        "MEDIA_ROOT": media,
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    child = json.loads(out.stdout.strip().splitlines()[-1])
    file_mb = source_bytes(path) / 1e6
    growth = (child["peak_kb"] - child["rss_before_kb"]) / 1024
    return {
        "source": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name,
        "file_mb": file_mb,
        "entries": child["entries"],
        "import_growth_mb": (child["import_peak_kb"] - child["rss_before_kb"]) / 1024,
        "peak_growth_mb": growth,
        "peak_per_file_byte": growth / file_mb if file_mb else None,
    }


#: the goal: peak growth flat in file size (exponent) and at most this many MB
GOAL_EXPONENT = 0.1
GOAL_PEAK_MB = 200.0


def sizes_mb(small: bool) -> list[float]:
    """Synthetic transcript sizes in MB: ``BENCH_IMPORT_MB`` (comma separated) or defaults."""
    given = os.environ.get("BENCH_IMPORT_MB", "")
    if given.strip():
        return [float(x) for x in given.split(",") if x.strip()]
    return [5.0, 10.0] if small else [10.0, 20.0, 40.0]


def growth_exponent(rows: list[dict[str, Any]], key: str = "peak_growth_mb") -> float:
    """Least-squares slope of log(``key`` MB) on log(file MB) (peaks below 1 MB as 1)."""
    xs = [math.log(r["file_mb"]) for r in rows]
    ys = [math.log(max(r[key], 1.0)) for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def run(*, small: bool = False) -> dict[str, Any]:
    """Measure and print; return the figures (the runner writes them to JSON)."""
    largest = measure_import(largest_source())
    rows = [largest]
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        for mb in sizes_mb(small):
            path = Path(tmp) / f"synthetic-{mb:g}mb.jsonl"
            write_large(path, int(mb * 1e6), "claude-code", seed=12)
            rows.append(measure_import(path))
            path.unlink()
    print(
        f"{'source':<60} {'entries':>8} {'file MB':>8} {'import +MB':>10} {'peak +MB':>9} "
        f"{'peak/file':>9}"
    )
    for r in rows:
        print(
            f"{r['source'][-60:]:<60} {r['entries']:>8,} {r['file_mb']:>8.1f} "
            f"{r['import_growth_mb']:>10.1f} {r['peak_growth_mb']:>9.1f} "
            f"{r['peak_per_file_byte']:>9.2f}"
        )
    synthetic = rows[1:]
    many = len(synthetic) > 1
    exponent = growth_exponent(synthetic) if many else 0.0
    import_exponent = growth_exponent(synthetic, "import_growth_mb") if many else 0.0
    worst = max(r["peak_growth_mb"] for r in rows)
    print(
        f"peak growth exponent in file size: import {import_exponent:.2f}, with the "
        f"post-commit derivation {exponent:.2f} (streaming: about 0; whole file: 1)"
    )
    return {
        "largest": largest,
        "synthetic": synthetic,
        "exponent": exponent,
        "import_exponent": import_exponent,
        "summary": [
            {
                "metric": f"import peak, {Path(largest['source']).name}",
                "what": "peak resident set a fresh process adds importing the largest corpus "
                "source (VmHWM reset just before) | baseline: the file's size, MB",
                "value": largest["peak_growth_mb"],
                "unit": "MB",
                "baseline": largest["file_mb"],
                "ratio": largest["peak_per_file_byte"],
            },
            *(
                {
                    "metric": f"import peak, {r['file_mb']:.0f} MB transcript",
                    "what": "the same for a generated transcript of this size | baseline: "
                    "the file's size, MB",
                    "value": r["peak_growth_mb"],
                    "unit": "MB",
                    "baseline": r["file_mb"],
                    "ratio": r["peak_per_file_byte"],
                }
                for r in synthetic
            ),
            {
                "what": "slope of log(peak) over log(file size) of the import transaction "
                "alone, the generated files above | flat is 0, whole file in memory is 1",
                "metric": "import transaction peak growth exponent ("
                + "/".join(f"{r['file_mb']:.0f}" for r in synthetic)
                + " MB)",
                "value": import_exponent,
                "target": f"<= {GOAL_EXPONENT}",
                "met": import_exponent <= GOAL_EXPONENT,
            },
            {
                "metric": "import + post-commit derivation peak growth exponent",
                "what": "the same slope over the import and its post-commit derived rows "
                "(identifiers, search index) | flat is 0",
                "value": exponent,
                "target": f"<= {GOAL_EXPONENT}",
                "met": exponent <= GOAL_EXPONENT,
            },
            {
                "metric": "import peak, largest",
                "what": "the largest peak of the rows above | target: a fixed ceiling, MB",
                "value": worst,
                "unit": "MB",
                "target": f"<= {GOAL_PEAK_MB:.0f}",
                "met": worst <= GOAL_PEAK_MB,
            },
        ],
    }
