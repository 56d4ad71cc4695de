"""Ingest rate through the append path against raw ``psycopg`` COPY of the same rows.

Ours: ``journal_app.services.journal_append`` over a synthetic session
(:mod:`bench.generator`), in batches of 1,000 entries per call (an import's shape) and, on a
tenth of the entries, one API round per call (an agent runtime's shape). Everything the
append does is timed: validation, RFC 8785 canonicalisation, hashing, token counting,
chunking, artifact storage, the ``COPY`` of entries and chunks, the head and unfolded-token
counter update and the ``entries_appended`` receivers (the fold threshold is raised so no
fold runs inside). The derived rows (identifiers, search index) are queued as a task after
commit, as with a broker and a worker (not in the append transaction);
their throughput is measured on its own (``derived rows``, the task run in-process), and so
is what an embedded, eager install pays for both in one call (``append + derived``).
The tokenizer is loaded before timing (a server process has it loaded).

Baseline, same run, same rows: the rows ``journal_append`` wrote (entries and chunks,
asserted equal to what the same ``prepare_entries`` gives), read back as COPY text
beforehand and sent with ``COPY ... FROM STDIN`` into scratch tables made ``LIKE`` the real
ones (indexes included), in one transaction, best of three: the database's own write of the
rows, no Python per row.

**The whole import** (the row a user pays):
:func:`ledger_app.services.transcript_import.transcript_import` (what ``manage.py import_journal`` runs) of a generated ``openai-chat`` file of
``IMPORT_ENTRIES`` entries (4,000; 20,000 with ``--full``): reading and parsing the file,
hashing, token counting, chunking, artifacts, the COPY of entries and chunks, and the derived
rows (identifiers, search index) run eagerly after commit as on the embedded default; the
fold is excluded (threshold raised) and timed on its own row, ``ledger_compact`` of the
imported journal with the offline writer at the default fold size. Baseline: COPY of the same
entry and chunk rows (the rows the import stored, asserted equal to a re-preparation of the
file). ``bench/outside.py`` counts the same from outside (``bench agreement``).

Figures: entries/s and MB/s (MB = 10^6 bytes of entry body plus metadata), and the ratio
ours / COPY (targets: the whole import at least 1/10, the append step alone at least 1/3). ``python -m bench ingest --profile`` prints where the
time of the append path goes (cProfile).
"""

from __future__ import annotations

import contextlib
import cProfile
import datetime as dt
import gc
import hashlib
import io
import pstats
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings

from bench import storage
from bench.cpu import cpu_between, cpu_seconds
from bench.generator import session
from journal_app.chain import PreparedEntry, figures_hash, prepare_entries
from journal_app.formats.base import ParsedEntry
from journal_app.models import Chunk, Entry, Journal
from journal_app.rounds import group_rounds
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from journal_app.tokens import count_tokens
from recovery_app.tasks import derive_appended

TARGET = 1 / 3
#: the whole import's goal, a share of COPY of its entry and chunk rows
IMPORT_TARGET = 1 / 10
#: entries of the generated file the whole-import row imports (``--full``: the second)
IMPORT_ENTRIES = (4_000, 20_000)
#: timings of the whole import; the best is the row's (as the outside count does)
IMPORT_TRIES = 2
ENTRY_COLUMNS = (
    "journal_id", "seq", "kind", "role", "tool_call_id", "tool_name", "derived", "is_error",
    "body", "body_hash", "byte_length", "meta", "meta_hash", "parent_hash", "entry_hash",
    "token_count", "token_source", "artifact_id", "source_ref", "created_at", "figures_hash",
)  # fmt: skip
CHUNK_COLUMNS = ("entry_id", "position", "offset", "length", "hash")


def new_journal(prefix: str) -> Journal:
    """An empty journal in tenant ``bench`` with a fresh session key."""
    tenant = tenant_ensure(slug="bench")
    s = session_ensure(
        tenant=tenant, key=f"{prefix}-{uuid.uuid4().hex[:10]}", source_format="bench"
    )
    return journal_ensure(session=s)


