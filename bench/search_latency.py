"""Recovery search latency and a full recovery attempt's time.

PostgreSQL only (the production backend). Builds, in the scratch database the runner made:

* a **session** of ``n_entries`` (100,000) synthetic entries (:mod:`bench.generator`, sizes
  scaled by ``size_scale``), with planted identifiers: ``repeats`` rare ones (a migration
  name in a tool call and its result), and a medium word in 1% of the entries;
* then more sessions in the same tenant up to ``tenant_entries`` (1,000,000), each with the
  same planted identifiers, so every rare identifier matches in every session.

Rows go in with ``COPY`` (entries and chunks via :func:`bench.ingest.load_prepared`, index
segments straight into ``recovery_app_searchsegment``, whose ``tsvector`` column and GIN
index PostgreSQL maintains). Search latency (p50/p95 over ``repeats`` queries per class, ms)
is measured on the backend (:mod:`recovery_app.search`) and on the search tool (service:
snippets and filtering included), first with the session alone in its tenant, then with the
tenant at full size. Baselines in the same run: a naive ``body ILIKE`` scan of the session
(what search would cost without an index) and the floor, fetching 11 rows by seq.

A full recovery attempt (:func:`recovery_app.services.recovery_run` with the lexical analyst:
search, re-read, hash verification of every chunk, claims, receipt) is timed on the big
session, excluding model calls (none is configured or made): a manual query, and the
fold-time path where a new user message doubting a migration fires the trigger.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from django.db import connection, transaction
from django.test import override_settings

QUERY_CLASSES = ("rare", "medium", "common", "two common", "absent")


def _ident(k: int) -> str:
    return f"{k:04d}_bench_migration_{k}"


def _prepare(args: tuple[dict[str, str], int, int, float, int]) -> list[Any]:
    """Prepared rows of one synthetic session (run in a worker process)."""
    from bench.generator import iter_session
    from journal_app.chain import prepare_entries

    scope, n, seed, size_scale, rare = args
    items = list(iter_session(n, seed=seed, size_scale=size_scale))
    rng = random.Random(seed)
    slots = [i for i, e in enumerate(items) if e.kind == "tool_call" and i + 1 < len(items)]
    for k, i in enumerate(rng.sample(slots, min(rare, len(slots)))):
        call = items[i]
        call.content = {**call.content, "arguments": {"command": f"migrate {_ident(k)} --fake"}}
        for later in items[i + 1 :]:
            if later.kind == "tool_result" and later.tool_call_id == call.tool_call_id:
                later.content = {**later.content, "output": f"Applying {_ident(k)}... FAKED"}
                break
    for i in range(0, len(items), 100):
        e = items[(i + seed) % len(items)]
        if e.kind == "message":
            e.content = {**e.content, "text": e.content["text"] + " quokka"}
        elif e.kind == "tool_result":
            e.content = {**e.content, "output": e.content["output"] + " quokka"}
    return prepare_entries(scope=scope, start_seq=1, parent_hash="", items=items, chunk_bytes=4096)


def _load(journal: Any, prepared: Sequence[Any]) -> None:
    """COPY the entries, chunks and search segments of one journal; mark it indexed."""
    from bench.ingest import copy_rows, load_prepared
    from recovery_app.lexical import segments, tokenize
    from recovery_app.models import SearchIndexState
    from recovery_app.search import indexable

    load_prepared(journal, prepared)
    with transaction.atomic(), connection.cursor() as cur:
        raw = cur.cursor
        raw.execute("SELECT seq, id FROM journal_app_entry WHERE journal_id = %s", (journal.pk,))
        ids = dict(raw.fetchall())
        rows = (
            (ids[p.seq], journal.pk, p.seq, n, tokens)
            for p in prepared
            if indexable(p.kind, p.derived)
            for n, tokens in enumerate(segments(tokenize(p.text)))
        )
        copy_rows(
            raw,
            "recovery_app_searchsegment",
            ("entry_id", "journal_id", "seq", "segment", "tokens"),
            rows,
        )
        SearchIndexState.objects.update_or_create(
            journal=journal, defaults={"indexed_seq": prepared[-1].seq}
        )


def _analyze() -> None:
    """VACUUM ANALYZE the loaded tables: planner statistics, and the GIN index's pending
    list merged (COPY fills it; in steady state autovacuum keeps it short)."""
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE journal_app_entry")
        cur.execute("VACUUM ANALYZE recovery_app_searchsegment")


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _timed(fn: Callable[[int], Any], repeats: int) -> dict[str, float]:
    fn(0)  # warm the cache and the plan
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t0) * 1000)
    return {
        "p50_ms": _pct(times, 0.5),
        "p95_ms": _pct(times, 0.95),
        "mean_ms": statistics.mean(times),
    }


def _queries(kind: str, i: int) -> str:
    return {
        "rare": _ident(i),
        "medium": "quokka",
        "common": "error",
        "two common": "refund billing",
        "absent": f"zzabsent{i}",
    }[kind]


def _measure(journal: Any, repeats: int) -> dict[str, Any]:
    from recovery_app.lexical import parse_query
    from recovery_app.search import backend
    from recovery_app.services import recovery_search

    be = backend()
    head = journal.head_seq
    out: dict[str, Any] = {}
    for kind in QUERY_CLASSES:
        hits = len(
            be.search(
                journal_id=journal.pk,
                revision=head,
                query=parse_query(_queries(kind, 1)),
                limit=10**6,
            )
        )
        out[kind] = {
            "matching_entries": hits,
            "backend": _timed(
                lambda i, k=kind: be.search(
                    journal_id=journal.pk,
                    revision=head,
                    query=parse_query(_queries(k, i)),
                    limit=11,
                ),
                repeats,
            ),
            "service": _timed(
                lambda i, k=kind: recovery_search(journal=journal, query=_queries(k, i), limit=10),
                repeats,
            ),
        }
    with connection.cursor() as cur:

        def ilike(i: int) -> None:
            cur.execute(
                "SELECT id FROM journal_app_entry WHERE journal_id = %s AND seq <= %s "
                "AND body ILIKE %s ORDER BY seq LIMIT 11",
                [journal.pk, head, f"%{_ident(i)}%"],
            )
            cur.fetchall()

        def floor(i: int) -> None:
            cur.execute(
                "SELECT id FROM journal_app_entry WHERE journal_id = %s AND seq > %s ORDER BY seq LIMIT 11",
                [journal.pk, (i * 997) % max(1, head - 11)],
            )
            cur.fetchall()

        out["baseline ILIKE scan (rare)"] = _timed(ilike, max(3, repeats // 5))
        out["baseline floor (11 rows by seq)"] = _timed(floor, repeats)
    return out


def _attempts(journal: Any, attempts: int) -> dict[str, Any]:
    from journal_app.formats.base import message
    from journal_app.services import journal_append
    from recovery_app.services import recovery_run

    manual_outcomes: list[str] = []

    def manual(i: int) -> None:
        r = recovery_run(journal=journal, query=_ident(i), model=None)
        manual_outcomes.append(r.outcome)

    manual_t = _timed(manual, attempts)
    trigger_times, outcomes, reads = [], [], []
    for i in range(attempts):
        journal_append(
            journal=journal,
            items=[message("user", f"The migration {_ident(i)} may have been wrong; check it.")],
        )
        t0 = time.perf_counter()
        r = recovery_run(journal=journal, model=None)
        trigger_times.append((time.perf_counter() - t0) * 1000)
        outcomes.append(r.outcome)
        reads.append(r.usage.get("reads", 0))
    return {
        "manual query": {**manual_t, "outcomes": sorted(set(manual_outcomes))},
        "fold-time trigger": {
            "p50_ms": _pct(trigger_times, 0.5),
            "p95_ms": _pct(trigger_times, 0.95),
            "mean_ms": statistics.mean(trigger_times),
            "outcomes": sorted(set(outcomes)),
            "mean_reads": statistics.mean(reads),
        },
        "model_requests": 0,
    }


def run(
    n_entries: int = 100_000,
    tenant_entries: int | None = None,
    repeats: int = 50,
    attempts: int = 20,
    size_scale: float = 0.1,
    small: bool = False,
    full: bool = False,
) -> dict[str, Any]:
    """Build the session and the tenant, measure, print a table, and return the figures.

    Args:
        n_entries: entries of the measured session.
        tenant_entries: entries of its tenant in total (more sessions of ``n_entries``).
        repeats: queries per class (each rare query names another planted identifier).
        attempts: recovery attempts per path.
        size_scale: scales every synthetic entry size (1.0 = the corpus's sizes).
        small: a quick run (2,000-entry session, 20,000-entry tenant, 10 repeats).
        full: build the tenant up to ``tenant_entries`` (default 1,000,000); by default the
            tenant holds the session alone, so ``make bench`` stays within 10 minutes
           .

    Returns:
        ``{"session": {...}, "tenant": {...}, "recovery": {...}, "build_seconds": ...,
        "summary": [...]}``; ``{"skipped": ...}`` on a database other than PostgreSQL.
    """
    if connection.vendor != "postgresql":
        return {"skipped": "PostgreSQL only (the production search backend)"}
    if tenant_entries is None:
        tenant_entries = 1_000_000 if full else n_entries
    if small:
        n_entries, tenant_entries, repeats, attempts = 2_000, 20_000 if full else 2_000, 10, 5
    repeats = max(repeats, 2)
    from journal_app.services import journal_ensure, session_ensure, tenant_ensure

    tenant = tenant_ensure(slug=f"bench-search-{uuid.uuid4().hex[:8]}")
    n_sessions = max(1, -(-tenant_entries // n_entries))
    journals = [
        journal_ensure(session=session_ensure(tenant=tenant, key=f"s{i}", source_format="bench"))
        for i in range(n_sessions)
    ]
    rare = max(repeats, attempts) + 1
    jobs = [(j.scope_fields(), n_entries, i, size_scale, rare) for i, j in enumerate(journals)]
    result: dict[str, Any] = {"n_entries": n_entries, "tenant_entries": n_entries * n_sessions}
    t0 = time.perf_counter()
    workers = max(1, min(2, os.cpu_count() or 1))
    with override_settings(LEDGER_FOLD_THRESHOLD_TOKENS=10**15):
        target = journals[0]
        _load(target, _prepare(jobs[0]))
        _analyze()
        target.refresh_from_db()
        result["session_build_seconds"] = time.perf_counter() - t0
        result["session"] = _measure(target, repeats)
        if len(journals) > 1:
            ctx = multiprocessing.get_context("spawn")  # workers need no database connection
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                for j, rows in zip(journals[1:], pool.map(_prepare, jobs[1:]), strict=True):
                    _load(j, rows)
                    del rows
            _analyze()
        result["build_seconds"] = time.perf_counter() - t0
        result["tenant"] = _measure(target, repeats)
        result["recovery"] = _attempts(target, attempts)
    result["summary"] = _summary(result)
    _print(result)
    return result


def _summary(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for where in ("session", "tenant"):
        ilike = result[where]["baseline ILIKE scan (rare)"]["p50_ms"]
        for kind in ("rare", "common"):
            fig = result[where][kind]["backend"]
            if where == "tenant" and result["tenant_entries"] == result["n_entries"]:
                continue  # the tenant is the session alone (no --full): the same figures
            size = result["n_entries" if where == "session" else "tenant_entries"]
            rows.append(
                {
                    "metric": f"search p95, {kind} term, {where} ({size:,} entries)",
                    "what": "ms of the search backend (recovery_app.search) for one term, "
                    "p95 | baseline: a body ILIKE scan of the session, p50 (rare terms only)",
                    "value": fig["p95_ms"],
                    "unit": "ms",
                    "baseline": ilike if kind == "rare" else None,
                    "ratio": fig["p95_ms"] / ilike if kind == "rare" and ilike else None,
                    "target": "<= 50",
                    "met": fig["p95_ms"] <= 50,
                }
            )
    attempt = result["recovery"]["fold-time trigger"]
    rows.append(
        {
            "metric": "recovery attempt p95 (no model calls)",
            "what": "ms of one fold-time recovery attempt (trigger scan, searches, hash "
            "checks; no model) p95 | target: the attempt's time budget",
            "value": attempt["p95_ms"],
            "unit": "ms",
            "target": "<= 30,000 (the budget)",
            "met": attempt["p95_ms"] <= 30_000,
        }
    )
    return rows


def _print(result: dict[str, Any]) -> None:
    print(
        f"session {result['n_entries']:,} entries, tenant {result['tenant_entries']:,} entries, "
        f"built in {result['build_seconds']:.0f} s"
    )
    head = ("where", "query", "matches", "backend p50", "p95", "tool p50", "p95")
    lines = [head]
    for where in ("session", "tenant"):
        m = result[where]
        for kind in QUERY_CLASSES:
            b, s = m[kind]["backend"], m[kind]["service"]
            lines.append(
                (where, kind, f"{m[kind]['matching_entries']:,}", f"{b['p50_ms']:.2f}",
                 f"{b['p95_ms']:.2f}", f"{s['p50_ms']:.2f}", f"{s['p95_ms']:.2f}")
            )  # fmt: skip
        for base in ("baseline ILIKE scan (rare)", "baseline floor (11 rows by seq)"):
            lines.append(
                (where, base, "", f"{m[base]['p50_ms']:.2f}", f"{m[base]['p95_ms']:.2f}", "", "")
            )
    for path in ("manual query", "fold-time trigger"):
        a = result["recovery"][path]
        lines.append(
            (
                "recovery",
                path,
                ",".join(a["outcomes"]),
                f"{a['p50_ms']:.2f}",
                f"{a['p95_ms']:.2f}",
                "",
                "",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for n, line in enumerate(lines):
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    print("times in ms; recovery attempts exclude model calls (none configured or made)")
