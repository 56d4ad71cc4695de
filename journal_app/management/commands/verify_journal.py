"""``manage.py verify_journal [SCOPE]``: recompute every hash and the parent chain."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal_app.progress import Progress
from journal_app.services import JournalError, journal_verify, journals_for_scope


class Command(BaseCommand):
    help = (
        "Recompute every entry, body and chunk hash, the parent chain and artifact hashes. "
        "SCOPE is tenant[/session[/lane[/branch]]]; omitted, every journal is checked. "
        "Every journal is checked; exits non-zero naming the first entry that does not match "
        "in each journal that has one."
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
        total = sum(j.head_seq for j in journals)
        with Progress(
            total=total,
            desc="verifying",
            unit="entries",
            file=self.stderr._out,
            enabled=not (opts["no_progress"] or opts["verbosity"] == 0),
        ) as bar:
            report = journal_verify(journals=journals, progress=bar)
        if not report.ok:
            lines = [
                f"MISMATCH in {f.get('scope')} at seq {f.get('seq')} (sha256:{f.get('entry_hash')}):"
                "\n  " + "\n  ".join(f.get("problems", []))
                for f in report.failures
            ]
            raise CommandError(
                "\n".join(lines)
                + f"\n{len(report.failures)} of {report.journals} journals do not match; "
                f"the other {report.journals - len(report.failures)} matched"
            )
        self.stdout.write(
            f"OK: {report.journals} journals, {report.entries} entries, {report.chunks} chunks, "
            f"{report.bytes} bytes: every hash recomputed and matched"
        )
