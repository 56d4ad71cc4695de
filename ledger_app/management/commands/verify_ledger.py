"""``manage.py verify_ledger [SCOPE]``: replay every delta and compare with the stored states."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal_app.services import JournalError, journals_for_scope
from ledger_app.services import ledger_verify


class Command(BaseCommand):
    help = (
        "Replay every ledger delta from scratch, and each fold from its predecessor's stored "
        "state, and compare byte for byte with the stored states and verdicts. SCOPE is "
        "tenant[/session[/lane[/branch]]]. Exits non-zero naming the first fold and fact that differ."
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
        for journal in journals:
            report = ledger_verify(journal=journal)
            folds += report.folds
            if not report.ok:
                m = report.mismatch or {}
                raise CommandError(
                    f"MISMATCH in {journal.scope_label} at fold {m.get('fold')} ({m.get('check')}): "
                    f"{m.get('detail')}; first differing fact: {m.get('fact')}"
                )
        self.stdout.write(
            f"OK: {len(journals)} journals, {folds} folds replayed; every state and verdict matched"
        )
