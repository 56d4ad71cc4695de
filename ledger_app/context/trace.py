"""The debug trace of a build, bounded for the API: summaries, counts, lists cut.

Pure module: no Django, no database. :func:`bounded_trace` keeps at most :data:`TRACE_CAP`
entries of each list of :func:`ledger_app.context.build.build_context`'s trace (the first and
the last halves) and says how many it left out, so a response does not grow with the session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Most entries of each list a bounded debug trace keeps (the API's response must
#: not grow with the session); the first half and the last half are kept.
TRACE_CAP = 100


def capped(items: Sequence[Any], cap: int = TRACE_CAP) -> tuple[list[Any], int]:
    """``items`` cut to at most ``cap``: the first ``cap // 2`` and the last ``cap - cap // 2``
    (a session's oldest and newest decisions are the telling ones), and how many were left
    out. ``cap`` 0 keeps nothing."""
    if len(items) <= cap:
        return list(items), 0
    head = cap // 2
    tail = cap - head
    return list(items[:head]) + (list(items[-tail:]) if tail else []), len(items) - cap


def bounded_trace(trace: Mapping[str, Any], cap: int = TRACE_CAP) -> dict[str, Any]:
    """The debug trace of :func:`build_context` with every list bounded, for the
    API: its size depends on ``cap``, not on the session.

    * ``decisions``: at most ``cap`` (first and last halves), with ``decisions_summary``:
      one row per step and action, ``{"step", "action", "count", "effect"}`` (tokens), over
      all of them;
    * ``rounds.folded_out``, ``notes``, ``artifacts``, ``sources``, ``ledger.facts_left_out``,
      each ``validation[i].problems``: at most ``cap`` each;
    * ``request``: the model view is not repeated: ``{"messages": n, "same_as": "model_view"}``;
    * ``left_out``: how many items each bounded list lost (``{"decisions": 12000, ...}``; an
      empty dict when nothing was cut).

    The input is not changed; lists kept are shallow copies.
    """
    out = dict(trace)
    left: dict[str, int] = {}

    def cut(name: str, items: Any) -> Any:
        if not isinstance(items, list):
            return items
        shown, n = capped(items, cap)
        if n:
            left[name] = n
        return shown

    decisions = list(trace.get("decisions") or [])
    summary: dict[tuple[Any, Any], dict[str, Any]] = {}
    for d in decisions:
        key = (d.get("step"), d.get("action"))
        row = summary.setdefault(key, {"step": key[0], "action": key[1], "count": 0, "effect": 0})
        row["count"] += 1
        row["effect"] += d.get("effect") or 0
    out["decisions_summary"] = list(summary.values())
    out["decisions"] = cut("decisions", decisions)
    for name in ("notes", "artifacts", "sources"):
        if name in trace:
            out[name] = cut(name, trace[name])
    if isinstance(trace.get("rounds"), Mapping):
        rounds = dict(trace["rounds"])
        rounds["folded_out_count"] = len(rounds.get("folded_out") or [])
        rounds["folded_out"] = cut("rounds.folded_out", rounds.get("folded_out"))
        out["rounds"] = rounds
    if isinstance(trace.get("ledger"), Mapping):
        ledger = dict(trace["ledger"])
        ledger["facts_left_out"] = cut("ledger.facts_left_out", ledger.get("facts_left_out"))
        out["ledger"] = ledger
    reports = []
    for i, r in enumerate(trace.get("validation") or []):
        r = dict(r)
        r["problems"] = cut(f"validation[{i}].problems", r.get("problems"))
        reports.append(r)
    out["validation"] = reports
    request = trace.get("request")
    if isinstance(request, Mapping):
        out["request"] = {
            "messages": len(request.get("messages") or []),
            "same_as": "model_view",
        }
    out["left_out"] = left
    return out
