"""An outside count of the ``ingest`` and ``storage`` rows: what a user sees from the shell.

``python bench/outside.py FILE --database-url postgres://... [--json]``

Independent of the benchmark's measuring code on purpose (docs: ``bench/README.md``,
"The outside count"): this script imports nothing from ``bench``, Django or the product. It
runs the commands a user runs, as subprocesses, and reads PostgreSQL with plain SQL through
``psycopg``:

1. ``manage.py import_journal`` of a one-message file it writes itself, twice, timed: the
   faster is the fixed cost of a command (interpreter, Django, tokenizer, per-import queries);
2. the tables' sizes: ``pg_total_relation_size`` and ``sum(pg_column_size(t.*))`` of every
   ``ledger_app_*``, ``recovery_app_*`` and ``audit_app_*`` table;
3. ``manage.py import_journal FILE`` into a fresh session, timed, with
   ``LEDGER_FOLD_THRESHOLD_TOKENS`` raised so the import folds nothing (the fold is not part
   of the ingest row); its time minus step 1's is the import's (best of ``--tries``, 2: the
   others import the same file into fresh sessions after step 5, as the bench does);
4. ``manage.py compact TENANT/SESSION --writer offline`` at the default fold size;
5. the sizes again: the growth over ``sum(octet_length(delta))`` of the session's folds;
6. the entry and chunk rows the import stored, read back with ``COPY ... TO STDOUT`` and
   written with ``COPY ... FROM STDIN`` into tables made ``LIKE`` the real ones (indexes
   included), best of three: the COPY baseline.

Each timing is also taken in CPU seconds: a command's process and children
(``RUSAGE_CHILDREN``) plus the PostgreSQL backends it opened (tagged with ``PGAPPNAME``,
their ``/proc/<pid>/stat`` read every 50 ms), the COPY's own process and backend. On a
machine shared with other work the wall times of two runs differ by a third; the CPU
seconds are what each step costs alone.

Prints the figures (``--json``: one JSON object) and leaves the session in the database.
``bench/agreement.py`` runs this over the bench's own input file in the same run and prints
whether the two counts agree within 10%.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PREFIXES = ("ledger_app_", "recovery_app_", "audit_app_")


def table_sizes(conn: psycopg.Connection) -> dict[str, tuple[int, int]]:
    """Per ledger, recovery and audit table: (bytes on disk, bytes of row data)."""
    with conn.cursor() as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        names = sorted(r[0] for r in cur.fetchall() if r[0].startswith(PREFIXES))
        out = {}
        for name in names:
            cur.execute(
                f'SELECT pg_total_relation_size(%s), coalesce(sum(pg_column_size(t.*)), 0) FROM "{name}" t',
                [name],
            )
            disk, rows = cur.fetchone()
            out[name] = (int(disk), int(rows))
    conn.commit()
    return out


def backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` (``/proc/<pid>/stat``; OSError if gone)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def command(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``manage.py ARGS`` to its end; return ``(wall seconds, CPU seconds)`` (raise on
    failure). CPU: the command's process and its children, plus the PostgreSQL backends it
    opened (named by ``PGAPPNAME``, read from ``/proc`` every 50 ms while it runs)."""
    tag = f"outside-{uuid.uuid4().hex[:12]}"
    seen: dict[int, float] = {}
    stop = threading.Event()

    def watch() -> None:
        with psycopg.connect(env["DATABASE_URL"], autocommit=True) as conn:
            while not stop.is_set():
                rows = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [tag]
                ).fetchall()
                for (pid,) in rows:
                    with contextlib.suppress(OSError):
                        seen[pid] = backend_cpu(pid)
                stop.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env={**env, "PGAPPNAME": tag},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stop.set()
    watcher.join()
    if done.returncode:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    client = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, client + sum(seen.values())


