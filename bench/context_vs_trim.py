"""Our context builder against LangChain's ``trim_messages`` on the same corpus.

For every transcript of ``tests/fixtures/corpus/`` and budgets of 8,000, 32,000 and 128,000
tokens, both build the request for the next model call:

* **ours**: :func:`ledger_app.context.build_context` over the journal's entries, with the
  artifact receipts ``journal_app.services.artifact_store`` would give results over
  ``ARTIFACT_THRESHOLD_TOKENS`` (2,000) and the mechanical ledger of
  :func:`tests.support.offline_fold.offline_fold` (folded once per transcript, outside the timing:
  the service stores folds, it does not redo them per build);
* **baseline**: ``langchain_core.messages.trim_messages`` over the same journal as Chat
  Completions messages (``strategy="last"``, ``include_system=True``, ``start_on="human"``,
  its documented recipe for a valid history), counting with the same tiktoken figures.

Columns: orphaned tool calls or results in the output (our validator's pairing checks),
pins lost or altered (an authoritative message's pin, as a context shows it, not present
byte for byte), tokens used, and
the median time per build. Builds that end in our explicit failure state are counted apart
(no request, so nothing orphaned or lost).

``langchain-core`` is a bench-only requirement: ``pip install langchain-core`` into the
virtualenv; it is not a project dependency. Run: ``python -m bench.context_vs_trim``.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
BUDGETS = (8_000, 32_000, 128_000)
REPEAT = 3
ARTIFACT_OVER = 2_000
PAIRING = (
    "orphan_tool_call",
    "orphan_tool_result",
    "split_parallel_calls",
    "tool_result_out_of_place",
)
SCOPE = {"tenant": "bench", "session": "s", "lane": "main", "branch": "main"}


def _sources() -> list[Path]:
    files = sorted(
        p
        for p in CORPUS.glob("*/*")
        if p.is_file()
        and p.suffix in (".json", ".jsonl", ".traj")
        and p.parent.name != "opencode-export"
    )
    return files + [CORPUS / "opencode-export" / "khala-sessions"]


def _views(path: Path) -> tuple[list[Any], dict[str, int]]:
    from journal_app.chain import prepare_entries
    from journal_app.formats import parse_path
    from ledger_app.entry_view import EntryView

    prepared = prepare_entries(
        scope=SCOPE, start_seq=1, parent_hash="", items=parse_path(path).entries, chunk_bytes=4096
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


def _receipts(entries: list[Any], count: Any) -> dict[str, dict[str, Any]]:
    from journal_app.artifacts import make_preview, media_type_of
    from journal_app.hashing import chunk_hash

    out = {}
    for e in entries:
        if e.kind == "tool_result" and count(e.text) > ARTIFACT_OVER:
            digest = chunk_hash(e.text.encode("utf-8"))
            mtype = media_type_of(e.text)
            out[e.entry_hash] = {
                "reference": f"artifact://bench/{digest}",
                "media_type": mtype,
                "original_size": {"tokens": count(e.text), "bytes": len(e.text.encode("utf-8"))},
                "preview": make_preview(e.text, mtype),
                "content_hash": f"sha256:{digest}",
                "source_tool": e.tool_name,
            }
    return out


def journal_messages(entries: list[Any]) -> list[dict[str, Any]]:
    """The journal as plain Chat Completions messages, uncompacted and unrepaired (what a
    runtime without our builder would hand to a trimmer): calls without results stay."""
    out: list[dict[str, Any]] = []
    for e in entries:
        if e.derived or e.kind in ("reasoning", "event"):
            continue
        if e.kind == "message":
            if e.text:
                out.append({"role": e.role, "content": e.text})
        elif e.kind == "tool_call":
            args = e.content.get("arguments")
            call = {
                "id": e.tool_call_id,
                "type": "function",
                "function": {
                    "name": e.tool_name or "tool",
                    "arguments": args
                    if isinstance(args, str)
                    else json.dumps(args, ensure_ascii=False),
                },
            }
            if (
                out
                and out[-1]["role"] == "assistant"
                and (out[-1].get("tool_calls") or out[-1]["content"])
            ):
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif e.kind == "tool_result":
            out.append({"role": "tool", "tool_call_id": e.tool_call_id, "content": e.text or " "})
    return out


def _pins(entries: list[Any], ledger: Any = None, *, listed_verbatim: bool = False) -> list[str]:
    """The pins a request must carry byte for byte, as
    :func:`ledger_app.services.context_reads.session_pins` says for a stored journal: each
    authoritative message's pin as a context shows it (harness blocks such as Codex's
    ``<environment_context>`` left out, attachments as receipts:
    :func:`ledger_app.pin_facts.pin_fact`, :func:`ledger_app.pins.pin_shown_text`), less the
    pins ``ledger`` (the state the build ended with) has retired, superseded or closed (a
    done request is one line); of the open requests the ledger holds, the latest three are
    expected verbatim, the next ten as their one line (:func:`ledger_app.pins.request_line`)
    and the rest not at all (docs/design.md 6: :func:`ledger_app.pins.open_requests_split`). The
    same pins for both sides; ``listed_verbatim`` (the trimmed baseline, which has no record
    lines): the next ten are expected as their whole text."""
    from ledger_app.pin_facts import is_pin_source, pin_fact
    from ledger_app.pins import open_requests_split, pin_shown_text, request_line

    facts = {
        f["support"][0]["entry"]: f
        for f in ((ledger or {}).get("facts") or {}).values()
        if f.get("pin") and f.get("support")
    }
    _, listed, counted = open_requests_split(list(facts.values()))
    lines = {id(f) for f in listed}
    left = {id(f) for f in counted}
    out = []
    for e in entries:
        if not is_pin_source(e):
            continue
        fact = facts.get(e.entry_hash) or pin_fact(e)
        if fact.get("lifecycle", "active") != "active" or id(fact) in left:
            continue
        one_line = id(fact) in lines and not listed_verbatim
        out.append(request_line(fact) if one_line else pin_shown_text(fact))
    return out


def _pins_lost(pins: list[str], messages: list[dict[str, Any]], system: Any = None) -> int:
    from ledger_app.validation import message_texts

    texts = [t for m in messages for t in message_texts(m)]
    if isinstance(system, list):
        texts += [b.get("text", "") for b in system]
    return sum(1 for p in pins if not any(p in t for t in texts))


def _median(fn: Any) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(REPEAT):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


class _Folds:
    """The mechanical ledger of one transcript, folded once per ``upto`` and kept (the
    service stores folds; a build does not redo them)."""

    def __init__(self, entries: list[Any]) -> None:
        self.entries = entries
        self.done: dict[int, Any] = {}

    def __call__(self, upto: int) -> Any:
        from tests.support.offline_fold import offline_fold

        if upto not in self.done:
            self.done[upto] = offline_fold(self.entries, upto=upto)
        return self.done[upto]


def _ours(entries: list[Any], counts: dict[str, int], receipts: Any, fold: Any, budget: int) -> Any:
    from ledger_app.context import build_context

    return build_context(
        entries=entries,
        working_budget=budget,
        hard_limit=budget,
        receipts=receipts,
        fold=fold,
        token_counts=counts,
    )


def _baseline(lc_input: list[Any], budget: int) -> Any:
    """``trim_messages`` with its recipe for a valid history, counting with tiktoken (each
    distinct text once, as ours does)."""
    from langchain_core.messages import trim_messages

    from journal_app.tokens import count_tokens
    from ledger_app.validation import memo_counter

    counted = memo_counter(count_tokens)

    def lc_tokens(message: Any) -> int:
        content = message.content
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        n = 4 + counted(text) if text else 4
        for call in getattr(message, "tool_calls", None) or []:
            n += counted(call["name"]) + counted(json.dumps(call["args"], ensure_ascii=False))
        return n

    return trim_messages(
        lc_input,
        max_tokens=budget,
        token_counter=lambda msgs: sum(lc_tokens(m) for m in msgs),
        strategy="last",
        include_system=True,
        start_on="human",
        allow_partial=False,
    )


def run() -> dict[str, Any]:
    """Run the comparison, print the table, return ``{"rows", "summary"}`` (JSON-ready)."""
    try:
        from langchain_core.messages import convert_to_messages, convert_to_openai_messages
    except ImportError as exc:  # pragma: no cover - bench-only requirement
        raise SystemExit(
            "bench.context_vs_trim needs langchain-core: pip install langchain-core"
        ) from exc

    from journal_app.tokens import count_tokens
    from ledger_app.validation import Meter, validate_request

    rows: list[dict[str, Any]] = []
    for path in _sources():
        entries, counts = _views(path)
        receipts = _receipts(entries, count_tokens)
        plain = journal_messages(entries)
        lc_input = convert_to_messages(plain)
        fold = _Folds(entries)
        fold_time = 0.0
        for budget in BUDGETS:
            start = time.perf_counter()
            _ours(entries, counts, receipts, fold, budget)  # warm-up: the folds happen here, once
            fold_time = max(fold_time, time.perf_counter() - start)
            ours = functools.partial(_ours, entries, counts, receipts, fold, budget)
            baseline = functools.partial(_baseline, lc_input, budget)
            t_ours, result = _median(ours)
            t_trim, trimmed = _median(baseline)
            meter = Meter()
            pins = _pins(entries, result.ledger)
            if result.status == "ok":
                view = result.model_view
                request = {k: v for k, v in view.items() if k != "format"}
                report = validate_request(request, meter=meter)
                ours_orphans = len(report.failed(*PAIRING))
                ours_lost = _pins_lost(pins, view["messages"], view.get("system"))
                ours_tokens = report.tokens
            else:
                ours_orphans = ours_lost = 0
                ours_tokens = None
            out = convert_to_openai_messages(trimmed)
            trim_report = validate_request(out, fmt="openai", meter=meter)
            rows.append(
                {
                    "transcript": path.name,
                    "budget": budget,
                    "entries": len(entries),
                    "pins": len(pins),
                    "ours_status": result.status,
                    "ours_orphans": ours_orphans,
                    "ours_pins_lost": ours_lost,
                    "ours_tokens": ours_tokens,
                    "ours_seconds": round(t_ours, 4),
                    "trim_orphans": len(trim_report.failed(*PAIRING)),
                    "trim_pins_lost": _pins_lost(
                        _pins(entries, result.ledger, listed_verbatim=True), out
                    ),
                    "trim_tokens": trim_report.tokens,
                    "trim_seconds": round(t_trim, 4),
                    "fold_seconds_once": round(fold_time, 4),
                }
            )
    summary: dict[str, Any] = {}
    for budget in BUDGETS:
        sel = [r for r in rows if r["budget"] == budget]
        ours_t = sum(r["ours_seconds"] for r in sel)
        trim_t = sum(r["trim_seconds"] for r in sel)
        summary[str(budget)] = {
            "ours_orphans": sum(r["ours_orphans"] for r in sel),
            "ours_pins_lost": sum(r["ours_pins_lost"] for r in sel),
            "ours_failed": sum(1 for r in sel if r["ours_status"] != "ok"),
            "trim_orphans": sum(r["trim_orphans"] for r in sel),
            "trim_pins_lost": sum(r["trim_pins_lost"] for r in sel),
            "ours_seconds": round(ours_t, 4),
            "trim_seconds": round(trim_t, 4),
            "time_ratio": round(ours_t / trim_t, 2) if trim_t else None,
        }
    _print(rows, summary)
    return {
        "rows": rows,
        "budgets": summary,
        "summary": summary_rows(summary),
        "token_source": "tiktoken:o200k_base (both sides)",
    }


#: The goal row of ``make bench``: our build at most twice ``trim_messages``' time
#: on the same messages and budget, with no orphan call or result and no instruction lost.
TIME_GOAL = 2.0


def summary_rows(budgets: dict[str, Any]) -> list[dict[str, Any]]:
    """One row of the ``make bench`` table per budget: our seconds over every transcript,
    the baseline (``trim_messages``' seconds on the same messages, same run), the ratio, and
    met when the ratio is at most :data:`TIME_GOAL` with 0 orphans and 0 instructions lost
    (failed builds are counted apart: an explicit failure sends nothing)."""
    out = []
    for budget, s in budgets.items():
        ratio = s["time_ratio"]
        out.append(
            {
                "metric": f"context build vs trim_messages, budget {int(budget):,} "
                f"({s['ours_orphans']} orphans, {s['ours_pins_lost']} instructions lost, "
                f"{s['ours_failed']} failed)",
                "what": "build_context over each corpus transcript, median s summed | "
                "baseline: trim_messages (its valid-history recipe) over the same journal as "
                "Chat Completions messages, same budget, same tiktoken counts",
                "value": s["ours_seconds"],
                "unit": "s",
                "baseline": s["trim_seconds"],
                "ratio": ratio,
                "target": f"<= {TIME_GOAL:g}x trim_messages time, 0 orphans, 0 instructions lost",
                "met": ratio is not None
                and ratio <= TIME_GOAL
                and s["ours_orphans"] == 0
                and s["ours_pins_lost"] == 0,
            }
        )
    return out


def _print(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    head = (
        f"{'transcript':42} {'budget':>7} | {'ours':>6} {'orph':>4} {'lost':>4} {'tokens':>7} "
        f"{'sec':>7} | {'trim orph':>9} {'lost':>4} {'tokens':>7} {'sec':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['transcript'][:42]:42} {r['budget']:>7} | {r['ours_status']:>6} {r['ours_orphans']:>4} "
            f"{r['ours_pins_lost']:>4} {str(r['ours_tokens']):>7} {r['ours_seconds']:>7.3f} | "
            f"{r['trim_orphans']:>9} {r['trim_pins_lost']:>4} {r['trim_tokens']:>7} {r['trim_seconds']:>7.3f}"
        )
    print()
    print(
        f"{'budget':>7} | {'ours orphans':>12} {'pins lost':>9} {'failed':>6} | {'trim orphans':>12} {'pins lost':>9} | time ours/trim"
    )
    for budget, s in summary.items():
        print(
            f"{budget:>7} | {s['ours_orphans']:>12} {s['ours_pins_lost']:>9} {s['ours_failed']:>6} | "
            f"{s['trim_orphans']:>12} {s['trim_pins_lost']:>9} | {s['ours_seconds']:.3f}s / "
            f"{s['trim_seconds']:.3f}s = {s['time_ratio']}"
        )


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    run()
