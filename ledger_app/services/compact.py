"""``compact``: fold a journal in slices, then consolidate (docs/design.md 5.2, 5.4).

The loop every multi-fold request runs: ``manage.py compact`` (and its alias ``fold``), the
automatic fold after an import or an append (the ``fold_journal`` task) and the API's
``POST .../folds``. Each slice is one call of the one fold service,
:func:`ledger_app.services.fold.ledger_fold` (writer choice, recovery, manifest).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import reset_queries

from journal_app.models import Entry, Journal
from journal_app.rounds import group_rounds
from ledger_app.errors import FoldFailed
from ledger_app.models import Fold, FoldAttempt
from ledger_app.services.consolidate import ledger_consolidate
from ledger_app.services.fold import ledger_fold
from ledger_app.services.state import latest_fold
from ledger_app.services.writer_registry import writer_resolve

#: ``CompactReport.stopped`` when the ``deadline`` stopped the loop with rounds left to fold
TIME_BUDGET_SPENT = "the time budget was spent; the rest is folded by the next run"


@dataclass
class CompactRow:
    """One line of ``compact``'s table: a fold, a failed attempt, or a consolidation."""

    fold: Fold | None
    outcome: str
    created: bool = True
    reason: str = ""
    attempt: FoldAttempt | None = None
    receipt: Any = None
    recovered: list[str] = field(default_factory=list)

    @property
    def fallback_reason(self) -> str:
        """Why a fold fell back to mechanical facts (the model writer's reason, stored in its
        attempt's record), or ``""``: not a fallback, or a writer that always is one."""
        if self.fold is None or self.outcome != "fallback" or self.attempt is None:
            return ""
        return str(self.attempt.record.get("fallback_reason", "") or "")


@dataclass
class CompactReport:
    """What :func:`ledger_compact` did: the writer used, one row per fold, why it stopped.

    ``existing`` describes the folds already stored before this run (count, writers, the
    last folded seq), so a run that folds nothing still says what the ledger holds.
    """

    writer: str
    writer_label: str
    rows: list[CompactRow] = field(default_factory=list)
    stopped: str = ""
    existing: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(r.outcome == FoldAttempt.Outcome.FAILED for r in self.rows)

    @property
    def folds(self) -> list[Fold]:
        """The folds this run stored, in order."""
        return [r.fold for r in self.rows if r.fold is not None and r.created]

    def summary(self) -> str:
        """One sentence: what was folded, by which writer, and why it stopped."""
        made = self.folds
        ranges = [f for f in made if f.kind == Fold.Kind.FOLD]
        parts = []
        if ranges:
            fallbacks = sum(1 for f in ranges if f.outcome == Fold.Outcome.FALLBACK)
            parts.append(
                f"{len(ranges)} fold(s) by writer {self.writer} over seq "
                f"{ranges[0].seq_start}-{ranges[-1].seq_end}"
                + (f" ({fallbacks} labelled fallback)" if fallbacks else "")
            )
        refolds = [f for f in made if f.kind == Fold.Kind.REFOLD]
        if refolds:
            parts.append(
                f"{len(refolds)} refold(s) by writer {self.writer}: folds "
                + ", ".join(str(f.manifest.get("refold_of")) for f in refolds)
                + " folded again as new folds "
                + ", ".join(str(f.number) for f in refolds)
            )
        consolidated = [f for f in made if f.kind == Fold.Kind.CONSOLIDATION]
        if consolidated:
            parts.append(f"consolidated into fold {consolidated[-1].number}")
        if not parts:
            e = self.existing
            if e.get("folds"):
                parts.append(
                    f"nothing new to fold: seq 1-{e['folded_to']} already folded in "
                    f"{e['folds']} fold(s) by {', '.join(e['writers'])}"
                )
            else:
                parts.append("nothing folded")
        return "; ".join(parts) + (f"; stopped: {self.stopped}" if self.stopped else "")


def _existing(journal: Journal) -> dict[str, Any]:
    rows = list(
        Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD).values_list("writer", "seq_end")
    )
    return {
        "folds": len(rows),
        "writers": sorted({w for w, _ in rows}),
        "folded_to": max((e or 0 for _, e in rows), default=0),
    }