def copy_seconds(conn: psycopg.Connection, journal_id: int, tries: int = 3) -> dict[str, Any]:
    """Best of ``tries``: COPY of the journal's stored entry and chunk rows into fresh
    tables ``LIKE`` the real ones (indexes included), the text read beforehand."""
    with conn.cursor() as cur:
        data = {}
        for table, where in (
            ("journal_app_entry", f"journal_id = {int(journal_id)}"),
            (
                "journal_app_chunk",
                f"entry_id IN (SELECT id FROM journal_app_entry WHERE journal_id = {int(journal_id)})",
            ),
        ):
            buf = bytearray()
            with cur.copy(f"COPY (SELECT * FROM {table} WHERE {where}) TO STDOUT") as copy:
                for block in copy:
                    buf += block
            data[table] = bytes(buf)
        cur.execute("SELECT count(*) FROM journal_app_entry WHERE journal_id = %s", [journal_id])
        (entries,) = cur.fetchone()
    conn.commit()
    best = best_cpu = None
    (pid,) = conn.execute("SELECT pg_backend_pid()").fetchone()
    for _ in range(tries):
        suffix = uuid.uuid4().hex[:8]
        with conn.cursor() as cur:
            for table in data:
                cur.execute(f"CREATE TABLE outside_{table}_{suffix} (LIKE {table} INCLUDING ALL)")
        conn.commit()
        c0, b0, t0 = time.process_time(), backend_cpu(pid), time.perf_counter()
        with conn.cursor() as cur:
            for table, text in data.items():
                with cur.copy(f"COPY outside_{table}_{suffix} FROM STDIN") as copy:
                    copy.write(text)
        conn.commit()
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - c0 + backend_cpu(pid) - b0
        best_cpu = cpu if best_cpu is None else min(best_cpu, cpu)
        with conn.cursor() as cur:
            for table in data:
                cur.execute(f"DROP TABLE outside_{table}_{suffix}")
        conn.commit()
        best = seconds if best is None else min(best, seconds)
    return {
        "entries": int(entries),
        "copy_seconds": best,
        "copy_cpu_seconds": best_cpu,
        "copy_bytes": sum(map(len, data.values())),
    }


