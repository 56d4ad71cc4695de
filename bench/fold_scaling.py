"""Fold cost against ledger size (issue 18): deltas and checkpoints, not a state per fold.

On generated sessions (:mod:`bench.generator`), with the offline writer and no recovery scan:

* **flatness**: a long session folded 24 entries at a time (``ledger_fold(upto=...)``);
  median time of the last 20 folds over the median of the first 20, and the largest
  rolling 20-fold median over the first (checkpoint folds included);
* **one fold at size**: the same folds with the writer's time (``compose``) taken out,
  loss report included: median and p95 of the last 20, and the ledger's fact count there;
* **compact exponent**: ``ledger_compact`` of a small and a large session, each in a
  fresh journal, ``log(t_large / t_small) / log(n_large / n_small)``;
* **storage**: everything the ledger stores for the session (deltas, manifests,
  checkpoints, accumulators, fact rows, term index) over the size of all deltas;
* **state after any fold**: p95 of what the facts page and the API read for a random
  fold (count, first page of 100 facts, one fact), and of a full rebuild (info);
* ``verify_ledger`` on the large session: clean, and its time.

Sizes: ``BENCH_FOLD_ENTRIES`` (default 10,000; 2,000 with ``--small``) and a tenth of it
for the small compact. The issue asks for 100k entries; 10k keeps ``make bench`` within
its 10 minutes on a 2-core machine (set the variable to measure 100k).
"""

from __future__ import annotations

import math
import os
import random
import statistics
import tempfile
import time
from typing import Any

from django.db.models import Sum
from django.db.models.functions import Length
from django.test.utils import override_settings

from bench.generator import iter_session
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app import selectors
from ledger_app.models import Fold, LedgerFact, LedgerTerm
from ledger_app.services import fold as fold_module
from ledger_app.services import ledger_compact, ledger_fold, ledger_verify

FOLD_ENTRIES = 24
WINDOW = 20


def _journal(key: str, n: int, seed: int) -> Any:
    tenant = tenant_ensure(slug="bench-fold")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key=key))
    items = list(iter_session(n, seed=seed))
    for i in range(0, len(items), 2000):
        journal_append(journal=journal, items=items[i : i + 2000])
    journal.refresh_from_db()
    return journal


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _fold_loop(journal: Any) -> tuple[list[float], list[float]]:
    """Fold 24 entries at a time; (wall seconds, seconds without the writer) per fold."""
    writer_time = [0.0]
    compose = fold_module.compose

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return compose(*args, **kwargs)
        finally:
            writer_time[0] += time.perf_counter() - t0

    fold_module.compose = timed  # type: ignore[assignment]
    walls, cores = [], []
    try:
        upto = 0
        while upto < journal.head_seq:
            upto += FOLD_ENTRIES
            writer_time[0] = 0.0
            t0 = time.perf_counter()
            result = ledger_fold(journal=journal, upto=upto, writer="offline", recover=False)
            wall = time.perf_counter() - t0
            if result.fold is not None and result.created:
                walls.append(wall)
                cores.append(wall - writer_time[0])
                upto = max(upto, result.fold.seq_end or upto)
    finally:
        fold_module.compose = compose  # type: ignore[assignment]
    return walls, cores


def _storage(journal: Any) -> dict[str, int]:
    folds = Fold.objects.filter(journal=journal).aggregate(
        delta=Sum(Length("delta")), state=Sum(Length("state")), acc=Sum(Length("state_acc"))
    )
    manifests = sum(
        len(str(m)) for m in Fold.objects.filter(journal=journal).values_list("manifest", flat=True)
    )
    rows = LedgerFact.objects.filter(journal=journal).aggregate(
        data=Sum(Length("data")), text=Sum(Length("text"))
    )
    n_rows = LedgerFact.objects.filter(journal=journal).count()
    terms = LedgerTerm.objects.filter(journal=journal).count()
    return {
        "deltas": int(folds["delta"] or 0),
        "manifests": manifests,
        "checkpoints": int(folds["state"] or 0),
        "accumulators": int(folds["acc"] or 0),
        "fact_rows": int(rows["data"] or 0) + int(rows["text"] or 0) + 120 * n_rows,
        "terms": 90 * terms,
    }


def _reads(journal: Any, samples: int = 60) -> tuple[list[float], list[float]]:
    numbers = list(Fold.objects.filter(journal=journal).values_list("number", flat=True))
    rng = random.Random(18)
    page, rebuild = [], []
    for i in range(samples):
        number = rng.choice(numbers)
        t0 = time.perf_counter()
        fold = selectors.fold_at(journal, number)
        selection = selectors.facts_at(journal, fold, chosen={})
        shown = list(selection.shown[:100])
        if shown:
            selectors.fact_at(journal, fold, shown[0]["id"])
        page.append(time.perf_counter() - t0)
        if i < samples // 3:
            t0 = time.perf_counter()
            selectors.state_at(fold)
            rebuild.append(time.perf_counter() - t0)
    return page, rebuild


