"""Ledger fidelity over the cases and scenarios: import, fold, build, score (docs/design.md 5.2, 5.5, 6).

The one path ``manage.py eval_ledger``, its tests and ``make bench`` take. Each item
(:mod:`ledger_app.evaluation`) is written as a transcript file and imported into a fresh
journal through :func:`journal_app.services.journal_import`, folded by
:func:`ledger_app.services.ledger_compact` with the chosen writer, and its context built by
:func:`ledger_app.services.context.context_build` at the item's small budget; the ledger state
and the model view are then scored by the pure :func:`ledger_app.evaluation.score`.

Nothing stays behind: the whole run is one transaction rolled back at the end (journal rows
are append-only, an evaluation must not leave sessions in a real database), unless ``keep``.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from journal_app.errors import DomainError
from journal_app.services import journal_import
from ledger_app.evaluation import (
    HARD_RULES,
    EvalItem,
    ItemScore,
    load_items,
    outcomes_text,
    score,
    table,
    totals,
)
from ledger_app.services import ledger_compact, ledger_state, writer_resolve
from ledger_app.services.context import context_build

#: where a checkout keeps the copy of shared/cases and the scenarios
CASES_DIR = Path(settings.BASE_DIR) / "tests" / "fixtures" / "cases"
SCENARIOS_DIR = Path(settings.BASE_DIR) / "tests" / "scenarios"
TENANT = "eval-ledger"
#: failed expectations printed per item and rule (``--json`` has them all)
SHOWN = 3


@dataclass
class EvalReport:
    """What :func:`eval_ledger` measured.

    Attributes:
        writer: the writer's id; ``writer_label`` how it names itself.
        scores: one :class:`ledger_app.evaluation.ItemScore` per item, in order.
        seconds: wall time of the whole run.
    """

    writer: str
    writer_label: str
    scores: list[ItemScore] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def hard_failures(self) -> list[tuple[str, str]]:
        """``(item, rule)`` for every hard rule that failed."""
        return [(s.name, rule) for s in self.scores for rule in s.hard_failed]

    @property
    def ok(self) -> bool:
        """Every hard rule held on every item."""
        return not self.hard_failures

    def lines(self) -> list[str]:
        """The table (:func:`ledger_app.evaluation.table`), then each failed expectation."""
        out = [f"eval_ledger: writer {self.writer_label}; * = hard rule", ""]
        out += table(self.scores)
        out.append("")
        for s in self.scores:
            f = s.figures
            if f.get("entries") is not None:
                out.append(
                    f"{s.name}: {f['entries']} entries, {f['facts']} facts; context "
                    f"{f['status']} at {f['budget']:,} tokens: {f['request_tokens'] or 0:,} of "
                    f"{f['journal_tokens'] or 0:,}, {f['rounds_folded_out']} rounds folded out"
                    + _folds_text(f)
                )
        out.append("")
        for s in self.scores:
            if s.error:
                out.append(f"{s.name}: ERROR {s.error}")
            for r in s.rules:
                for line in r.failed[:SHOWN]:
                    out.append(f"{s.name}: {r.rule}{'*' if r.hard else ''}: {line}")
                if len(r.failed) > SHOWN:
                    out.append(f"{s.name}: {r.rule}: ... and {len(r.failed) - SHOWN} more")
        hard = self.hard_failures
        out.append(
            f"hard rules ({', '.join(HARD_RULES)}): "
            + (
                "held on every item"
                if not hard
                else f"{len(hard)} failures on {len({n for n, _ in hard})} of "
                f"{len(self.scores)} items"
            )
            + f"; {self.seconds:.1f} s"
        )
        outcomes = self.outcomes
        if outcomes:
            out.append(
                f"folds: {outcomes_text(outcomes)}"
                + (
                    " (a fallback fold holds mechanical facts only, and the lifecycle rules' "
                    "ends: what it scores is not the model's)"
                    if outcomes.get("fallback")
                    else ""
                )
            )
        return out

    @property
    def outcomes(self) -> dict[str, int]:
        """Every item's fold outcomes added up (``{"accepted": n, "fallback": k, ...}``)."""
        total: dict[str, int] = {}
        for s in self.scores:
            for name, n in (s.figures.get("outcomes") or {}).items():
                total[name] = total.get(name, 0) + n
        return total

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: writer, ok, totals per rule, hard failures, every item's scores."""
        return {
            "writer": self.writer,
            "writer_label": self.writer_label,
            "ok": self.ok,
            "seconds": self.seconds,
            "totals": totals(self.scores),
            "outcomes": self.outcomes,
            "hard_failures": [list(x) for x in self.hard_failures],
            "items": [s.to_dict() for s in self.scores],
        }


def _folds_text(f: dict[str, Any]) -> str:
    """``"; folds 1 fallback; model 4 calls, 13,200 in / 410 out tokens"`` (or ``""``)."""
    text = f"; folds {outcomes_text(f['outcomes'])}" if f.get("outcomes") else ""
    if f.get("model_calls"):
        text += (
            f"; model {f['model_calls']} calls, {f['model_input_tokens']:,} in / "
            f"{f['model_output_tokens']:,} out tokens"
        )
    return text


