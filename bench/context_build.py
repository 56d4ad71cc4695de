"""Context build time at 1k, 10k, 20k (and 100k) generated entries against ``trim_messages``, and its scaling exponent.

Each size is a session from :func:`bench.generator.session` (corpus-shaped), prepared with
the journal's own hashing (:func:`journal_app.chain.prepare_entries`), with the mechanical
ledger of :func:`tests.support.offline_fold.offline_fold` folded once outside the timing (the
service stores folds; a build does not redo them) and the artifact receipts results over
2,000 tokens would get. One build is :func:`ledger_app.context.build_context` at the default
budgets (working 200,000, see :data:`WORKING`; window 270,000), followed by the JSON encoding of what
``POST /sessions/{s}/context`` returns for the model view and the debug trace (bounded, as the
API sends it: :func:`ledger_app.context.bounded_trace`) (the frontend
view is built by the service from the entries alone and is not timed here).

Figures per size: seconds of one build (median of ``REPEAT``), wall and CPU (the process's
CPU time: the build is one thread and reads nothing, so on a machine shared with other work
its CPU time is what it takes alone; the goal is judged on it), the response size in bytes,
and the number of distinct token counts the build asked for (a shape figure: it grows
linearly when each part is counted once). The exponent is the least-squares slope of
log(time) over log(entries). Baseline per size, same run (:func:`trim_time`): the same entry
views as Chat Completions messages trimmed by LangChain's ``trim_messages`` to the same
working budget. Goals: the build within 2x of that baseline at every size, exponent <= 1.1,
20k entries <= 2 s.

Run: ``python -m bench context_build [--small | --full]`` (default 1k and 10k; ``--small``
1k and 2k; ``--full`` or ``BENCH_CONTEXT_100K=1`` adds 20k and 100k).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from typing import Any

#: Sizes of the default run (entries): the 1k and 10k comparisons with ``trim_messages``; the
#: 20k goal of the default run is the ``mandatory`` benchmark's context page row (the service
#: over the database, what a user waits for); :data:`FULL_SIZES` join them with ``--full``.
SIZES = (1_000, 10_000)
FULL_SIZES = (20_000,)
SMALL_SIZES = (1_000, 2_000)
LARGE = 100_000
REPEAT = 3
#: Working budget of the timed builds (tokens). 200,000, not the API example's 32,000: the
#: generated 20k-entry session's pins and ledger alone are about 150,000 tokens (its user
#: messages are instructions, kept verbatim), so at 32,000 the build ends in the failure
#: state after a fraction of the work; a failed build never counts as met.
WORKING = 200_000
WINDOW = 270_000


def views_of(n_entries: int, seed: int = 0) -> tuple[list[Any], dict[str, int]]:
    """A generated session of about ``n_entries`` entries as entry views, and the stored
    token count of each (entry hash -> tokens)."""
    from bench.generator import iter_session
    from journal_app.chain import prepare_entries
    from ledger_app.entry_view import EntryView

    scope = {"tenant": "bench", "session": f"ctx{n_entries}", "lane": "main", "branch": "main"}
    prepared = prepare_entries(
        scope=scope,
        start_seq=1,
        parent_hash="",
        items=list(iter_session(n_entries, seed=seed)),
        chunk_bytes=4096,
    )
    counts = {p.entry_hash: p.token_count for p in prepared}
    views = [
        EntryView(
            seq=p.seq,
            entry_hash=p.entry_hash,
            kind=p.kind,
            role=p.role,
            text=p.text,
            content=json.loads(p.body),
            tool_call_id=p.tool_call_id,
            tool_name=p.tool_name,
            derived=p.derived,
            is_error=p.is_error,
            meta=json.loads(p.meta),
        )
        for p in prepared
    ]
    return views, counts


class _Counting:
    """A token counter that records how many texts it was asked to count."""

    def __init__(self) -> None:
        from journal_app.tokens import count_tokens

        self.count_tokens = count_tokens
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return self.count_tokens(text)


def measure(n_entries: int) -> dict[str, Any]:
    """One size: ``{"entries", "seconds", "response_bytes", "token_counts", "status"}``."""
    from bench.context_vs_trim import _receipts
    from journal_app.tokens import count_tokens
    from ledger_app.context import bounded_trace, build_context
    from ledger_app.validation import Meter
    from tests.support.offline_fold import offline_fold

    views, counts = views_of(n_entries)
    receipts = _receipts(views, count_tokens)
    folded: dict[int, Any] = {}

    def fold(upto: int) -> Any:
        if upto not in folded:
            folded[upto] = offline_fold(views, upto=upto)
        return folded[upto]

    def once() -> tuple[Any, int, int]:
        counter = _Counting()
        build = build_context(
            entries=views,
            working_budget=WORKING,
            hard_limit=WINDOW,
            receipts=receipts,
            fold=fold,
            meter=Meter(count=counter),
            token_counts=counts,
        )
        body = json.dumps(
            {
                "status": build.status,
                "model_view": build.model_view,
                "debug_trace": bounded_trace(build.debug_trace),
                "failure": build.failure,
                "validation": {"model": build.report.to_dict()},
            },
            ensure_ascii=False,
        )
        return build, len(body.encode("utf-8")), counter.calls

    once()  # warm-up: the fold happens here, once
    trim_cpu = trim_time(views)
    times: list[float] = []
    cpu: list[float] = []
    size = calls = 0
    build = None
    for _ in range(REPEAT):
        start, start_cpu = time.perf_counter(), time.process_time()
        build, size, calls = once()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    assert build is not None
    return {
        "entries": len(views),
        "seconds": round(statistics.median(times), 4),
        "cpu_seconds": round(statistics.median(cpu), 4),
        "response_bytes": size,
        "token_counts": calls,
        "status": build.status,
        "request_tokens": build.report.tokens,
        "trim_cpu_seconds": trim_cpu,
    }


def trim_time(views: list[Any]) -> float | None:
    """The baseline of one size: CPU seconds (median of ``REPEAT``) of what a runtime without
    our builder does with the same entry views in memory: turn them into Chat Completions
    messages (:func:`bench.context_vs_trim.journal_messages`), then LangChain's
    ``trim_messages`` to the same working budget with its recipe for a valid history
    (:func:`bench.context_vs_trim._baseline`, tiktoken counts). ``None`` without
    ``langchain-core`` (a bench-only requirement)."""
    from bench.context_vs_trim import _baseline, journal_messages

    try:
        from langchain_core.messages import convert_to_messages
    except ImportError:  # pragma: no cover - bench-only requirement
        return None
    cpu: list[float] = []
    for _ in range(REPEAT):
        start = time.process_time()
        _baseline(convert_to_messages(journal_messages(views)), WORKING)
        cpu.append(time.process_time() - start)
    return round(statistics.median(cpu), 4)


def exponent(rows: list[dict[str, Any]]) -> float | None:
    """Least-squares slope of log(seconds) over log(entries)."""
    pts = [(math.log(r["entries"]), math.log(r["seconds"])) for r in rows if r["seconds"] > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return round(sum((x - mx) * (y - my) for x, y in pts) / den, 3) if den else None


#: Goals: seconds at 20,000 entries, and the scaling exponent.
GOAL_SECONDS_20K = 2.0
GOAL_EXPONENT = 1.1
#: Goal: the build at most this many times ``trim_messages``' CPU time at every size.
GOAL_TRIM_RATIO = 2.0


def summary_rows(rows: list[dict[str, Any]], exp: float | None) -> list[dict[str, Any]]:
    """The ``make bench`` table rows: one per size (the baseline is the smallest size's time
    scaled linearly to this size, measured in the same run, so the ratio is how far from
    linear it is; the 20k row carries the 2 s goal), and the fitted exponent."""
    first = rows[0] if rows else None
    out = []
    for r in rows:
        linear = (
            first["seconds"] * r["entries"] / first["entries"]
            if first is not None and first["seconds"] > 0
            else None
        )
        is20k = 15_000 <= r["entries"] <= 25_000
        cpu = r.get("cpu_seconds", r["seconds"])
        out.append(
            {
                "metric": f"context build {r['entries']:,} entries, CPU s ({r['status']}, "
                f"{r['response_bytes']:,} bytes, wall {r['seconds']:.2f} s)",
                "what": "build_context (the pure builder) + the JSON the API returns, at a "
                "200k working budget, CPU seconds, median of 3 | baseline: the smallest "
                "size's wall time scaled linearly",
                "value": cpu,
                "unit": "s",
                "baseline": round(linear, 4) if linear is not None else None,
                "ratio": round(r["seconds"] / linear, 3) if linear else None,
                "target": f"<= {GOAL_SECONDS_20K:g} s" if is20k else None,
                "met": (cpu <= GOAL_SECONDS_20K and r["status"] == "ok") if is20k else None,
            }
        )
    for r in rows:
        trim = r.get("trim_cpu_seconds")
        cpu = r.get("cpu_seconds", r["seconds"])
        out.append(
            {
                "metric": f"context build vs trim_messages, {r['entries']:,} messages, CPU s",
                "what": "build_context + the API's JSON (token counts stored at import), CPU "
                "s, median of 3 | baseline: the same entry views as Chat Completions messages "
                f"+ trim_messages to the same {WORKING:,}-token budget, counting tiktoken "
                "itself (each distinct text once), CPU s",
                "value": cpu,
                "unit": "s",
                "baseline": trim,
                "ratio": round(cpu / trim, 2) if trim else None,
                "target": f"<= {GOAL_TRIM_RATIO:g}x trim_messages",
                "met": (cpu <= GOAL_TRIM_RATIO * trim and r["status"] == "ok") if trim else None,
            }
        )
    out.append(
        {
            "metric": "context build scaling exponent ("
            + " -> ".join(f"{r['entries'] // 1000}k" for r in rows)
            + ")",
            "what": "least-squares slope of log(wall s) over log(entries) of the rows above "
            "| baseline: 1.0, linear",
            "value": exp,
            "unit": "",
            "baseline": 1.0,
            "ratio": exp,
            "target": f"<= {GOAL_EXPONENT:g}",
            "met": exp is not None
            and exp <= GOAL_EXPONENT
            and all(r["status"] == "ok" for r in rows),
        }
    )
    return out


def run(small: bool = False, full: bool = False) -> dict[str, Any]:
    """Measure every size (:data:`SIZES`; :data:`SMALL_SIZES` with ``small``; :data:`FULL_SIZES`
    and :data:`LARGE` added with ``full`` or ``BENCH_CONTEXT_100K=1``), print them, return
    ``{"rows", "exponent", "summary"}``."""
    sizes = list(SMALL_SIZES if small else SIZES)
    if not small and (full or os.environ.get("BENCH_CONTEXT_100K") == "1"):
        sizes += [*FULL_SIZES, LARGE]
    rows = [measure(n) for n in sizes]
    exp = exponent(rows)
    for r in rows:
        print(
            f"context build {r['entries']:>7,} entries: {r['seconds']:.3f} s, "
            f"{r['response_bytes']:,} bytes, {r['token_counts']:,} token counts, {r['status']}; "
            f"trim_messages {r['trim_cpu_seconds']} CPU s"
        )
    print(f"scaling exponent: {exp}")
    summary = summary_rows(rows, exp)
    return {"rows": rows, "exponent": exp, "summary": summary}


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    run()
