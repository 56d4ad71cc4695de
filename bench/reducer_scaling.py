"""Reducer time against the number of deltas.

10, 100, 1,000 and 10,000 deltas of 20 operations each (16 adds, 2 closes, 2 supersedes).
Baseline, measured in the same run: inserting the same fact dicts into a plain dict (the
least work any reducer must do). Prints seconds, ops per second, the ratio to the baseline
and the fitted scaling exponent (log-log least squares; linear is 1.0, target at most 1.1),
of the reducer and of the baseline: the baseline's own exponent shows the timing is sound (it
scales linearly; with the cyclic garbage collector running during the timing, a plain dict
of a growing number of dicts does not: gen-2 collections walk every live object, so the
baseline itself fitted 1.7). Each timing is the best of nine (three for 10,000 deltas) with the collector paused
(``gc.collect()`` first, ``gc.disable()`` while timed), for both sides alike.
"""

from __future__ import annotations

import copy
import gc
import json
import math
import time
from typing import Any

from ledger_app.reducer import reduce, state_hash

OPS_PER_DELTA = 20


def make_deltas(n: int) -> list[dict[str, Any]]:
    """``n`` deltas; each adds 16 facts, closes 2 obligations and supersedes 2 facts."""
    deltas = []
    for d in range(1, n + 1):
        tool, asst = f"t{d:060d}"[-64:], f"a{d:060d}"[-64:]
        evidence = {
            tool: {
                "seq": 2 * d,
                "kind": "tool_result",
                "role": "tool",
                "is_error": False,
                "derived": False,
                "fold": d,
            },
            asst: {
                "seq": 2 * d + 1,
                "kind": "message",
                "role": "assistant",
                "is_error": False,
                "derived": False,
                "fold": d,
            },
        }
        ops: list[dict[str, Any]] = []
        for i in range(16):
            category = "open_obligation" if i < 2 else "verified_state"
            ops.append(
                {
                    "op": "add",
                    "fact": {
                        "id": f"f{d}.{i}",
                        "category": category,
                        "priority": "P1" if i < 2 else "P2",
                        "confidence": "verified",
                        "text": f"fact {i} of delta {d}: ran pytest tests/test_{i}.py, 8 passed",
                        "support": [{"entry": tool}],
                    },
                }
            )
        if d > 1:
            ops += [{"op": "close", "id": f"f{d - 1}.{i}", "evidence": [tool]} for i in range(2)]
            ops += [
                {
                    "op": "supersede",
                    "id": f"f{d - 1}.{i}",
                    "fact": {
                        "id": f"s{d}.{i}",
                        "category": "decision",
                        "priority": "P2",
                        "confidence": "reported",
                        "text": "superseding",
                        "support": [{"entry": asst}],
                    },
                }
                for i in (2, 3)
            ]
        else:
            ops += [copy.deepcopy(ops[-1]) for _ in range(4)]
            for j, op in enumerate(ops[-4:]):
                op["fact"]["id"] = f"pad{j}"
        deltas.append({"fold": d, "evidence": evidence, "ops": ops[:OPS_PER_DELTA]})
    return deltas


def baseline(deltas: list[dict[str, Any]]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for delta in deltas:
        for op in delta["ops"]:
            if "fact" in op:
                facts[op["fact"]["id"]] = dict(op["fact"])
    return facts


def _time(fn: Any, *args: Any, repeat: int = 3) -> float:
    best = math.inf
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn(*args)
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best


def fit_exponent(sizes: list[int], seconds: list[float]) -> float:
    """Slope of log(seconds) on log(size)."""
    xs, ys = [math.log(s) for s in sizes], [math.log(t) for t in seconds]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def run(sizes: tuple[int, ...] = (10, 100, 1000, 10000)) -> dict[str, Any]:
    """Measure and print; return the figures (written to JSON by the runner)."""
    rows = []
    for n in sizes:
        deltas = make_deltas(n)
        # the small sizes are the linear baseline's reference: best of nine, cheap there,
        # so that one slow timing of 10 ms on a shared machine does not move the verdict
        t = _time(reduce, None, deltas, repeat=9 if n < 10000 else 3)
        b = _time(baseline, deltas, repeat=9 if n < 10000 else 3)
        state_hash(reduce(None, deltas[: min(n, 10)]))
        rows.append(
            {
                "deltas": n,
                "ops": n * OPS_PER_DELTA,
                "seconds": t,
                "baseline_seconds": b,
                "ratio": t / b,
            }
        )
    exponent = fit_exponent([r["deltas"] for r in rows], [r["seconds"] for r in rows])
    base_exp = fit_exponent([r["deltas"] for r in rows], [r["baseline_seconds"] for r in rows])
    print(
        f"{'deltas':>8} {'ops':>9} {'reduce s':>10} {'ops/s':>10} {'baseline s':>11} {'ratio':>7}"
    )
    for r in rows:
        print(
            f"{r['deltas']:>8} {r['ops']:>9} {r['seconds']:>10.4f} {r['ops'] / r['seconds']:>10.0f} {r['baseline_seconds']:>11.4f} {r['ratio']:>7.1f}"
        )
    print(f"scaling exponent {exponent:.3f} (target <= 1.1); baseline's {base_exp:.3f}")
    last = rows[-1]
    # the linear baseline: the 100-delta reduction's time per delta, times the deltas
    ref = next((r for r in rows if r["deltas"] >= 100), rows[0])
    linear = ref["seconds"] * last["deltas"] / ref["deltas"]
    summary = [
        {
            "metric": f"reduce {last['deltas']:,} deltas vs linear",
            "what": f"ledger_app.reducer.reduce of {last['deltas']:,} generated deltas (best of "
            f"3, GC paused) | baseline: the {ref['deltas']:,}-delta reduce's time per delta x "
            "the deltas, i.e. exactly linear",
            "value": last["seconds"],
            "unit": "s",
            "baseline": linear,
            "ratio": last["seconds"] / linear,
            "target": "<= 1.5x linear",
            "met": last["seconds"] / linear <= 1.5,
        },
        {
            "metric": f"reduce {last['deltas']:,} deltas vs dict inserts",
            "what": "the same reduce | baseline: the same fact dicts put in a plain dict",
            "value": last["seconds"],
            "unit": "s",
            "baseline": last["baseline_seconds"],
            "ratio": last["ratio"],
        },
        {
            "metric": f"reducer scaling exponent {rows[0]['deltas']:,} -> {last['deltas']:,} deltas",
            "what": "log-log slope of reduce time over deltas | baseline: the dict inserts' own "
            "slope, GC paused for both",
            "value": exponent,
            "baseline": base_exp,
            "ratio": exponent / base_exp if base_exp else None,
            "target": "<= 1.1",
            "met": exponent <= 1.1,
        },
    ]
    result = {"rows": rows, "exponent": exponent, "baseline_exponent": base_exp}
    return {**result, "linear_seconds": linear, "summary": summary}


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
