"""``journal_verify`` throughput against a raw fetch + SHA-256 of the same rows, and its peak memory.

Throughput: a synthetic journal (:mod:`bench.generator`, 20,000 entries; 2,000
with ``--small``) appended through ``journal_append`` (so it holds chunks and artifacts),
then ``journal_app.services.journal_verify`` timed over it. Baselines measured in the same
run over the same bytes (every entry body and metadata, every artifact's stored bytes):

* ``fetch + hashlib``: one ``sha256`` per body, metadata and artifact, the bytes read by a
  plain psycopg server-side cursor first (the honest limit: the bytes must come out of the
  database; the target is at least half of its rate);
* ``hashlib``: the same hashes over bytes already in memory (for reference).

Memory: the peak resident set a fresh process adds while it verifies (Linux: the high-water
mark ``VmHWM`` is reset through ``/proc/self/clear_refs`` just before, see
:func:`bench.memory.peak_reset`; elsewhere ``ru_maxrss``) a journal of ``memory_entries``
(100,000 by default, 1,000,000 with ``--full``, 50,000 with ``--small``) and of a tenth of
that. Those journals are written straight into the tables with COPY
(:func:`bench.ingest.load_prepared`, rows made by the same ``prepare_entries``) with bodies
at 5% of the corpus sizes, so the figure is about entry count. Flat (streaming) means
the peak does not grow with the journal: the fitted exponent of peak on entries is near 0.

The tables are ``ANALYZE``d after loading (:func:`bench.ingest.analyze_tables`): with stale
statistics the planner misjudges the journal's size (``journal_verify`` streams it through
server-side cursors in seq order).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.test import override_settings

from bench.generator import session
from bench.ingest import analyze_tables, derived_queued, load_session, new_journal
from journal_app.models import Artifact, Entry, Journal
from journal_app.services import journal_append, journal_verify

TARGET = 0.5
ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
import django
django.setup()
from bench.memory import peak_reset, rss_kb
from journal_app.models import Journal
from journal_app.services import journal_verify
journal = Journal.objects.select_related("session__tenant").get(pk=int(sys.argv[1]))
before = peak_reset()
t0 = time.perf_counter()
report = journal_verify(journals=[journal])
seconds = time.perf_counter() - t0
print(json.dumps({"ok": report.ok, "entries": report.entries, "seconds": seconds,
                  "rss_before_kb": before, "peak_kb": rss_kb("VmHWM")}))
"""


def load_journal(n: int, *, seed: int = 11, size_scale: float = 0.05) -> Journal:
    """A journal of about ``n`` synthetic entries written with COPY, streamed in batches."""
    journal = new_journal(f"verify-{n}")
    load_session(journal, n, seed=seed, size_scale=size_scale)
    return journal


def _child(journal: Journal) -> dict[str, Any]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "false",
        "DATABASE_URL": os.environ.get("BENCH_DATABASE_URL", os.environ.get("DATABASE_URL", "")),
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(journal.pk)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _same_bytes(journal: Journal) -> list[bytes]:
    rows = Entry.objects.filter(journal=journal).order_by("seq").values_list("body", "meta")
    blobs = [
        b for body, meta in rows.iterator(chunk_size=2000) for b in (body.encode(), meta.encode())
    ]
    for a in Artifact.objects.filter(entries__journal=journal).distinct():
        with default_storage.open(a.storage_name, "rb") as fh:
            blobs.append(fh.read())
    return blobs


def _fetch_and_hash(journal: Journal) -> float:
    t0 = time.perf_counter()
    connection.ensure_connection()
    pg = connection.vendor == "postgresql"
    sql = f"SELECT body, meta FROM {Entry._meta.db_table} WHERE journal_id = {int(journal.pk)} ORDER BY seq"
    with transaction.atomic():
        raw = (
            connection.connection.cursor(name="bench_verify")
            if pg
            else connection.connection.cursor()
        )
        if pg:
            raw.itersize = 1000
        raw.execute(sql)
        for body, meta in raw:
            hashlib.sha256(body.encode()).digest()
            hashlib.sha256(meta.encode()).digest()
        raw.close()
    for a in Artifact.objects.filter(entries__journal=journal).distinct():
        with default_storage.open(a.storage_name, "rb") as fh:
            hashlib.sha256(fh.read()).digest()
    return time.perf_counter() - t0