def run(small: bool = False) -> dict[str, Any]:
    """Measure and print; return the figures with their summary rows."""
    big = int(os.environ.get("BENCH_FOLD_ENTRIES") or (2_000 if small else 10_000))
    little = max(1_000, big // 10)
    with (
        tempfile.TemporaryDirectory(prefix="bench-media-") as media,
        override_settings(LEDGER_FOLD_THRESHOLD_TOKENS=10**12, MEDIA_ROOT=media),
    ):
        journal = _journal("fold-scaling", big, seed=18)
        t0 = time.perf_counter()
        walls, cores = _fold_loop(journal)
        loop_s = time.perf_counter() - t0
        facts_now = LedgerFact.objects.filter(journal=journal, until__isnull=True).count()
        first = statistics.median(walls[:WINDOW])
        last = statistics.median(walls[-WINDOW:])
        rolling = max(
            statistics.median(walls[i : i + WINDOW])
            for i in range(0, max(1, len(walls) - WINDOW + 1))
        )
        t0 = time.perf_counter()
        report = ledger_verify(journal=journal)
        verify_s = time.perf_counter() - t0
        sizes = _storage(journal)
        total = sum(sizes.values())
        page, rebuild = _reads(journal)

        compact: dict[int, float] = {}
        for n, key in ((little, "compact-small"), (big, "compact-large")):
            j = _journal(key, n, seed=19)
            t0 = time.perf_counter()
            ledger_compact(journal=j, writer="offline")
            compact[n] = time.perf_counter() - t0
        exponent = math.log(compact[big] / compact[little]) / math.log(big / little)

    core_ms = [c * 1000 for c in cores[-WINDOW:]]
    result: dict[str, Any] = {
        "entries": journal.head_seq,
        "folds": len(walls),
        "fold_loop_s": loop_s,
        "facts_at_end": facts_now,
        "fold_first_median_ms": first * 1000,
        "fold_last_median_ms": last * 1000,
        "fold_max_rolling_median_ms": rolling * 1000,
        "fold_max_single_ms": max(walls) * 1000,
        "core_median_ms": statistics.median(core_ms),
        "core_p95_ms": _p(core_ms, 0.95),
        "compact_s": {str(k): v for k, v in compact.items()},
        "compact_exponent": exponent,
        "storage_bytes": sizes,
        "storage_over_deltas": total / max(1, sizes["deltas"]),
        "read_p95_ms": _p(page, 0.95) * 1000,
        "rebuild_p95_ms": _p(rebuild, 0.95) * 1000,
        "verify_ok": report.ok,
        "verify_s": verify_s,
        "checkpoints": report.checkpoints,
    }
    print(
        f"fold scaling: {journal.head_seq:,} entries, {len(walls)} folds of {FOLD_ENTRIES} "
        f"entries in {loop_s:.1f} s, {facts_now:,} facts at the end"
    )
    print(
        f"  fold time: first {first * 1000:.1f} ms, last {last * 1000:.1f} ms (medians of "
        f"{WINDOW}), worst rolling median {rolling * 1000:.1f} ms, worst single fold "
        f"{max(walls) * 1000:.1f} ms; without the writer: median {result['core_median_ms']:.1f} "
        f"ms, p95 {result['core_p95_ms']:.1f} ms"
    )
    print(
        f"  compact: {little:,} entries {compact[little]:.1f} s, {big:,} entries "
        f"{compact[big]:.1f} s, exponent {exponent:.2f}"
    )
    print(
        f"  storage: {total:,} bytes = {result['storage_over_deltas']:.2f} x the deltas ({sizes})"
    )
    print(
        f"  state after a random fold: page read p95 {result['read_p95_ms']:.1f} ms, full "
        f"rebuild p95 {result['rebuild_p95_ms']:.1f} ms"
    )
    print(
        f"  verify_ledger: {'clean' if report.ok else report.mismatch}, {report.checkpoints} "
        f"checkpoints, {verify_s:.1f} s"
    )
    at = f"{journal.head_seq // 1000}k entries"
    result["summary"] = [
        {
            "metric": f"fold k / fold 1, last {WINDOW} vs first {WINDOW} ({at})",
            "value": last / first,
            "baseline": first * 1000,
            "ratio": last / first,
            "target": "<= 1.5",
            "met": last / first <= 1.5,
        },
        {
            "metric": f"fold k / fold 1, worst rolling median of {WINDOW} ({at})",
            "value": rolling / first,
            "baseline": first * 1000,
            "ratio": rolling / first,
            "target": "<= 1.5",
            "met": rolling / first <= 1.5,
        },
        {
            "metric": f"24-entry fold without writer, p95 ms ({facts_now:,} facts)",
            "value": result["core_p95_ms"],
            "unit": "ms",
            "target": "<= 50",
            "met": result["core_p95_ms"] <= 50,
        },
        {
            "metric": f"compact exponent ({little:,} -> {big:,} entries)",
            "value": exponent,
            "baseline": compact[little],
            "ratio": compact[big] / compact[little],
            "target": "<= 1.1",
            "met": exponent <= 1.1,
        },
        {
            "metric": f"ledger storage / all deltas ({at})",
            "value": result["storage_over_deltas"],
            "target": "< 3",
            "met": result["storage_over_deltas"] < 3,
        },
        {
            "metric": f"state after any fold, page/API read p95 ms ({at})",
            "value": result["read_p95_ms"],
            "unit": "ms",
            "target": "<= 50",
            "met": result["read_p95_ms"] <= 50,
        },
        {
            "metric": f"verify_ledger clean ({at})",
            "value": report.ok,
            "target": "clean",
            "met": report.ok,
        },
    ]
    return result