def entry_row(journal_id: int, p: PreparedEntry, now: dt.datetime) -> tuple[Any, ...]:
    """The values ``journal_append`` stores for one prepared entry, in :data:`ENTRY_COLUMNS` order."""
    return (
        journal_id, p.seq, p.kind, p.role, p.tool_call_id[:200], p.tool_name[:200], p.derived,
        p.is_error, p.body, p.body_hash, p.byte_length, p.meta, p.meta_hash, p.parent_hash,
        p.entry_hash, p.token_count, p.token_source, None, p.source_ref, now,
        figures_hash(entry_hash=p.entry_hash, token_count=p.token_count,
                     token_source=p.token_source, source_ref=p.source_ref, artifact=None),
    )  # fmt: skip


def copy_rows(
    cursor: Any,
    table: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
) -> None:
    """``COPY table (columns) FROM STDIN`` with psycopg 3, row by row."""
    cols = ", ".join(f'"{c}"' for c in columns)
    with cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def load_prepared(journal: Journal, prepared: Sequence[PreparedEntry]) -> None:
    """Write prepared entries and chunks straight into the journal's tables with COPY.

    For building large benchmark journals fast (the rows are exactly what
    ``journal_append`` would store, artifacts aside); PostgreSQL only. Updates the head.
    """
    now = dt.datetime.now(dt.UTC)
    with transaction.atomic(), connection.cursor() as cur:
        raw = cur.cursor
        copy_rows(
            raw,
            Entry._meta.db_table,
            ENTRY_COLUMNS,
            (entry_row(journal.pk, p, now) for p in prepared),
        )
        raw.execute(
            f"SELECT seq, id FROM {Entry._meta.db_table} WHERE journal_id = %s AND seq BETWEEN %s AND %s",
            (journal.pk, prepared[0].seq, prepared[-1].seq),
        )
        ids = dict(raw.fetchall())
        copy_rows(
            raw,
            Chunk._meta.db_table,
            CHUNK_COLUMNS,
            (
                (ids[p.seq], c.position, c.offset, c.length, c.hash)
                for p in prepared
                for c in p.chunks
            ),
        )
        Journal.objects.filter(pk=journal.pk).update(
            head_seq=prepared[-1].seq, head_hash=prepared[-1].entry_hash
        )
    journal.refresh_from_db()


#: entries prepared and written per COPY by :func:`load_session` (bounded memory)
LOAD_BATCH = 10_000


def load_session(journal: Journal, n: int, *, seed: int = 11, size_scale: float = 1.0) -> None:
    """Fill an empty ``journal`` with about ``n`` generated entries
    (:func:`bench.generator.iter_session`) through :func:`load_prepared`, ``LOAD_BATCH``
    at a time, hashed and chunked by the journal's own ``prepare_entries``; then
    :func:`analyze_tables`. PostgreSQL only. Derived rows (identifiers, search index) are
    not written: a fold writes the identifier rows it reads itself."""
    from bench.generator import iter_session

    scope = journal.scope_fields()
    batch: list[ParsedEntry] = []
    seq, parent = 1, ""

    def flush() -> None:
        nonlocal seq, parent
        prepared = prepare_entries(
            scope=scope,
            start_seq=seq,
            parent_hash=parent,
            items=batch,
            chunk_bytes=journal.chunk_bytes,
            encoding=settings.TOKEN_ENCODING,
        )
        load_prepared(journal, prepared)
        seq, parent = prepared[-1].seq + 1, prepared[-1].entry_hash
        batch.clear()

    for item in iter_session(n, seed=seed, size_scale=size_scale):
        batch.append(item)
        if len(batch) >= LOAD_BATCH:
            flush()
    if batch:
        flush()
    analyze_tables()