def _folds(report: Any) -> dict[str, Any]:
    """What the folds of one item were: their outcomes (``accepted``, ``repaired``,
    ``fallback``, ...: a model item whose folds all fell back scores the mechanical facts,
    not the model's) and the model calls and tokens the manifests report."""
    outcomes: dict[str, int] = {}
    calls = tokens_in = tokens_out = 0
    for row in report.rows:
        outcomes[row.outcome] = outcomes.get(row.outcome, 0) + 1
        if row.fold is not None:
            model = row.fold.manifest.get("tokens", {}).get("model", {}) or {}
            calls += int(model.get("calls", 0) or 0)
            tokens_in += int(model.get("input_tokens", 0) or 0)
            tokens_out += int(model.get("output_tokens", 0) or 0)
        elif row.attempt is not None:
            calls += len(row.attempt.record.get("model_calls", []))
    return {
        "outcomes": outcomes,
        "model_calls": calls,
        "model_input_tokens": tokens_in,
        "model_output_tokens": tokens_out,
    }


def _evaluate(item: EvalItem, writer: Any, workdir: Path) -> ItemScore:
    """Import ``item`` into a fresh journal, fold it, build its context, score it."""
    path = workdir / f"{item.name}.json"
    path.write_text(json.dumps(item.messages, ensure_ascii=False))
    fmt = "anthropic-messages" if item.fmt == "anthropic" else "openai-chat"
    imported = journal_import(path=path, fmt=fmt, tenant=TENANT, session=item.name[:80])
    journal = imported.journal
    report = ledger_compact(journal=journal, writer=writer)
    if report.failed:
        cause = next((r.reason for r in report.rows if r.reason), report.stopped)
        return failed_score(item, f"fold failed: {cause}", _folds(report))
    result = context_build(
        journal=journal,
        working_budget=item.budget_tokens,
        hard_limit=item.budget_tokens,
        tail_tokens=item.tail_tokens,
        views=("model", "debug"),
    )
    state = ledger_state(journal)
    reason = ""
    if result.failure:
        reason = str(result.failure.get("reason") or result.failure)
    rules = score(
        item.expected,
        state=state,
        model_view=result.model_view,
        status=result.status,
        reason=reason,
    )
    figures = {
        "entries": imported.entries,
        "folds": len(report.folds),
        "facts": len(state.get("facts", {})),
        "budget": item.budget_tokens,
        "journal_tokens": result.debug_trace.get("tokens", {}).get("journal_uncompacted"),
        "request_tokens": result.debug_trace.get("tokens", {}).get("request"),
        "rounds_folded_out": len(result.debug_trace.get("rounds", {}).get("folded_out") or []),
        "status": result.status,
        **_folds(report),
    }
    return ItemScore(item.name, item.origin, rules, figures)


def failed_score(item: EvalItem, error: str, figures: dict[str, Any] | None = None) -> ItemScore:
    """An item that could not be scored (its import, fold or build failed): each rule its
    expectations check counts as checked and failed with ``error``; the others stay "-"."""
    rules = score(item.expected, state={}, model_view=None, status="failed", reason=error)
    for r in rules:
        if r.checked:
            r.failed = [f"not scored: {error}"]
    return ItemScore(item.name, item.origin, rules, figures or {}, error=error)


def eval_ledger(
    *,
    writer: str | None = "offline",
    names: Sequence[str] = (),
    cases_dir: str | Path | None = CASES_DIR,
    scenarios_dir: str | Path | None = SCENARIOS_DIR,
    keep: bool = False,
    progress: Callable[[str], None] | None = None,
) -> EvalReport:
    """Fold every case and scenario with ``writer`` and score each (module docstring).

    Args:
        writer: ``"offline"``, ``"model"`` (needs ``OPENAI_BASE_URL`` and ``WRITER_MODEL``)
            or ``None`` (the configured default).
        names: only these items (a name or its prefix, ``"07"``); default every item.
        cases_dir: the cases folder (default the checkout's ``tests/fixtures/cases``, a copy
            of ``shared/cases``); ``None``: no cases.
        scenarios_dir: the scenarios folder (default ``tests/scenarios``); ``None``: none.
        keep: keep the journals and folds (tenant ``eval-ledger``) instead of rolling back.
        progress: called with one line when each item starts and ends (``[3/21] 05-...``);
            a model item takes minutes on a CPU server.

    Returns:
        :class:`EvalReport`. An item whose import, fold or build fails is scored as an
        error (:func:`failed_score`: the rules it checks failed, the cause named) and the run
        goes on.

    Raises:
        LookupError: ``names`` matches no item.
        WriterUnknown / ModelNotConfigured: a bad writer (nothing run).
    """
    items = load_items(cases_dir, scenarios_dir, names)
    w = writer_resolve(writer)
    report = EvalReport(writer=w.id, writer_label=w.label)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="eval-ledger-") as tmp, transaction.atomic():
        for n, item in enumerate(items, 1):
            if progress:
                progress(f"[{n}/{len(items)}] {item.name}: folding with {w.label}")
            began = time.perf_counter()
            try:
                with transaction.atomic():
                    report.scores.append(_evaluate(item, w, Path(tmp)))
            except (DomainError, ValueError, OSError) as exc:
                report.scores.append(failed_score(item, f"{type(exc).__name__}: {exc}"))
            if progress:
                done = report.scores[-1]
                outcomes = done.figures.get("outcomes") or {}
                progress(
                    f"[{n}/{len(items)}] {item.name}: "
                    + (
                        "ERROR"
                        if done.error
                        else "hard rules " + ("held" if not done.hard_failed else "FAILED")
                    )
                    + (f"; folds {outcomes_text(outcomes)}" if outcomes else "")
                    + f"; {time.perf_counter() - began:.1f} s"
                )
        if not keep:
            transaction.set_rollback(True)
    report.seconds = time.perf_counter() - started
    return report
