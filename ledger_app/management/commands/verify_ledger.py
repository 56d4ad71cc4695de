"""``manage.py verify_ledger [SCOPE]``: replay every delta, and check the ledger against the
journal and the reviews."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal_app.progress import Progress
from journal_app.services import JournalError, journals_for_scope
from ledger_app.services import ledger_verify
from ledger_app.services.integrity import CHECKS, ledger_integrity
from ledger_app.services.verify import ledger_log_verify

SHOWN = 20


class Command(BaseCommand):
    help = (
        "Replay every ledger delta from scratch, and each fold from its predecessor, and "
        "compare byte for byte with what is stored; then re-derive each fold's manifest, "
        "range hash, seq bounds, pins and evidence from the journal, resolve every support "
        "hash at or before the fold's revision, check retirements against their review folds "
        "and audit events, and the journal head against its entries (a truncated journal); "
        "recompute every fold's record hash and the tenants' hash-chained log of reviews, "
        "comments and audit events. "
        "SCOPE is tenant[/session[/lane[/branch]]]. Exits non-zero listing what differs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "scope", nargs="?", default=None, help="tenant[/session[/lane[/branch]]]"
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            journals = journals_for_scope(opts["scope"])
        except JournalError as exc:
            raise CommandError(str(exc)) from None
        folds = 0
        failures: list[str] = []
        with Progress(
            total=len(journals),
            desc="verifying ledgers",
            unit="journals",
            file=self.stderr._out,
            enabled=not (opts["no_progress"] or opts["verbosity"] == 0),
        ) as bar:
            for done, journal in enumerate(journals, start=1):
                report = ledger_verify(journal=journal)
                folds += report.folds
                if not report.ok:
                    m = report.mismatch or {}
                    failures.append(
                        f"{journal.scope_label}: replay: fold {m.get('fold')} "
                        f"({m.get('check')}): {m.get('detail')}; first differing fact: "
                        f"{m.get('fact')}"
                    )
                failures += [
                    f"{journal.scope_label}: {p}" for p in ledger_integrity(journal=journal)
                ]
                bar.update_to(done)
        failures += [f"log: {p}" for p in ledger_log_verify(journals=journals)]
        if failures:
            more = f"\n  ... and {len(failures) - SHOWN} more" if len(failures) > SHOWN else ""
            raise CommandError(
                f"MISMATCH: {len(failures)} problem(s)\n  " + "\n  ".join(failures[:SHOWN]) + more
            )
        self.stdout.write(
            f"OK: {len(journals)} journals, {folds} folds replayed; every state and verdict "
            f"matched; checked against the journal and reviews: {', '.join(CHECKS)}; "
            "every fold record and log record hash matched"
        )