def run(
    *,
    small: bool = False,
    full: bool = False,
    entries: int | None = None,
    memory_entries: int | None = None,
) -> dict[str, Any]:
    """Measure and print; return the figures (the runner writes them to JSON).

    Args:
        small: 2,000 entries for throughput and 50,000 (and 5,000) for memory.
        full: 1,000,000 (and 100,000) entries for memory; by default 100,000 (and 10,000),
            which keeps ``make bench`` within 10 minutes.
        entries: throughput journal size (overrides ``small``).
        memory_entries: the larger memory journal (a tenth of it is measured too).
    """
    n = entries or (2_000 if small else 20_000)
    big = memory_entries or (50_000 if small else 1_000_000 if full else 100_000)
    with (
        tempfile.TemporaryDirectory(prefix="bench-media-") as media,
        override_settings(LEDGER_FOLD_THRESHOLD_TOKENS=10**12, MEDIA_ROOT=media),
    ):
        journal = new_journal("verify")
        items = session(n, seed=9)
        with derived_queued():  # identifiers and search index: not what is measured here
            for start in range(0, len(items), 1000):
                journal_append(journal=journal, items=items[start : start + 1000])
        journal = Journal.objects.select_related("session__tenant").get(pk=journal.pk)
        analyze_tables()
        t0 = time.perf_counter()
        report = journal_verify(journals=[journal])
        verify_s = time.perf_counter() - t0
        assert report.ok, report.first_failure
        blobs = _same_bytes(journal)
        t0 = time.perf_counter()
        for blob in blobs:
            hashlib.sha256(blob).digest()
        hash_s = time.perf_counter() - t0
        fetch_s = _fetch_and_hash(journal)
    mb = sum(len(b) for b in blobs) / 1e6
    ratio = fetch_s / verify_s
    print(f"{report.entries:,} entries, {report.chunks:,} chunks, {mb:.1f} MB hashed")
    print(f"{'path':<30} {'seconds':>9} {'entries/s':>10} {'MB/s':>8}")
    for label, secs in (
        ("journal_verify", verify_s),
        ("raw hashlib, bytes in memory", hash_s),
        ("raw fetch + hashlib", fetch_s),
    ):
        print(f"{label:<30} {secs:>9.3f} {report.entries / secs:>10,.0f} {mb / secs:>8.1f}")
    verdict = "met" if ratio >= TARGET else f"missed by {TARGET / ratio:.2f}x"
    print(f"ratio verify / (fetch + hashlib) = {ratio:.3f} (target >= {TARGET}: {verdict}); "
          f"verify / hashlib in memory = {hash_s / verify_s:.3f}")  # fmt: skip

    sizes = sorted({max(1, big // 10), big})
    memory = []
    for size in sizes:
        t0 = time.perf_counter()
        mj = load_journal(size)
        load_s = time.perf_counter() - t0
        child = _child(mj)
        assert child["ok"], child
        grown = (child["peak_kb"] - child["rss_before_kb"]) / 1024
        memory.append(
            {"entries": child["entries"], "load_seconds": load_s, **child, "peak_growth_mb": grown}
        )
        print(
            f"verify of {child['entries']:,} entries in a fresh process: peak RSS "
            f"{child['peak_kb'] / 1024:.0f} MB (+{grown:.1f} MB during verify), "
            f"{child['seconds']:.1f} s ({load_s:.0f} s to load)"
        )
    exponent = None
    if len(memory) == 2:
        a, b = memory
        exponent = math.log(
            max(b["peak_growth_mb"], 1.0) / max(a["peak_growth_mb"], 1.0)
        ) / math.log(b["entries"] / a["entries"])
        print(f"peak growth exponent in entries: {exponent:.2f} (flat: about 0; linear: 1)")
    return {
        "entries": report.entries,
        "chunks": report.chunks,
        "megabytes": mb,
        "verify_seconds": verify_s,
        "hashlib_seconds": hash_s,
        "fetch_hashlib_seconds": fetch_s,
        "ratio": ratio,
        "ratio_hashlib": hash_s / verify_s,
        "target": TARGET,
        "memory": memory,
        "memory_exponent": exponent,
        "summary": [
            {
                "metric": f"verify {report.entries:,} entries vs fetch + hashlib",
                "what": "journal_verify MB/s over every body, metadata and artifact byte | "
                "baseline: a plain psycopg server-side fetch of the same bytes + one sha256 each",
                "value": mb / verify_s,
                "unit": "MB/s",
                "baseline": mb / fetch_s,
                "ratio": ratio,
                "target": ">= 1/2 of fetch + hashlib",
                "met": ratio >= TARGET,
            },
            {
                "metric": "verify vs hashlib, bytes in memory",
                "what": "journal_verify MB/s as above | baseline: sha256 of the same bytes "
                "already in memory (reference: no database read)",
                "value": mb / verify_s,
                "unit": "MB/s",
                "baseline": mb / hash_s,
                "ratio": hash_s / verify_s,
            },
            *(
                {
                    "metric": f"verify peak growth, {m['entries']:,} entries",
                    "what": "peak resident set a fresh process adds while journal_verify "
                    "streams the journal (VmHWM reset just before) | no baseline",
                    "value": m["peak_growth_mb"],
                    "unit": "MB",
                }
                for m in memory
            ),
            {
                "metric": "verify memory exponent",
                "what": "least-squares slope of log(peak growth) over log(entries) of the "
                "rows above | flat is 0",
                "value": exponent,
                "target": "flat (<= 0.2)",
                "met": exponent is not None and exponent <= 0.2,
            },
        ],
    }