def analyze_tables(*, ledger: bool = False) -> None:
    """``ANALYZE`` the entry and chunk tables (PostgreSQL) after a bulk load, and with
    ``ledger`` the ledger's fact, fold and term tables after a bulk seed.

    Without fresh statistics (autovacuum may be off, as on this machine, or not have run
    yet) the planner estimates a few hundred rows for a journal of a million and picks
    bitmap scans over every remaining entry for each keyset page, which makes a streaming
    read quadratic; for a ledger seeded in one statement it sorts every fact row for a page
    the display-order index answers. A deployment's autovacuum analyzes tables as they grow.
    """
    if connection.vendor != "postgresql":
        return
    tables = [Entry._meta.db_table, Chunk._meta.db_table]
    if ledger:
        tables += ["ledger_app_ledgerfact", "ledger_app_fold", "ledger_app_ledgerterm"]
    with connection.cursor() as cur:
        for table in tables:
            cur.execute(f"ANALYZE {table}")


def _payload_bytes(prepared: Sequence[PreparedEntry]) -> int:
    return sum(p.byte_length + len(p.meta.encode("utf-8")) for p in prepared)


@contextlib.contextmanager
def derived_queued() -> Iterator[None]:
    """Queue the tasks sent meanwhile instead of running them in-process (eager).

    What a deployment with a broker does: the ``derive_appended`` task of each append is
    sent after commit and run by a worker. With the embedded ``memory://`` broker the
    messages stay in this process's queue and are never run.
    """
    conf = current_app.conf
    eager = conf.task_always_eager
    conf.task_always_eager = False
    try:
        yield
    finally:
        conf.task_always_eager = eager


def _append_batches(journal: Journal, items: Sequence[ParsedEntry], batch: int) -> float:
    t0 = time.perf_counter()
    for start in range(0, len(items), batch):
        journal_append(journal=journal, items=items[start : start + batch])
    return time.perf_counter() - t0


def _round_slices(items: Sequence[ParsedEntry]) -> list[Sequence[ParsedEntry]]:
    class _V:
        def __init__(self, seq: int, e: ParsedEntry) -> None:
            self.seq, self.kind, self.role, self.tool_call_id = seq, e.kind, e.role, e.tool_call_id

    rounds = group_rounds([_V(i + 1, e) for i, e in enumerate(items)])
    return [items[r.first_seq - 1 : r.last_seq] for r in rounds]


#: COPY timings per baseline; the best is the baseline (the machine is shared)
COPY_TRIES = 3


#: CPU seconds (this process + its database session) of the best COPY try of the last
#: :func:`_copy_baseline` (the lowest of its tries)
COPY_CPU: list[float] = []


def _copy_baseline(journal_id: int, prepared: Sequence[PreparedEntry]) -> float:
    """Seconds of ``COPY ... FROM STDIN`` of the journal's entry and chunk rows (the rows of
    ``prepared``, asserted stored by the caller) into fresh tables ``LIKE`` the real ones
    (indexes included), best of :data:`COPY_TRIES`. The rows are read back beforehand as
    COPY text, so the baseline is the database's own write of them, no Python per row."""
    entry, chunk = Entry._meta.db_table, Chunk._meta.db_table
    with connection.cursor() as cur:
        raw = cur.cursor
        texts = []
        for table, columns, where in (
            (entry, ("id", *ENTRY_COLUMNS), "journal_id = %s"),
            (
                chunk,
                ("id", *CHUNK_COLUMNS),
                f"entry_id IN (SELECT id FROM {entry} WHERE journal_id = %s)",
            ),
        ):
            cols = ", ".join(f'"{c}"' for c in columns)
            select = f"SELECT {cols} FROM {table} WHERE {where}".replace("%s", str(int(journal_id)))
            buf = bytearray()
            with raw.copy(f"COPY ({select}) TO STDOUT") as copy:
                for block in copy:
                    buf += block
            texts.append((table, cols, bytes(buf)))
    assert texts[0][2].count(b"\n") == len(prepared), "the journal holds other rows"
    best = float("inf")
    COPY_CPU.clear()
    for _ in range(COPY_TRIES):
        suffix = uuid.uuid4().hex[:8]
        with connection.cursor() as cur:
            for table, _c, _t in texts:
                cur.execute(
                    f"CREATE TABLE bench_copy_{table}_{suffix} (LIKE {table} INCLUDING ALL)"
                )
        try:
            c0, t0 = cpu_seconds(), time.perf_counter()
            with transaction.atomic(), connection.cursor() as cur:
                for table, cols, text in texts:
                    with cur.cursor.copy(
                        f"COPY bench_copy_{table}_{suffix} ({cols}) FROM STDIN"
                    ) as copy:
                        copy.write(text)
            best = min(best, time.perf_counter() - t0)
            COPY_CPU.append(cpu_between(c0, cpu_seconds()))
        finally:
            with connection.cursor() as cur:
                for table, _c, _t in texts:
                    cur.execute(f"DROP TABLE bench_copy_{table}_{suffix}")
    return best


