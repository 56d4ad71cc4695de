"""Mandatory state against session length (docs/design.md 5.4, 5.5): does the ledger conclude?

Generated sessions (:mod:`bench.generator`, corpus-shaped) of 2,000, 20,000 and 100,000
entries, each in a fresh journal, folded by :func:`ledger_app.services.ledger_compact` with
the offline writer (the one fold path, consolidation included). Per length:

* :func:`ledger_app.budget.mandatory_state` of the folded ledger: governing pins, open request
  pins and active P1 facts, tokens (P0 shown verbatim + P1);
* whether it stays under ``LEDGER_CHECKPOINT_TARGET_TOKENS`` unless governing text alone
  exceeds it;
* whether :func:`ledger_app.services.context.context_build` builds a context at the default
  window (``LEDGER_WINDOW_TOKENS``, 270,000) and at 128,000 tokens (the window as both the
  working budget and the hard limit: the request only has to fit the model);

and over the lengths the fitted exponent of mandatory tokens against entries (goal: at most
0.3 from 2k to 100k entries).

**The context page**, on the same folded journals: ``GET .../context/``
through Django's test client (login, middleware, :func:`ledger_app.services.context.context_preview`
at the default budgets, the template), median of ``PAGE_REPEAT``, and the service call alone;
goal under 2 s at 20,000 entries. Baseline, same run: what a page built by plain trimming
pays: the journal's rows read (``Entry`` rows of the journal, bodies included) as Chat
Completions messages, then LangChain's ``trim_messages`` (its recipe for a valid history,
:func:`bench.context_vs_trim._baseline`) to the same working budget; the ratio's goal is 2x.

Sizes: ``BENCH_MANDATORY_SIZES`` (comma-separated entries) overrides; otherwise 2k and 20k in
the default run, 100k added with ``--full`` (a 100k-entry fold takes longer than the default
run's 10 minutes on 2 cores: 1,165 s on the ledger before lifecycles ended anything, against
109 s for 20k), 500 and 2k with ``--small``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from typing import Any

from django.conf import settings
from django.test.utils import override_settings

from bench.generator import iter_session
from bench.profiling import profiled
from bench.reducer_scaling import fit_exponent
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.budget import mandatory_state
from ledger_app.services import ledger_compact, ledger_state
from ledger_app.services.context import context_build

#: the windows a context must build at (the default and a common smaller model's)
WINDOWS = (270_000, 128_000)
#: the goal on the fitted exponent of mandatory tokens over entries
GOAL_EXPONENT = 0.3
#: context page timings per length (median of these), and the goals at 20k entries
PAGE_REPEAT = 3
GOAL_PAGE_SECONDS = 2.0
GOAL_PAGE_RATIO = 2.0


def _median_time(fn: Any, repeat: int = PAGE_REPEAT) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def page_times(journal: Any, profile: bool = False) -> dict[str, Any]:
    """The context page's server time, the service's alone, and the trimming baseline's
    (seconds, medians; see the module docstring); ``profile``: then one more request under
    cProfile, its product functions printed (:func:`bench.profiling.profiled`)."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from bench.context_vs_trim import _baseline, journal_messages
    from journal_app.models import Entry, Membership
    from ledger_app.background import wait_for_background
    from ledger_app.services.context import context_preview
    from ledger_app.services.context_records import context_budgets
    from ledger_app.services.entries import entry_view

    try:
        from langchain_core.messages import convert_to_messages
    except ImportError:  # pragma: no cover - bench-only requirement
        convert_to_messages = None
    tenant = journal.session.tenant
    user = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:8]}", password="x")
    Membership.objects.get_or_create(
        user=user, tenant=tenant, defaults={"role": Membership.Role.ADMIN}
    )
    client = Client()
    client.force_login(user)
    scope = [tenant.slug, journal.session.key, journal.lane, journal.branch]
    url = reverse("ledger:context", args=scope)

    def page() -> None:
        response = client.get(url, secure=True)  # secure: DEBUG off redirects to https
        assert response.status_code == 200, (url, response.status_code)

    budget = context_budgets().working_budget

    def trimmed() -> None:
        rows = Entry.objects.filter(journal=journal).order_by("seq")
        messages = journal_messages([entry_view(e) for e in rows.iterator(chunk_size=2000)])
        _baseline(convert_to_messages(messages), budget)

    page()  # warm-up: template and query caches
    # and the stored ledger check a first view may queue on the background thread: timed
    # beside it, the page measured its share of the interpreter (bench/ui_pages.py ``_time``)
    wait_for_background()
    out = {
        "page_seconds": _median_time(page),
        "service_seconds": _median_time(
            lambda: context_preview(journal=journal, views=("model", "debug"))
        ),
        "trim_seconds": _median_time(trimmed) if convert_to_messages else None,
        "working_budget": budget,
    }
    if profile:
        profiled(page, f"the context page at {journal.head_seq:,} entries (one request)")
    return out


