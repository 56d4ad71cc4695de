"""``compact``: fold a journal in slices, then consolidate (DESIGN.md 5.2, 5.4)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from journal_app.models import Entry, Journal
from journal_app.rounds import group_rounds
from ledger_app.model_writer import FALLBACK_NOTE as FALLBACK_NOTE  # re-exported: views
from ledger_app.model_writer import (
    ModelWriter,
)
from ledger_app.models import Fold, FoldAttempt
from ledger_app.services.common import FoldFailed, latest_fold
from ledger_app.services.consolidate import ledger_consolidate
from ledger_app.services.fold import default_writer, ledger_fold, writer_resolve
from ledger_app.writers import Writer


@dataclass
class CompactRow:
    """One line of ``compact``'s table: a fold, a failed attempt, or a consolidation."""

    fold: Fold | None
    outcome: str
    created: bool = True
    reason: str = ""
    attempt: FoldAttempt | None = None


@dataclass
class CompactReport:
    """What :func:`ledger_compact` did: the writer used, one row per fold, why it stopped."""

    writer: str
    writer_label: str
    rows: list[CompactRow] = field(default_factory=list)
    stopped: str = ""

    @property
    def failed(self) -> bool:
        return any(r.outcome == FoldAttempt.Outcome.FAILED for r in self.rows)


def _slice_end(journal: Journal, budget_tokens: int) -> int | None:
    """Last seq of the next fold: whole rounds after the last fold, about ``budget_tokens``."""
    last = latest_fold(journal, Fold.Kind.FOLD)
    start = (last.seq_end or 0) + 1 if last else 1
    entries = list(
        Entry.objects.filter(journal=journal, seq__gte=start)
        .order_by("seq")
        .only("seq", "kind", "role", "tool_call_id", "token_count")
    )
    tokens = {e.seq: e.token_count for e in entries}
    end, total = None, 0
    for r in group_rounds(entries):
        size = sum(tokens[s] for s in r.seqs)
        if end is not None and total + size > budget_tokens:
            break
        end, total = r.last_seq, total + size
    return end


def ledger_compact(
    *,
    journal: Journal,
    writer: str | Writer | ModelWriter | None = None,
    fold_tokens: int | None = None,
    max_folds: int = 10_000,
) -> CompactReport:
    """Fold a journal's unfolded rounds in slices, then consolidate (``manage.py compact``).

    Each fold covers whole API rounds worth about ``fold_tokens`` covered tokens (default
    ``LEDGER_FOLD_THRESHOLD_TOKENS``; a single larger round is one fold), so a long
    session becomes a sequence of folds a model can read. Stops when nothing is left, at
    the first failed fold (the ledger keeps every fold before it; running again retries
    from there), or after ``max_folds``. Then :func:`ledger_consolidate` runs once.

    Args:
        journal: the scope.
        writer: ``"offline"``, ``"model"``, ``"mechanical"`` or a writer object; default
            :func:`default_writer` (the model when ``OPENAI_BASE_URL`` is set, else offline).
        fold_tokens: covered tokens per fold.

    Returns:
        :class:`CompactReport`.

    Raises:
        LedgerError: unknown writer, or ``"model"`` without a configured model.
        FoldRefused: a pin check failed (nothing of that fold stored).
    """
    w = writer_resolve(writer if writer is not None else default_writer())
    budget = settings.LEDGER_FOLD_THRESHOLD_TOKENS if fold_tokens is None else fold_tokens
    report = CompactReport(writer=w.id, writer_label=w.label)
    while len(report.rows) < max_folds:
        upto = _slice_end(journal, budget)
        if upto is None:
            report.stopped = "nothing left to fold"
            break
        try:
            result = ledger_fold(journal=journal, upto=upto, writer=w)
        except FoldFailed as exc:
            report.rows.append(
                CompactRow(None, FoldAttempt.Outcome.FAILED, False, str(exc), exc.attempt)
            )
            report.stopped = "a fold failed; nothing of it was stored; run compact again"
            return report
        if result.fold is None or not result.created:
            report.stopped = result.reason
            break
        report.rows.append(CompactRow(result.fold, result.fold.outcome, True, "", result.attempt))
        journal.refresh_from_db()
    consolidated = ledger_consolidate(journal=journal)
    if consolidated.fold is not None:
        report.rows.append(CompactRow(consolidated.fold, consolidated.fold.outcome))
    return report