def import_file(n: int, *, seed: int = 8, directory: str | None = None) -> tuple[str, int]:
    """Write a generated ``openai-chat`` file of about ``n`` entries
    (:func:`bench.generator.write_openai_chat`); returns ``(path, bytes)``."""
    from bench.generator import write_openai_chat

    folder = directory or tempfile.mkdtemp(prefix="bench-import-")
    path = f"{folder}/session-{n}.json"
    size = write_openai_chat(path, n, seed=seed)
    return path, size


def timed_import(path: str, tenant: str = "bench") -> tuple[Any, float]:
    """``transcript_import`` (what the ``import_journal`` command runs: ``journal_import``
    and its audit event in one transaction) of ``path`` into a fresh session, the derived
    rows (identifiers, search index) eager after commit as on the embedded default, no fold
    (threshold raised); returns ``(ImportResult, seconds)``. The caller provides
    ``MEDIA_ROOT``."""
    from ledger_app.services.transcript_import import transcript_import

    conf = current_app.conf
    eager = conf.task_always_eager
    conf.task_always_eager = True
    # the objects the benchmarks before this one left alive are out of the collector's
    # reach while it runs: a user's import runs in a process of its own (the outside count's
    # command does), not in one holding what earlier benchmarks left for the collector to walk
    gc.collect()
    gc.freeze()
    try:
        with override_settings(LEDGER_FOLD_THRESHOLD_TOKENS=10**12):
            t0 = time.perf_counter()
            result = transcript_import(
                path=path, tenant=tenant, session=f"import-{uuid.uuid4().hex[:10]}"
            )
            return result.imported, time.perf_counter() - t0
    finally:
        gc.unfreeze()
        conf.task_always_eager = eager


#: entries of the import (and fold) before the storage row's first measure (:func:`whole_import`)
WARM_ENTRIES = 60

#: the last :func:`whole_import` of this process by requested entries (``bench agreement``
#: runs the outside count over the same file)
LAST_IMPORT: dict[int, dict[str, Any]] = {}