def _journal(n: int, seed: int) -> Any:
    """A fresh journal holding a generated session of about ``n`` entries."""
    tenant = tenant_ensure(slug="bench-mandatory")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key=f"mandatory-{n}-{seed}"))
    batch: list[Any] = []
    for item in iter_session(n, seed=seed):
        batch.append(item)
        if len(batch) >= 2_000:
            journal_append(journal=journal, items=batch, notify=False)
            batch = []
    if batch:
        journal_append(journal=journal, items=batch, notify=False)
    journal.refresh_from_db()
    return journal


def measure(n: int, seed: int = 23, profile: bool = False) -> dict[str, Any]:
    """Fold a generated session of about ``n`` entries and measure its mandatory state and
    whether a context builds at each of :data:`WINDOWS` (``profile``: :func:`page_times`'s)."""
    t0 = time.perf_counter()
    journal = _journal(n, seed)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = ledger_compact(journal=journal, writer="offline")
    fold_s = time.perf_counter() - t0
    state = ledger_state(journal)
    m = mandatory_state(state)
    target = settings.LEDGER_CHECKPOINT_TARGET_TOKENS
    row: dict[str, Any] = {
        "entries": journal.head_seq,
        "folds": len(report.folds),
        "facts": len(state.get("facts", {})),
        "governing_tokens": m.governing_tokens,
        "request_tokens": m.request_tokens,
        "p1_tokens": m.p1_tokens,
        "mandatory_tokens": m.total,
        "mandatory_facts": m.facts,
        "under_target": m.total <= target or m.governing_tokens > target,
        "load_seconds": round(load_s, 2),
        "fold_seconds": round(fold_s, 2),
        "stopped": report.stopped,
        "contexts": {},
    }
    for window in WINDOWS:
        t0 = time.perf_counter()
        result = context_build(
            journal=journal,
            working_budget=window,
            hard_limit=window,
            views=("model", "debug"),
        )
        reason = ""
        if result.failure:
            reason = str(result.failure.get("reason") or "")[:200]
        row["contexts"][window] = {
            "status": result.status,
            "tokens": result.debug_trace.get("tokens", {}).get("request"),
            "seconds": round(time.perf_counter() - t0, 2),
            "reason": reason,
        }
    row["page"] = page_times(journal, profile=profile)
    return row


def exponent(rows: list[dict[str, Any]]) -> float | None:
    """Least-squares slope of log(mandatory tokens) over log(entries)
    (:func:`bench.reducer_scaling.fit_exponent`); ``None`` with fewer than two distinct sizes
    with a non-zero figure."""
    pts = [(r["entries"], r["mandatory_tokens"]) for r in rows if r["mandatory_tokens"] > 0]
    if len({n for n, _ in pts}) < 2:
        return None
    return round(fit_exponent([n for n, _ in pts], [float(t) for _, t in pts]), 3)


def _sizes(small: bool, full: bool) -> list[int]:
    given = os.environ.get("BENCH_MANDATORY_SIZES")
    if given:
        return [int(s) for s in given.split(",") if s.strip()]
    if small:
        return [500, 2_000]
    return [2_000, 20_000, 100_000] if full else [2_000, 20_000]


