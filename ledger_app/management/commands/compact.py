"""``manage.py compact [SCOPE] [--writer W] [--refold]`` (alias ``fold``): fold and print the folds."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from io import TextIOBase
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal_app.models import Journal
from journal_app.services import JournalError, journals_for_scope
from ledger_app.services import (
    WRITER_NAMES,
    CompactReport,
    CompactRow,
    LedgerError,
    ledger_compact,
    ledger_refold_fallbacks,
)

COLUMNS = (
    "fold",
    "kind",
    "seq",
    "outcome",
    "added",
    "rejected",
    "covered",
    "model in",
    "model out",
    "calls",
)


@contextmanager
def model_progress(stream: TextIOBase, verbosity: int) -> Iterator[None]:
    """The model client's progress lines (request sent, first chunk, characters every 10 s;
    logger ``ledger_app.model_client`` at INFO) on ``stream`` while a command runs, at
    verbosity 1 or more: a fold against a slow local model is seen progressing, not silent
    for minutes (README "Use a local model")."""
    if verbosity < 1:
        yield
        return
    logger = logging.getLogger("ledger_app.model_client")
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("  model %(asctime)s %(message)s", "%H:%M:%S"))
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.propagate = False  # once, not again through the root's console handler
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def _row(r: CompactRow) -> tuple[str, ...]:
    if r.fold is None:
        a = r.attempt
        seq = f"{a.seq_start}-{a.seq_end}" if a else "-"
        calls = len(a.record.get("model_calls", [])) if a else 0
        return (
            str(a.number if a else "-"),
            "fold",
            seq,
            r.outcome,
            "-",
            "-",
            "-",
            "-",
            "-",
            str(calls),
        )
    f = r.fold
    m = f.manifest
    model = m.get("tokens", {}).get("model", {})
    seq = f"{f.seq_start}-{f.seq_end}" if f.seq_start else "-"
    return (
        str(f.number),
        f.kind,
        seq,
        f.outcome,
        str(f.facts_added),
        str(f.ops_rejected),
        str(m.get("tokens", {}).get("covered", "-")),
        str(model.get("input_tokens", 0)),
        str(model.get("output_tokens", 0)),
        str(model.get("calls", 0)),
    )


class Command(BaseCommand):
    help = (
        "Fold every journal in SCOPE (tenant[/session[/lane[/branch]]]; omitted: every "
        "journal) through the one fold service: the unfolded complete API rounds in slices of "
        "about --fold-tokens covered tokens, each slice after a recovery scan, then "
        "consolidation when the ledger has outgrown LEDGER_CONSOLIDATE_AT_TOKENS. Prints one "
        "row per fold (outcome, facts added, rejections, tokens) and a summary. The writer is "
        "the configured model when OPENAI_BASE_URL and WRITER_MODEL are set, else the offline "
        "writer; 'mechanical' (tool outcomes only) only when asked for. `fold` is an alias."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "scope", nargs="?", default=None, help="tenant[/session[/lane[/branch]]] (default: all)"
        )
        parser.add_argument(
            "--writer",
            choices=list(WRITER_NAMES),
            default=None,
            help="default: model when OPENAI_BASE_URL and WRITER_MODEL are set, else offline",
        )
        parser.add_argument(
            "--fold-tokens",
            type=int,
            default=None,
            help="covered tokens per fold (default LEDGER_FOLD_THRESHOLD_TOKENS, 32000)",
        )
        parser.add_argument("--upto", type=int, default=None, help="highest seq to fold")
        parser.add_argument(
            "--refold",
            action="store_true",
            help=(
                "re-fold, with --writer (or the default writer), every range whose fold fell "
                "back to mechanical facts; each becomes a new refold fold, never an edit"
            ),
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            journals = journals_for_scope(opts["scope"])
        except JournalError as exc:
            raise CommandError(str(exc)) from None
        failed = False
        for journal in journals:
            try:
                with model_progress(self.stderr, opts["verbosity"]):
                    report = self._fold(journal, opts)
            except LedgerError as exc:
                raise CommandError(f"{journal.scope_label}: {exc}") from None
            self._print(journal, report)
            failed = failed or report.failed
        if failed:
            raise CommandError("a fold failed (nothing of it was stored); run compact again")

    def _fold(self, journal: Journal, opts: dict[str, Any]) -> CompactReport:
        if opts["refold"]:
            return ledger_refold_fallbacks(journal=journal, writer=opts["writer"])
        return ledger_compact(
            journal=journal,
            writer=opts["writer"],
            fold_tokens=opts["fold_tokens"],
            upto=opts["upto"],
        )

    def _print(self, journal: Journal, report: CompactReport) -> None:
        self.stdout.write(f"{journal.scope_label}: writer {report.writer_label}")
        if report.rows:
            rows = [COLUMNS] + [_row(r) for r in report.rows]
            widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
            for row in rows:
                self.stdout.write("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
        for r in report.rows:
            if r.reason:
                self.stdout.write(f"  failed: {r.reason}")
            elif r.fallback_reason and r.fold is not None:
                self.stdout.write(f"  fold {r.fold.number} fell back: {r.fallback_reason}")
        self.stdout.write(f"  {report.summary()}")