def count(path: str, database_url: str, tenant: str = "outside", tries: int = 2) -> dict[str, Any]:
    """The outside count of ``path`` (steps 1-6 of the module text) as a dict; the import
    is timed ``tries`` times (the later ones into fresh sessions, after step 5), the best
    counts."""
    session = f"outside-{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory(prefix="outside-") as media:
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "MEDIA_ROOT": media,
            "DJANGO_DEBUG": os.environ.get("DJANGO_DEBUG", "false"),
            "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY") or uuid.uuid4().hex * 2,
        }
        no_fold = {**env, "LEDGER_FOLD_THRESHOLD_TOKENS": str(10**12)}
        tiny = Path(media) / "tiny.json"
        tiny.write_text(json.dumps([{"role": "user", "content": "hello"}]), encoding="utf-8")
        fixed = [
            command(
                [
                    "import_journal",
                    str(tiny),
                    "--tenant",
                    tenant,
                    "--create-tenant",
                    "--session",
                    f"{session}-{i}",
                    "--format",
                    "openai-chat",
                    "--no-progress",
                ],
                no_fold,
            )  # fmt: skip
            for i in range(2)
        ]  # the first pays for cold caches
        with psycopg.connect(database_url) as conn:
            before = table_sizes(conn)
            whole = command(
                ["import_journal", path, "--tenant", tenant, "--session", session,
                 "--format", "openai-chat", "--no-progress"],
                no_fold,
            )  # fmt: skip
            fold = command(["compact", f"{tenant}/{session}", "--writer", "offline"], env)
            after = table_sizes(conn)
            again = [
                command(
                    [
                        "import_journal",
                        path,
                        "--tenant",
                        tenant,
                        "--session",
                        f"{session}-{i}",
                        "--format",
                        "openai-chat",
                        "--no-progress",
                    ],
                    no_fold,
                )  # fmt: skip
                for i in range(2, tries + 1)
            ]  # the same file into fresh sessions, timing only (after the storage figures)
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT j.id FROM journal_app_journal j JOIN journal_app_session s "
                    "ON s.id = j.session_id JOIN journal_app_tenant t ON t.id = s.tenant_id "
                    "WHERE t.slug = %s AND s.key = %s",
                    [tenant, session],
                )
                (journal_id,) = cur.fetchone()
                cur.execute(
                    "SELECT coalesce(sum(octet_length(delta)), 0) FROM ledger_app_fold "
                    "WHERE journal_id = %s",
                    [journal_id],
                )
                (deltas,) = cur.fetchone()
            conn.commit()
            copied = copy_seconds(conn, journal_id)
    disk = sum(after[t][0] - before.get(t, (0, 0))[0] for t in after)
    rows = sum(after[t][1] - before.get(t, (0, 0))[1] for t in after)
    deltas = int(deltas)
    walls = [w for w, _ in [whole, *again]]
    cpus = [c for _, c in [whole, *again]]
    fixed_wall, fixed_cpu = min(w for w, _ in fixed), min(c for _, c in fixed)
    import_s = min(walls) - fixed_wall
    import_cpu = min(cpus) - fixed_cpu
    if import_s <= 0 or import_cpu <= 0:
        # the one-message import took as long as the whole one: a figure swamped by the
        # machine's load, not a (negative) speed
        raise RuntimeError(
            f"unmeasurable: the one-message import took {fixed_wall:.2f} s ({fixed_cpu:.2f} s "
            f"CPU), the whole import {min(walls):.2f} s ({min(cpus):.2f} s CPU): the machine's "
            "load swamps the difference; run again on a quieter machine"
        )
    entries = copied["entries"]
    return {
        "file": path,
        "entries": entries,
        "command_seconds": min(walls),
        "command_tries": walls,
        "fixed_seconds": fixed_wall,
        "import_seconds": import_s,
        "import_entries_per_s": entries / import_s,
        "copy_seconds": copied["copy_seconds"],
        "copy_entries_per_s": entries / copied["copy_seconds"],
        "import_over_copy": copied["copy_seconds"] / import_s,
        "command_cpu_tries": cpus,
        "fixed_cpu_seconds": fixed_cpu,
        "import_cpu_seconds": import_cpu,
        "import_entries_per_cpu_s": entries / import_cpu,
        "copy_cpu_seconds": copied["copy_cpu_seconds"],
        "copy_entries_per_cpu_s": entries / copied["copy_cpu_seconds"],
        "import_over_copy_cpu": copied["copy_cpu_seconds"] / import_cpu,
        "compact_seconds": fold[0],
        "delta_bytes": deltas,
        "disk_bytes": disk,
        "row_bytes": rows,
        "disk_over_deltas": disk / max(1, deltas),
        "rows_over_deltas": rows / max(1, deltas),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", help="an openai-chat file (the bench's generated input)")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"), required=False)
    parser.add_argument("--tenant", default="outside")
    parser.add_argument("--tries", type=int, default=2, help="timings of the import (best)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if not (args.database_url or "").startswith("postgres"):
        sys.exit("a PostgreSQL --database-url (or DATABASE_URL) is needed")
    r = count(args.file, args.database_url, args.tenant, max(1, args.tries))
    if args.json:
        print(json.dumps(r))
        return
    print(
        f"outside count of {r['entries']:,} entries: import {r['import_seconds']:.2f} s "
        f"(command {r['command_seconds']:.2f} s - fixed {r['fixed_seconds']:.2f} s) = "
        f"{r['import_entries_per_s']:.1f} entries/s; COPY {r['copy_seconds']:.3f} s = "
        f"{r['copy_entries_per_s']:,.0f} entries/s; import / COPY {r['import_over_copy']:.3f}"
    )
    print(
        f"in CPU seconds: import {r['import_cpu_seconds']:.2f}, COPY "
        f"{r['copy_cpu_seconds']:.3f}; import / COPY {r['import_over_copy_cpu']:.3f}"
    )
    print(
        f"storage: deltas {r['delta_bytes']:,} bytes; on disk {r['disk_bytes']:,} = "
        f"{r['disk_over_deltas']:.2f}x; row data {r['row_bytes']:,} = {r['rows_over_deltas']:.2f}x"
    )


if __name__ == "__main__":
    main()
