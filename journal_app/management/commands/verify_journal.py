"""``manage.py verify_journal [SCOPE]``: recompute every hash and the parent chain."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from journal_app.services import JournalError, journal_verify, journals_for_scope


class Command(BaseCommand):
    help = (
        "Recompute every entry, body and chunk hash, the parent chain and artifact hashes. "
        "SCOPE is tenant[/session[/lane[/branch]]]; omitted, every journal is checked. "
        "Exits non-zero naming the first entry that does not match."
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
        quiet = opts["no_progress"] or opts["verbosity"] == 0 or total < 2000
        bar = (
            None
            if quiet
            else tqdm(total=total, unit="entry", desc="verifying", file=self.stderr._out)
        )

        def progress(done: int, _total: int) -> None:
            if bar is not None:
                bar.n = done
                bar.refresh()

        try:
            report = journal_verify(journals=journals, progress=progress)
        finally:
            if bar is not None:
                bar.close()
        if not report.ok:
            f = report.first_failure or {}
            raise CommandError(
                f"MISMATCH in {f.get('scope')} at seq {f.get('seq')} (sha256:{f.get('entry_hash')}):\n  "
                + "\n  ".join(f.get("problems", []))
            )
        self.stdout.write(
            f"OK: {report.journals} journals, {report.entries} entries, {report.chunks} chunks, "
            f"{report.bytes} bytes: every hash recomputed and matched"
        )
