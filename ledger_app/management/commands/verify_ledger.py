"""``manage.py verify_ledger [SCOPE]``: replay every delta, and check the ledger against the
journal and the reviews (issue 16, item 5)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal_app.services import JournalError, journals_for_scope
from ledger_app.services import ledger_verify
from ledger_app.services.integrity import CHECKS, ledger_integrity

SHOWN = 20


class Command(BaseCommand):
    help = (
        "Replay every ledger delta from scratch, and each fold from its predecessor, and "
        "compare byte for byte with what is stored; then re-derive each fold's manifest, "
        "range hash, seq bounds, pins and evidence from the journal, resolve every support "
        "hash at or before the fold's revision, check retirements against their review folds "
        "and audit events, and the journal head against its entries (a truncated journal). "
        "SCOPE is tenant[/session[/lane[/branch]]]. Exits non-zero listing what differs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "scope", nargs="?", default=None, help="tenant[/session[/lane[/branch]]]"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            journals = journals_for_scope(opts["scope"])
        except JournalError as exc:
            raise CommandError(str(exc)) from None
        folds = 0
        failures: list[str] = []
        for journal in journals:
            report = ledger_verify(journal=journal)
            folds += report.folds
            if not report.ok:
                m = report.mismatch or {}
                failures.append(
                    f"{journal.scope_label}: replay: fold {m.get('fold')} ({m.get('check')}): "
                    f"{m.get('detail')}; first differing fact: {m.get('fact')}"
                )
            failures += [f"{journal.scope_label}: {p}" for p in ledger_integrity(journal=journal)]
        if failures:
            more = f"\n  ... and {len(failures) - SHOWN} more" if len(failures) > SHOWN else ""
            raise CommandError(
                f"MISMATCH: {len(failures)} problem(s)\n  " + "\n  ".join(failures[:SHOWN]) + more
            )
        self.stdout.write(
            f"OK: {len(journals)} journals, {folds} folds replayed; every state and verdict "
            f"matched; checked against the journal and reviews: {', '.join(CHECKS)}"
        )