def whole_import(n: int, *, profile: bool = False) -> dict[str, Any]:
    """The whole-import row: ``transcript_import`` of a generated file of about ``n`` entries,
    then the fold of it on its own, against COPY of the same entry and chunk rows."""
    from journal_app.formats import parse_path
    from ledger_app.services import ledger_compact

    fold_tokens = settings.LEDGER_FOLD_THRESHOLD_TOKENS
    count_tokens("warm up", settings.TOKEN_ENCODING)
    with (
        tempfile.TemporaryDirectory(prefix="bench-import-") as folder,
        override_settings(MEDIA_ROOT=folder),
    ):
        path, size = import_file(n, directory=folder)
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        if connection.vendor == "postgresql":
            # a small import and its fold first: the storage row is what an import adds to
            # tables in use, not the first pages every empty table and index takes (about
            # 1 MB here), which the outside count, run after this, never sees
            warm, _ = import_file(WARM_ENTRIES, seed=9, directory=folder)
            warmed, _ = timed_import(warm)
            ledger_compact(journal=warmed.journal, writer="offline", fold_tokens=fold_tokens)
        before = storage.sizes() if connection.vendor == "postgresql" else None
        prof = cProfile.Profile() if profile else None
        if prof:
            prof.enable()
        c0 = cpu_seconds()
        imported, import_s = timed_import(path)
        cpus = [cpu_between(c0, cpu_seconds())]
        if prof:
            prof.disable()
        journal = imported.journal
        t0 = time.perf_counter()
        report = ledger_compact(journal=journal, writer="offline", fold_tokens=fold_tokens)
        fold_s = time.perf_counter() - t0
        if before is not None:  # what the import and the fold stored (``bench storage``)
            storage.measure(before, journal, n)
        # best of IMPORT_TRIES: the same file again into a fresh session (not folded, after
        # the storage figures); one timing on a shared machine varies by a third
        tries = [import_s]
        for _ in range(IMPORT_TRIES - 1):
            c0 = cpu_seconds()
            tries.append(timed_import(path)[1])
            cpus.append(cpu_between(c0, cpu_seconds()))
        import_s = min(tries)
        prepared = prepare_entries(
            scope=journal.scope_fields(),
            start_seq=1,
            parent_hash="",
            items=parse_path(path).entries,
            chunk_bytes=journal.chunk_bytes,
            encoding=settings.TOKEN_ENCODING,
        )
    stored = list(
        Entry.objects.filter(journal=journal).order_by("seq").values_list("entry_hash", flat=True)
    )
    assert stored == [p.entry_hash for p in prepared], "the COPY rows differ from the imported"
    copy_s = _copy_baseline(journal.pk, prepared) if connection.vendor == "postgresql" else None
    copy_cpu = min(COPY_CPU) if copy_s else None
    out = {
        "requested": n,
        "entries": len(prepared),
        "file_bytes": size,
        "file_sha256": digest,
        "megabytes": _payload_bytes(prepared) / 1e6,
        "import_seconds": import_s,
        "import_tries": tries,
        "import_cpu_seconds": min(cpus),
        "copy_cpu_seconds": copy_cpu,
        "cpu_ratio": copy_cpu / min(cpus) if copy_cpu else None,
        "fold_seconds": fold_s,
        "folds": len(report.folds),
        "copy_seconds": copy_s,
        "ratio": copy_s / import_s if copy_s else None,
    }
    print(
        f"whole import of {out['entries']:,} entries ({size / 1e6:.1f} MB file): "
        f"{import_s:.2f} s; fold of it {fold_s:.2f} s ({out['folds']} folds); COPY of its "
        f"rows {copy_s or 0:.3f} s; ratio {out['ratio'] or 0:.3f} (goal >= {IMPORT_TARGET:.2f})"
    )
    if prof:
        text = io.StringIO()
        stats = pstats.Stats(prof, stream=text)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(25)
        print(text.getvalue())
    LAST_IMPORT[n] = out
    return out


def import_summary(w: dict[str, Any]) -> list[dict[str, Any]]:
    """The table rows of :func:`whole_import`: the import against COPY, and the fold alone."""
    n = w["entries"]
    return [
        {
            "metric": f"whole import, {n:,} entries",
            "what": "transcript_import (what import_journal runs) of a generated openai-chat "
            "file, best of 2: parse, hash, tokens, chunks, COPY, identifiers + search index, "
            "audit; no fold "
            "| baseline: COPY FROM STDIN of the same entry and chunk rows as text, best of 3",
            "value": n / w["import_seconds"],
            "unit": "entries/s",
            "baseline": n / w["copy_seconds"] if w["copy_seconds"] else None,
            "ratio": w["ratio"],
            "target": ">= 1/10 of COPY",
            "met": w["ratio"] >= IMPORT_TARGET if w["ratio"] is not None else None,
        },
        {
            "metric": f"whole import, {n:,} entries, CPU",
            "what": "the same import and COPY in CPU seconds (this process + its database "
            "session): what each costs alone on a machine shared with other work",
            "value": n / w["import_cpu_seconds"],
            "unit": "entries/CPU s",
            "baseline": n / w["copy_cpu_seconds"] if w.get("copy_cpu_seconds") else None,
            "ratio": w.get("cpu_ratio"),
            "target": ">= 1/10 of COPY",
            "met": w["cpu_ratio"] >= IMPORT_TARGET if w.get("cpu_ratio") is not None else None,
        },
        {
            "metric": f"fold of the imported {n:,} entries",
            "what": "ledger_compact (offline writer, default fold size) of the journal just "
            "imported, excluded from the import row | no baseline",
            "value": w["fold_seconds"],
            "unit": "s",
        },
    ]


