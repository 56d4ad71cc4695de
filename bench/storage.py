"""What the ledger costs on disk, measured by PostgreSQL itself.

A generated ``openai-chat`` file of ``ENTRIES`` entries (4,000; the size of the outside count)
is imported by :func:`journal_app.services.journal_import` (what ``import_journal`` runs:
identifiers and search index included) and folded by ``ledger_compact`` with the offline
writer at the default fold size. Then, for every table of the ledger, recovery and audit
apps (``ledger_app_*``, ``recovery_app_*``, ``audit_app_*``), the growth the import and fold
caused, measured before and after on the same database:

* **on disk**: ``pg_total_relation_size`` (heap, every index, TOAST and its index), split
  into heap, indexes and TOAST;
* **row data**: ``sum(pg_column_size(t.*))`` of the table's rows (what the rows hold,
  without page overhead, indexes or free space).

Both over the bytes of every delta of the journal's folds (``octet_length(delta)``, the
canonical JSON the ledger replays from). Goals: row data at most 3x the
deltas, on disk at most 5x. The per-table figures say what would cut it. PostgreSQL only
(``{"skipped": ...}`` elsewhere). ``ENTRIES`` can be set with ``BENCH_STORAGE_ENTRIES``.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from django.conf import settings
from django.db import connection
from django.test import override_settings

#: the entries of the generated session (the outside count's size)
ENTRIES = 4_000
#: goals: row data and on-disk bytes over the deltas' bytes
GOAL_ROWS = 3.0
GOAL_DISK = 5.0
PREFIXES = ("ledger_app_", "recovery_app_", "audit_app_")


def tables() -> list[str]:
    """The ledger, recovery and audit tables of the current database."""
    with connection.cursor() as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        names = [r[0] for r in cur.fetchall()]
    return sorted(n for n in names if n.startswith(PREFIXES))


def sizes() -> dict[str, dict[str, int]]:
    """Per table: ``total`` (pg_total_relation_size), ``heap``, ``indexes``, ``toast``
    (the rest: TOAST and its index, free space map, visibility map of the heap aside) and
    ``rows`` (sum of pg_column_size of every row), bytes."""
    out = {}
    with connection.cursor() as cur:
        for name in tables():
            cur.execute(
                "SELECT pg_total_relation_size(%s), pg_relation_size(%s), pg_indexes_size(%s)",
                [name, name, name],
            )
            total, heap, indexes = cur.fetchone()
            cur.execute(f'SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM "{name}" t')
            (rows,) = cur.fetchone()
            out[name] = {
                "total": int(total),
                "heap": int(heap),
                "indexes": int(indexes),
                "toast": int(total) - int(heap) - int(indexes),
                "rows": int(rows),
            }
    return out


def growth(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict:
    """``after - before`` per table and figure; tables that did not grow are left out."""
    out = {}
    for name, figures in after.items():
        base = before.get(name, {})
        d = {k: v - base.get(k, 0) for k, v in figures.items()}
        if any(d.values()):
            out[name] = d
    return out


#: the figures of the last :func:`measure` in this process, by entries: ``bench ingest``
#: measures storage around its own whole import (the same import and fold), and ``bench
#: storage`` reports them instead of importing the same file again (the 10-minute budget)
LAST: dict[int, dict[str, Any]] = {}


def measure(before: dict[str, dict[str, int]], journal: Any, requested: int) -> dict[str, Any]:
    """The storage figures of ``journal`` (imported and folded after ``before`` was taken
    with :func:`sizes`), printed; kept in :data:`LAST` under ``requested`` entries."""
    from ledger_app.models import Fold

    with connection.cursor() as cur:
        cur.execute(
            f"SELECT coalesce(sum(octet_length(delta)), 0), count(*) FROM {Fold._meta.db_table} "
            "WHERE journal_id = %s",
            [journal.pk],
        )
        deltas, folds = (int(x) for x in cur.fetchone())
    grown = growth(before, sizes())
    disk = sum(t["total"] for t in grown.values())
    rows = sum(t["rows"] for t in grown.values())
    out = {
        "entries": journal.head_seq,
        "folds": folds,
        "delta_bytes": deltas,
        "disk_bytes": disk,
        "row_bytes": rows,
        "disk_over_deltas": disk / max(1, deltas),
        "rows_over_deltas": rows / max(1, deltas),
        "tables": grown,
    }
    LAST[requested] = out
    return out


def _print(r: dict[str, Any]) -> None:
    print(
        f"storage of {r['entries']:,} imported entries, {r['folds']} folds: deltas "
        f"{r['delta_bytes']:,} bytes; on disk {r['disk_bytes']:,} bytes = "
        f"{r['disk_over_deltas']:.2f}x; row data {r['row_bytes']:,} bytes = "
        f"{r['rows_over_deltas']:.2f}x"
    )
    print(
        f"  {'table':<40} {'on disk':>12} {'heap':>11} {'indexes':>11} {'toast':>11} "
        f"{'rows':>11} {'x deltas':>8}"
    )
    for name, t in sorted(r["tables"].items(), key=lambda kv: -kv[1]["total"]):
        print(
            f"  {name:<40} {t['total']:>12,} {t['heap']:>11,} {t['indexes']:>11,} "
            f"{t['toast']:>11,} {t['rows']:>11,} {t['total'] / max(1, r['delta_bytes']):>8.2f}"
        )


def run(small: bool = False) -> dict[str, Any]:
    """Import, fold, measure and print (or report what ``bench ingest`` measured around the
    same import in this run); return the figures with their summary rows."""
    if connection.vendor != "postgresql":
        return {"skipped": f"pg_total_relation_size needs PostgreSQL, not {connection.vendor}"}
    from bench.ingest import import_file, timed_import
    from ledger_app.services import ledger_compact

    n = int(os.environ.get("BENCH_STORAGE_ENTRIES") or (1_000 if small else ENTRIES))
    r = LAST.get(n)
    if r is None:
        fold_tokens = settings.LEDGER_FOLD_THRESHOLD_TOKENS
        with tempfile.TemporaryDirectory(prefix="bench-storage-") as folder:
            path, _ = import_file(n, directory=folder)
            before = sizes()
            with override_settings(MEDIA_ROOT=folder):
                imported, _ = timed_import(path)
                ledger_compact(journal=imported.journal, writer="offline", fold_tokens=fold_tokens)
        r = measure(before, imported.journal, n)
    else:
        print("(measured around the whole import of `bench ingest` in this run)")
    _print(r)
    deltas = r["delta_bytes"]
    top = sorted(r["tables"].items(), key=lambda kv: -kv[1]["total"])[:3]
    largest = ", ".join(f"{k} {v['total'] / max(1, deltas):.2f}x" for k, v in top)
    entries = r["entries"]
    return {
        **r,
        "summary": [
            {
                "metric": f"ledger storage on disk / deltas, {entries:,} entries",
                "what": "pg_total_relation_size growth (heap + indexes + TOAST) of every ledger, "
                f"recovery and audit table after import + compact; largest: {largest} | "
                "baseline: octet_length of the journal's deltas",
                "value": r["disk_bytes"],
                "unit": "bytes",
                "baseline": deltas,
                "ratio": r["disk_over_deltas"],
                "target": f"<= {GOAL_DISK:g}x",
                "met": r["disk_over_deltas"] <= GOAL_DISK,
            },
            {
                "metric": f"ledger row data / deltas, {entries:,} entries",
                "what": "sum(pg_column_size(row)) growth of the same tables (no indexes, no page "
                "overhead) | baseline: octet_length of the journal's deltas",
                "value": r["row_bytes"],
                "unit": "bytes",
                "baseline": deltas,
                "ratio": r["rows_over_deltas"],
                "target": f"<= {GOAL_ROWS:g}x",
                "met": r["rows_over_deltas"] <= GOAL_ROWS,
            },
        ],
    }