def _slice_end(journal: Journal, budget_tokens: int, upto: int | None = None) -> int | None:
    """Last seq of the next fold: whole rounds after the last fold, about ``budget_tokens``."""
    last = latest_fold(journal, Fold.Kind.FOLD)
    start = (last.seq_end or 0) + 1 if last else 1
    qs = Entry.objects.filter(journal=journal, seq__gte=start)
    if upto is not None:
        qs = qs.filter(seq__lte=upto)
    qs = qs.order_by("seq").only("seq", "kind", "role", "tool_call_id", "token_count")
    # read a window at a time, widening it until the budget is passed (a slice
    # reads about what it folds, not every unfolded entry)
    window = 512
    while True:
        entries = list(qs[:window])
        complete = len(entries) < window  # everything left was read
        rounds = group_rounds(entries)
        if not complete:
            rounds = rounds[:-1]  # the last round may go on past the window
        tokens = {e.seq: e.token_count for e in entries}
        end, total, full = None, 0, False
        for r in rounds:
            size = sum(tokens[s] for s in r.seqs)
            if end is not None and total + size > budget_tokens:
                full = True
                break
            end, total = r.last_seq, total + size
        if complete or full:
            return end
        window *= 4


def ledger_compact(
    *,
    journal: Journal,
    writer: Any = None,
    fold_tokens: int | None = None,
    upto: int | None = None,
    max_folds: int = 10_000,
    deadline: float | None = None,
    consolidate: bool = True,
) -> CompactReport:
    """Fold a journal's unfolded rounds in slices, then consolidate.

    Each fold covers whole API rounds worth about ``fold_tokens`` covered tokens (default
    ``LEDGER_FOLD_THRESHOLD_TOKENS``, 32,000; a single larger round is one fold), so a long
    session becomes a sequence of folds a model can read. Each slice is one call of the one
    fold service (:func:`ledger_app.services.fold.ledger_fold`), so every slice gets the
    same writer, the recovery scan and the same manifest. Stops when nothing is left, at
    the first failed fold (the ledger keeps every fold before it; running again retries
    from there), or after ``max_folds``. Then :func:`ledger_consolidate` runs once (it
    folds only when the ledger is past ``LEDGER_CONSOLIDATE_AT_TOKENS``, docs/design.md 5.4).

    Args:
        journal: the scope.
        writer: ``None`` (the configured default: model when configured, else offline), a
            writer name or a writer object; resolved once, before anything is folded.
        fold_tokens: covered tokens per fold.
        upto: highest seq to fold (default: the head).
        max_folds: at most this many folds in this run.
        deadline: a :func:`time.monotonic` value: no slice starts after it, and when it
            stops the loop (``stopped`` says so) consolidation is left to the next run (a
            proxied call folds within its time budget this way, README "The compacting
            proxy"). ``None``: no time limit.
        consolidate: ``False``: no consolidation at the end (a failed context's checkpoint
            must not evict facts, docs/design.md 6, step 7).

    Returns:
        :class:`CompactReport` (rows, why it stopped, what was folded before).

    Raises:
        WriterUnknown / ModelNotConfigured: a bad writer (nothing folded).
        FoldRefused: a pin check failed (nothing of that fold stored).
    """
    w = writer_resolve(writer)
    budget = settings.LEDGER_FOLD_THRESHOLD_TOKENS if fold_tokens is None else fold_tokens
    report = CompactReport(writer=w.id, writer_label=w.label, existing=_existing(journal))
    while len(report.rows) < max_folds:
        if deadline is not None and time.monotonic() >= deadline:
            report.stopped = TIME_BUDGET_SPENT
            return report
        if settings.DEBUG:  # as an import does: not every fold's SQL kept (DEBUG's query log)
            reset_queries()
        end = _slice_end(journal, budget, upto)
        if end is None:
            report.stopped = "nothing left to fold"
            break
        try:
            result = ledger_fold(journal=journal, upto=end, writer=w)
        except FoldFailed as exc:
            report.rows.append(
                CompactRow(None, FoldAttempt.Outcome.FAILED, False, str(exc), exc.attempt)
            )
            report.stopped = "a fold failed; nothing of it was stored; run compact again"
            return report
        if result.fold is None or not result.created:
            report.stopped = result.reason
            break
        report.rows.append(
            CompactRow(
                result.fold,
                result.fold.outcome,
                True,
                "",
                result.attempt,
                result.receipt,
                list(result.recovered),
            )
        )
        if result.consolidation is not None:
            report.rows.append(CompactRow(result.consolidation, result.consolidation.outcome))
        journal.refresh_from_db()
    if not consolidate:
        return report
    consolidated = ledger_consolidate(journal=journal)
    if consolidated.fold is not None:
        report.rows.append(CompactRow(consolidated.fold, consolidated.fold.outcome))
    return report