def run(
    *,
    small: bool = False,
    full: bool = False,
    entries: int | None = None,
    batch: int = 1000,
    profile: bool = False,
) -> dict[str, Any]:
    """Measure and print; return the figures (the runner writes them to JSON).

    Args:
        small: 2,000 entries instead of 10,000 (the append rows; 1,000 for the whole import).
        full: 20,000 entries for the whole import (and the append rows).
        entries: explicit entry count of the append rows (overrides ``small``).
        batch: entries per ``journal_append`` call in the bulk mode.
        profile: also print a cProfile of the append path (2,000 entries).
    """
    whole = whole_import(
        1_000 if small else IMPORT_ENTRIES[1] if full else IMPORT_ENTRIES[0], profile=profile
    )
    n = entries or (2_000 if small else 20_000 if full else 10_000)
    items = session(n, seed=8)
    n = len(items)
    count_tokens("warm up", settings.TOKEN_ENCODING)
    with (
        tempfile.TemporaryDirectory(prefix="bench-media-") as media,
        override_settings(LEDGER_FOLD_THRESHOLD_TOKENS=10**12, MEDIA_ROOT=media),
    ):
        journal = new_journal("ingest")
        with derived_queued():
            ours = _append_batches(journal, items, batch)
        rounds_items = items[: max(1, n // 10)]
        rounds = _round_slices(rounds_items)
        per_round = new_journal("ingest-rounds")
        t0 = time.perf_counter()
        with derived_queued():
            for r in rounds:
                journal_append(journal=per_round, items=r)
        ours_rounds = time.perf_counter() - t0
        derived_n = len(rounds_items)
        t0 = time.perf_counter()
        derive_appended(journal.pk, 1, derived_n)
        derived_s = time.perf_counter() - t0
        inline = new_journal("ingest-inline")
        inline_s = _append_batches(inline, rounds_items, batch)  # eager: the embedded default

    t0 = time.perf_counter()
    prepared = prepare_entries(
        scope=journal.scope_fields(),
        start_seq=1,
        parent_hash="",
        items=items,
        chunk_bytes=journal.chunk_bytes,
        encoding=settings.TOKEN_ENCODING,
    )
    prepare_s = time.perf_counter() - t0
    stored = list(
        Entry.objects.filter(journal=journal).order_by("seq").values_list("entry_hash", flat=True)
    )
    assert stored == [p.entry_hash for p in prepared], (
        "the baseline rows differ from the stored ones"
    )
    mb = _payload_bytes(prepared) / 1e6
    chunks = sum(len(p.chunks) for p in prepared)

    copy_s = None
    if connection.vendor == "postgresql":
        copy_s = _copy_baseline(journal.pk, prepared)
    rows = [
        (f"append, batches of {batch}", n, ours),
        ("append, one round per call", len(rounds_items), ours_rounds),
        ("derived rows (the queued task)", derived_n, derived_s),
        ("append + derived, eager", derived_n, inline_s),
        ("prepare_entries only (pure)", n, prepare_s),
    ]
    if copy_s is not None:
        rows.append(("raw COPY of the same rows", n, copy_s))
    print(f"{n:,} entries, {chunks:,} chunks, {mb:.1f} MB of body + metadata")
    print(f"{'path':<32} {'entries':>9} {'seconds':>9} {'entries/s':>10} {'MB/s':>8}")
    for label, count, secs in rows:
        share = mb * count / n
        print(f"{label:<32} {count:>9,} {secs:>9.3f} {count / secs:>10,.0f} {share / secs:>8.2f}")
    ratio = copy_s / ours if copy_s else None
    if ratio is not None:
        verdict = "met" if ratio >= TARGET else f"missed by {TARGET / ratio:.2f}x"
        print(f"ratio ours / COPY = {ratio:.3f} (target >= {TARGET:.3f}: {verdict})")
    else:
        print("COPY baseline needs PostgreSQL: no ratio on", connection.vendor)
    result = {
        "whole_import": whole,
        "entries": n,
        "chunks": chunks,
        "megabytes": mb,
        "batch": batch,
        "append_seconds": ours,
        "append_entries_per_s": n / ours,
        "append_mb_per_s": mb / ours,
        "append_rounds_entries": len(rounds_items),
        "append_rounds_seconds": ours_rounds,
        "append_rounds_entries_per_s": len(rounds_items) / ours_rounds,
        "derived_entries": derived_n,
        "derived_seconds": derived_s,
        "append_eager_seconds": inline_s,
        "prepare_seconds": prepare_s,
        "copy_seconds": copy_s,
        "copy_entries_per_s": n / copy_s if copy_s else None,
        "copy_mb_per_s": mb / copy_s if copy_s else None,
        "ratio": ratio,
        "target": TARGET,
    }
    result["summary"] = [
        *import_summary(whole),
        {
            "metric": f"append step alone, {n:,} entries",
            "what": "journal_append in batches of 1,000 (derived rows queued, not run) | "
            "baseline: COPY FROM STDIN of the same entry and chunk rows as text, best of 3",
            "value": n / ours,
            "unit": "entries/s",
            "baseline": n / copy_s if copy_s else None,
            "ratio": ratio,
            "target": ">= 1/3 of COPY",
            "met": ratio >= TARGET if ratio is not None else None,
        },
        {
            "metric": "append throughput",
            "what": "the append step's bytes (bodies and metadata) per wall s | baseline: "
            "the COPY of the same rows",
            "value": mb / ours,
            "unit": "MB/s",
            "baseline": mb / copy_s if copy_s else None,
            "ratio": ratio,
        },
        {
            "metric": "append, one round per call",
            "what": "journal_append called once per API round (as the API and the proxy "
            "append) | no baseline",
            "value": len(rounds_items) / ours_rounds,
            "unit": "entries/s",
        },
        {
            "metric": "derived rows (identifiers, search index), queued task",
            "what": "the derived-rows task alone over entries appended without it | no baseline",
            "value": derived_n / derived_s,
            "unit": "entries/s",
        },
        {
            "metric": "append + derived rows in one call (eager, embedded)",
            "what": "journal_append with the derived rows run in the same call, as on the "
            "embedded default | baseline: COPY of the entry and chunk rows",
            "value": derived_n / inline_s,
            "unit": "entries/s",
            "baseline": n / copy_s if copy_s else None,
            "ratio": (copy_s / n) / (inline_s / derived_n) if copy_s else None,
        },
    ]
    if profile:
        print(profile_append(min(n, 2000)))
    return result


def profile_append(n: int = 2000, top: int = 25) -> str:
    """cProfile of the append path on ``n`` entries: the top functions by own and total time."""
    items = session(n, seed=8)
    with (
        tempfile.TemporaryDirectory(prefix="bench-media-") as media,
        override_settings(LEDGER_FOLD_THRESHOLD_TOKENS=10**12, MEDIA_ROOT=media),
    ):
        journal = new_journal("ingest-profile")
        count_tokens("warm up", settings.TOKEN_ENCODING)
        prof = cProfile.Profile()
        with derived_queued():
            prof.enable()
            _append_batches(journal, items, 1000)
            prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()
