"""Peak memory of importing the largest corpus source, and how it grows with size (issue 8).

Each import runs ``journal_app.services.journal_import`` in a fresh process against the
bench database; the figure is the peak resident set the import adds (Linux: the high-water
mark ``VmHWM`` reset through ``/proc/self/clear_refs`` just before, minus ``VmRSS`` then;
elsewhere ``ru_maxrss``). No fold runs inside (the fold threshold is raised for the child), and the tokenizer is
loaded before the mark is reset (about 80 MB once per process, not per import).

Sources: the largest source in ``tests/fixtures/corpus`` (by bytes; a folder export counts
as the sum of its files), then synthetic ``openai-chat`` files of 2,000, 8,000 and 32,000
entries (500 and 2,000 with ``--small``) from :mod:`bench.generator`. The fitted exponent of
peak growth on file size says whether the import streams (about 0) or holds the whole
source in memory (about 1). Baseline: the file size itself (peak / file bytes).
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

from bench.generator import write_openai_chat

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus"

CHILD = """
import json, sys, uuid
import django
django.setup()
from bench.memory import peak_reset, rss_kb
from journal_app.services import journal_import
from journal_app.tokens import count_tokens
count_tokens("warm up")  # the tokenizer's tables are loaded once per process, not per import
before = peak_reset()
result = journal_import(path=sys.argv[1], tenant="bench-memory", session="m-" + uuid.uuid4().hex[:12])
print(json.dumps({"entries": sum(j.head_seq for j in result.journals),
                  "rss_before_kb": before, "peak_kb": rss_kb("VmHWM")}))
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
        "peak_growth_mb": growth,
        "peak_per_file_byte": growth / file_mb if file_mb else None,
    }


def run(*, small: bool = False) -> dict[str, Any]:
    """Measure and print; return the figures (the runner writes them to JSON)."""
    largest = measure_import(largest_source())
    rows = [largest]
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        for n in (500, 2_000) if small else (2_000, 8_000, 32_000):
            path = Path(tmp) / f"synthetic-{n}.json"
            write_openai_chat(path, n, seed=12)
            rows.append(measure_import(path))
    print(f"{'source':<72} {'entries':>8} {'file MB':>8} {'peak +MB':>9} {'peak/file':>9}")
    for r in rows:
        print(
            f"{r['source'][-72:]:<72} {r['entries']:>8,} {r['file_mb']:>8.1f} "
            f"{r['peak_growth_mb']:>9.1f} {r['peak_per_file_byte']:>9.1f}"
        )
    synthetic = rows[1:]
    xs = [math.log(r["file_mb"]) for r in synthetic]
    ys = [math.log(max(r["peak_growth_mb"], 1.0)) for r in synthetic]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    exponent = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    print(f"peak growth exponent in file size: {exponent:.2f} (streaming: about 0; whole file: 1)")
    return {
        "largest": largest,
        "synthetic": synthetic,
        "exponent": exponent,
        "summary": [
            {
                "metric": f"import peak, {Path(largest['source']).name}",
                "value": largest["peak_growth_mb"],
                "unit": "MB",
                "baseline": largest["file_mb"],
                "ratio": largest["peak_per_file_byte"],
            },
            *(
                {
                    "metric": f"import peak, {r['entries']:,} synthetic entries",
                    "value": r["peak_growth_mb"],
                    "unit": "MB",
                    "baseline": r["file_mb"],
                    "ratio": r["peak_per_file_byte"],
                }
                for r in synthetic
            ),
            {
                "metric": "import memory exponent",
                "value": exponent,
                "target": "flat (<= 0.2)",
                "met": exponent <= 0.2,
            },
        ],
    }
