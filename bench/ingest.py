"""Ingest rate through the append path against raw ``psycopg`` COPY of the same rows (issue 8).

Ours: ``journal_app.services.journal_append`` over a synthetic session
(:mod:`bench.generator`), in batches of 1,000 entries per call (an import's shape) and, on a
tenth of the entries, one API round per call (an agent runtime's shape). Everything the
append does is timed: validation, RFC 8785 canonicalisation, hashing, token counting,
chunking, artifact storage, the ``COPY`` of entries and chunks, the head and unfolded-token
counter update and the ``entries_appended`` receivers (the fold threshold is raised so no
fold runs inside). The derived rows (identifiers, search index) are queued as a task after
commit, as with a broker and a worker (issue 13, item 3: not in the append transaction);
their throughput is measured on its own (``derived rows``, the task run in-process), and so
is what an embedded, eager install pays for both in one call (``append + derived``).
The tokenizer is loaded before timing (a server process has it loaded).

Baseline, same run, same rows: the rows ``journal_append`` writes (entries and chunks,
prepared beforehand by the same ``prepare_entries``) sent with ``COPY ... FROM STDIN`` into
scratch tables made ``LIKE`` the real ones (indexes included), in one transaction.

Figures: entries/s and MB/s (MB = 10^6 bytes of entry body plus metadata), and the ratio
ours / COPY (target: at least 1/3). ``python -m bench ingest --profile`` prints where the
time of the append path goes (cProfile).
"""

from __future__ import annotations

import contextlib
import cProfile
import datetime as dt
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

from bench.generator import session
from journal_app.chain import PreparedEntry, figures_hash, prepare_entries
from journal_app.formats.base import ParsedEntry
from journal_app.models import Chunk, Entry, Journal
from journal_app.rounds import group_rounds
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from journal_app.tokens import count_tokens
from recovery_app.tasks import derive_appended

TARGET = 1 / 3
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


def _copy_baseline(journal_id: int, prepared: Sequence[PreparedEntry]) -> float:
    suffix = uuid.uuid4().hex[:8]
    entries, chunks = f"bench_copy_entry_{suffix}", f"bench_copy_chunk_{suffix}"
    now = dt.datetime.now(dt.UTC)
    with connection.cursor() as cur:
        raw = cur.cursor
        raw.execute(f"CREATE TABLE {entries} (LIKE {Entry._meta.db_table} INCLUDING ALL)")
        raw.execute(f"CREATE TABLE {chunks} (LIKE {Chunk._meta.db_table} INCLUDING ALL)")
    try:
        t0 = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cur:
            raw = cur.cursor
            ids = list(range(1, len(prepared) + 1))
            copy_rows(
                raw,
                entries,
                ("id", *ENTRY_COLUMNS),
                ((i, *entry_row(journal_id, p, now)) for i, p in zip(ids, prepared, strict=True)),
            )
            copy_rows(
                raw,
                chunks,
                CHUNK_COLUMNS,
                (
                    (i, c.position, c.offset, c.length, c.hash)
                    for i, p in zip(ids, prepared, strict=True)
                    for c in p.chunks
                ),
            )
        return time.perf_counter() - t0
    finally:
        with connection.cursor() as cur:
            cur.execute(f"DROP TABLE {entries}")
            cur.execute(f"DROP TABLE {chunks}")


def run(
    *, small: bool = False, entries: int | None = None, batch: int = 1000, profile: bool = False
) -> dict[str, Any]:
    """Measure and print; return the figures (the runner writes them to JSON).

    Args:
        small: 2,000 entries instead of 20,000.
        entries: explicit entry count (overrides ``small``).
        batch: entries per ``journal_append`` call in the bulk mode.
        profile: also print a cProfile of the append path (2,000 entries).
    """
    n = entries or (2_000 if small else 20_000)
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
        verdict = "met" if ratio >= TARGET else f"missed by {TARGET / ratio:.1f}x"
        print(f"ratio ours / COPY = {ratio:.3f} (target >= {TARGET:.3f}: {verdict})")
    else:
        print("COPY baseline needs PostgreSQL: no ratio on", connection.vendor)
    result = {
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
        {
            "metric": f"append {n:,} entries",
            "value": n / ours,
            "unit": "entries/s",
            "baseline": n / copy_s if copy_s else None,
            "ratio": ratio,
            "target": ">= 1/3 of COPY",
            "met": ratio >= TARGET if ratio is not None else None,
        },
        {
            "metric": "append throughput",
            "value": mb / ours,
            "unit": "MB/s",
            "baseline": mb / copy_s if copy_s else None,
            "ratio": ratio,
        },
        {
            "metric": "append, one round per call",
            "value": len(rounds_items) / ours_rounds,
            "unit": "entries/s",
        },
        {
            "metric": "derived rows (identifiers, search index), queued task",
            "value": derived_n / derived_s,
            "unit": "entries/s",
        },
        {
            "metric": "append + derived rows in one call (eager, embedded)",
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
