"""Fold overhead excluding model time, for a 24-entry fold.

A 24-entry range (a system rule, a user goal, 11 tool calls with their results: reads, a
pytest run, a failed command) is folded by the model writer against the scripted
OpenAI-compatible server on 127.0.0.1 answering at once (one writer and one verifier call,
one proposed fact, accepted). Overhead = the fold's wall time minus the time spent inside
the two model calls as the client measured it (request to response, retries included),
i.e. what our code adds around the models: reading the range, rendering the prompts,
validating the replies, the rules, the reducer, the pin check, writing the fold, the
attempt, its proposals and verdicts.

Baselines measured in the same run on the same entries: the mechanical fold (no writer
work at all) and the offline writer. Each repetition runs in a transaction rolled back at
the end, so nothing stays in the database. Prints median and p95 (milliseconds) and the
ratio of each to the mechanical fold's median.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

from django.db import transaction

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.model_client import ModelClient
from ledger_app.model_writer import ModelWriter
from ledger_app.services import ledger_fold
from tests.support.scripted_server import ScriptedServer

ENTRIES = 24


def fold_items() -> list[Any]:
    """24 entries: 2 messages, then 11 tool calls each followed by its result."""
    items = [
        message("system", "Never modify the payments tables without asking the user first."),
        message("user", "Fix the refund rounding in billing/refunds.py and run its tests."),
    ]
    for i in range(9):
        items.append(tool_call(f"r{i}", "read_file", {"path": f"billing/module_{i}.py"}))
        items.append(tool_result(f"r{i}", f"def f{i}(x):\n    return round(x, 2)\n" * 20))
    items.append(tool_call("t1", "exec", {"command": "pytest tests/test_refunds.py"}))
    items.append(tool_result("t1", "........\n8 passed in 0.12s", exit_code=0))
    items.append(tool_call("m1", "exec", {"command": "make lint"}))
    items.append(tool_result("m1", "ruff: 2 errors", is_error=True, exit_code=1))
    assert len(items) == ENTRIES
    return items


#: One reply that both validates as the writer's proposal and as the verifier's report.
REPLY = json.dumps(
    {
        "facts": [
            {
                "key": "f1",
                "category": "verified_state",
                "priority": "P1",
                "confidence": "verified",
                "text": "8 tests in tests/test_refunds.py passed",
                "support": [22],
            }
        ],
        "verdicts": [
            {
                "key": "f1",
                "entailment": "entailed",
                "entailment_reason": "seq 22 shows 8 passed",
                "temporal": "valid",
                "temporal_reason": "nothing is closed",
            }
        ],
    }
)


def _percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def _one(n: int, writer: Any) -> tuple[float, float, str]:
    """(wall seconds, model seconds, outcome) of one fold, rolled back."""
    with transaction.atomic():
        tenant = tenant_ensure(slug=f"bench-fold-{n}")
        journal = journal_ensure(session=session_ensure(tenant=tenant, key="s"))
        journal_append(journal=journal, items=fold_items())
        journal.refresh_from_db()
        t0 = time.perf_counter()
        fold = ledger_fold(journal=journal, writer=writer).fold
        wall = time.perf_counter() - t0
        assert fold is not None and fold.manifest["covered"]["entries"] == ENTRIES
        model = sum(c["total_s"] for c in fold.manifest.get("model_calls", []))
        outcome = fold.outcome
        transaction.set_rollback(True)
    return wall, model, outcome


def run(small: bool = False) -> dict[str, Any]:
    """Median and p95 of the fold overhead (ms); baselines mechanical and offline.

    Returns:
        ``{"entries", "repetitions", "model": {...}, "offline": {...}, "mechanical": {...},
        "summary": [...]}``; each writer dict has ``median_ms``, ``p95_ms`` (for the model:
        of the overhead, wall minus model time) and ``model_median_ms``.
    """
    # 40 in the default run (its 10 minutes); 100 with --full
    reps = 20 if small else 100 if os.environ.get("BENCH_FULL") == "1" else 40
    with ScriptedServer() as server:
        server.answer_all(REPLY)
        config = server.config()
        model_writer = ModelWriter(config, client=ModelClient(config))
        writers: dict[str, Any] = {
            "mechanical": "mechanical",
            "offline": "offline",
            "model": model_writer,
        }
        for w in writers.values():  # warm-up: imports, prepared queries, connections
            _one(-1, w)
        samples: dict[str, list[tuple[float, float, str]]] = {k: [] for k in writers}
        for i in range(reps):
            for name, w in writers.items():  # interleaved, so drift hits all three alike
                samples[name].append(_one(i, w))
    results: dict[str, Any] = {"entries": ENTRIES, "repetitions": reps}
    for name, rows in samples.items():
        overhead = [(wall - model) * 1000 for wall, model, _ in rows]
        results[name] = {
            "median_ms": statistics.median(overhead),
            "p95_ms": _percentile(overhead, 95),
            "model_median_ms": statistics.median(m * 1000 for _, m, _ in rows),
            "outcomes": sorted({o for _, _, o in rows}),
        }
    base = results["mechanical"]["median_ms"]
    print(f"{ENTRIES}-entry fold, {reps} repetitions, scripted model answering at once")
    print(f"{'writer':<12}{'median ms':>11}{'p95 ms':>10}{'model ms':>10}{'x mechanical':>14}")
    for name in writers:
        r = results[name]
        print(
            f"{name:<12}{r['median_ms']:>11.2f}{r['p95_ms']:>10.2f}"
            f"{r['model_median_ms']:>10.2f}{r['median_ms'] / base:>14.2f}"
        )
    model = results["model"]
    results["summary"] = [
        {
            "metric": "model fold overhead, median (excl. model time)",
            "what": "wall ms of ledger_fold of a 24-entry range with the model writer against the scripted server answering at once, minus the two model calls' client-measured time | baseline: the mechanical fold's median (no writer work) on the same entries",
            "value": model["median_ms"],
            "unit": "ms",
            "baseline": base,
            "ratio": model["median_ms"] / base,
        },
        {
            "metric": "model fold overhead, p95 (excl. model time)",
            "what": "the same folds' 95th percentile | baseline: the mechanical fold's p95",
            "value": model["p95_ms"],
            "unit": "ms",
            "baseline": results["mechanical"]["p95_ms"],
            "ratio": model["p95_ms"] / results["mechanical"]["p95_ms"],
        },
        {
            "metric": "offline fold, median",
            "what": "wall ms of ledger_fold of the same 24 entries with the offline writer "
            "(no model) | baseline: the mechanical fold's median",
            "value": results["offline"]["median_ms"],
            "unit": "ms",
            "baseline": base,
            "ratio": results["offline"]["median_ms"] / base,
        },
    ]
    return results