def summary_rows(rows: list[dict[str, Any]], exp: float | None) -> list[dict[str, Any]]:
    """The ``make bench`` rows: per length the mandatory tokens (with its three parts) against
    the checkpoint target, and per window whether a context builds; then the exponent."""
    target = settings.LEDGER_CHECKPOINT_TARGET_TOKENS
    out: list[dict[str, Any]] = []
    for r in rows:
        exempt = r["governing_tokens"] > target
        out.append(
            {
                "metric": f"mandatory state at {r['entries']:,} entries (governing "
                f"{r['governing_tokens']:,} / open requests {r['request_tokens']:,} / P1 "
                f"{r['p1_tokens']:,})" + (": governing alone is over the target" if exempt else ""),
                "value": r["mandatory_tokens"],
                "unit": "tokens",
                "what": "budget.mandatory_state of the ledger ledger_compact (offline writer) "
                "left: governing + open request pins + active P1, tokens | target: "
                "LEDGER_CHECKPOINT_TARGET_TOKENS",
                "target": f"<= {target:,} unless governing > it",
                "met": r["under_target"],
            }
        )
        for window, c in r["contexts"].items():
            out.append(
                {
                    "metric": f"context at {r['entries']:,} entries, window {window:,}",
                    "value": c["status"],
                    "unit": f"{c['tokens']:,} tokens" if c["tokens"] else "",
                    "what": "context_build of the folded journal with this window as working "
                    "budget and hard limit: ok or the failure state | no baseline",
                    "target": "ok",
                    "met": c["status"] == "ok",
                }
            )
        p = r.get("page")
        if p is None:  # a measurement that did not time the page
            continue
        big = r["entries"] >= 15_000
        ratio = p["page_seconds"] / p["trim_seconds"] if p["trim_seconds"] else None
        out.append(
            {
                "metric": f"context page at {r['entries']:,} entries (service alone "
                f"{p['service_seconds']:.2f} s)",
                "what": "GET .../context/ via Django's test client (context_preview at the default "
                f"budgets + template) | baseline: the journal's rows read as messages + "
                f"trim_messages to the same {p['working_budget']:,}-token budget",
                "value": p["page_seconds"],
                "unit": "s",
                "baseline": p["trim_seconds"],
                "ratio": ratio,
                "target": f"<= {GOAL_PAGE_SECONDS:g} s, <= {GOAL_PAGE_RATIO:g}x" if big else None,
                "met": (
                    p["page_seconds"] <= GOAL_PAGE_SECONDS
                    and (ratio is None or ratio <= GOAL_PAGE_RATIO)
                )
                if big
                else None,
            }
        )
    span = f"{rows[0]['entries']:,} -> {rows[-1]['entries']:,}" if rows else "-"
    out.append(
        {
            "metric": f"mandatory state exponent over entries ({span})",
            "what": "slope of log(mandatory tokens) over log(entries) of the rows above | "
            "bounded is 0, linear growth 1",
            "value": exp,
            "target": f"<= {GOAL_EXPONENT:g}",
            # no exponent (one length measured): no verdict, not a miss
            **({"met": exp <= GOAL_EXPONENT} if exp is not None else {}),
        }
    )
    return out


def run(small: bool = False, full: bool = False, profile: bool = False) -> dict[str, Any]:
    """Measure every length, print the figures, return ``{"rows", "exponent", "summary"}``;
    ``profile``: also a cProfile of one context page request at each length."""
    full = full or os.environ.get("BENCH_FULL") == "1"
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-media-") as media,
        override_settings(MEDIA_ROOT=media),
    ):
        for n in _sizes(small, full):
            r = measure(n, profile=profile)
            rows.append(r)
            ctx = ", ".join(
                f"{w:,}: {c['status']}" + (f" ({c['reason'][:100]})" if c["reason"] else "")
                for w, c in r["contexts"].items()
            )
            p = r["page"]
            print(
                f"{r['entries']:>7,} entries: context page {p['page_seconds']:.2f} s, service "
                f"{p['service_seconds']:.2f} s, rows + trim_messages {p['trim_seconds'] or 0:.2f} s"
            )
            print(
                f"{r['entries']:>7,} entries: {r['facts']:,} facts in {r['folds']} folds "
                f"({r['fold_seconds']:.0f} s); mandatory {r['mandatory_tokens']:,} tokens = "
                f"governing {r['governing_tokens']:,} + open requests {r['request_tokens']:,} "
                f"+ P1 {r['p1_tokens']:,} ({r['mandatory_facts']:,} facts); context {ctx}"
            )
    exp = exponent(rows)
    print(f"mandatory state exponent over entries: {exp} (goal <= {GOAL_EXPONENT})")
    if not full and not os.environ.get("BENCH_MANDATORY_SIZES"):
        print("100,000 entries: only with --full (its fold alone is past the 10-minute budget)")
    return {"rows": rows, "exponent": exp, "summary": summary_rows(rows, exp)}
