"""``manage.py fold SCOPE``: fold every journal of a scope (mechanical writer)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal_app.services import JournalError, journals_for_scope
from ledger_app.services import LedgerError, ledger_consolidate, ledger_fold


class Command(BaseCommand):
    help = (
        "Fold the unfolded complete API rounds of each journal in SCOPE "
        "(tenant[/session[/lane[/branch]]]; omitted: every journal) into the ledger with the "
        "mechanical writer, consolidate when the ledger has outgrown its budget, and print "
        "one line per fold."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "scope", nargs="?", default=None, help="tenant[/session[/lane[/branch]]]"
        )
        parser.add_argument("--upto", type=int, default=None, help="highest seq to cover")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            journals = journals_for_scope(opts["scope"])
        except JournalError as exc:
            raise CommandError(str(exc)) from None
        for journal in journals:
            try:
                result = ledger_fold(journal=journal, upto=opts["upto"])
            except LedgerError as exc:
                raise CommandError(f"{journal.scope_label}: fold refused: {exc}") from None
            if result.fold is None:
                self.stdout.write(f"{journal.scope_label}: {result.reason}")
                continue
            f = result.fold
            m = f.manifest
            self.stdout.write(
                f"{journal.scope_label}: fold {f.number} seq {f.seq_start}-{f.seq_end} "
                f"outcome {f.outcome} facts added {f.facts_added} rejected {f.ops_rejected} "
                f"tokens covered {m['tokens']['covered']} ledger {m['tokens']['ledger_active']}"
                + ("" if result.created else " (already folded)")
            )
            consolidated = ledger_consolidate(journal=journal)
            if consolidated.fold is not None:
                c = consolidated.fold.manifest["consolidation"]
                self.stdout.write(
                    f"{journal.scope_label}: consolidation fold {consolidated.fold.number} outcome "
                    f"{consolidated.fold.outcome}: {c['before_tokens']} -> {c['after_tokens']} tokens "
                    f"(target {c['target_tokens']}, P0+P1 {c['kept_p0_p1_tokens']})"
                )
