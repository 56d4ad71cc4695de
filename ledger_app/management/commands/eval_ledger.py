"""``manage.py eval_ledger [--writer offline|model] [--case NAME] [--json]``: ledger fidelity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ledger_app.eval_service import CASES_DIR, SCENARIOS_DIR, eval_ledger
from ledger_app.evaluation import ScenarioInvalid
from ledger_app.management.commands.compact import model_progress
from ledger_app.services import WRITER_NAMES, LedgerError


class Command(BaseCommand):
    help = (
        "Fold every compaction failure case (tests/fixtures/cases, a copy of shared/cases) and "
        "scenario (tests/scenarios) into a fresh journal with the chosen writer, build its "
        "context at a small budget, and print per item and per rule what holds. Exits non-zero "
        "when a hard rule fails (a done request shown as current, governing text not verbatim, "
        "decision text not exact). Nothing is kept in the database: the run is one "
        "transaction rolled back at the end, so on SQLite other commands on the same database "
        "wait for it (a model run takes minutes per item: use a DATABASE_URL of its own). "
        "Progress, one line per item and the model calls', goes to stderr (-v 0: quiet)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--writer",
            choices=list(WRITER_NAMES),
            default="offline",
            help="the writer that folds (default offline; model needs OPENAI_BASE_URL and "
            "WRITER_MODEL)",
        )
        parser.add_argument(
            "--case",
            action="append",
            default=[],
            metavar="NAME",
            help="only this case or scenario (a name or its prefix, e.g. 07); repeatable",
        )
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--cases", default=str(CASES_DIR), help="the cases folder")
        parser.add_argument("--scenarios", default=str(SCENARIOS_DIR), help="the scenarios folder")

    def handle(self, *args: Any, **opts: Any) -> None:
        if any(not name.strip() for name in opts["case"]):
            raise CommandError("--case needs a name or its prefix (e.g. --case 07), not ''")
        for flag in ("cases", "scenarios"):
            if not Path(opts[flag]).is_dir():
                raise CommandError(f"--{flag} {opts[flag]}: no such folder")
        verbosity = int(opts.get("verbosity", 1))

        def progress(line: str) -> None:
            if verbosity >= 1:
                self.stderr.write(line)

        try:
            with model_progress(self.stderr, verbosity):
                report = eval_ledger(
                    writer=opts["writer"],
                    names=opts["case"],
                    cases_dir=opts["cases"],
                    scenarios_dir=opts["scenarios"],
                    progress=progress,
                )
        except (LookupError, LedgerError, ScenarioInvalid) as exc:
            raise CommandError(str(exc)) from None
        if opts["json"]:
            self.stdout.write(json.dumps(report.to_dict(), indent=1, ensure_ascii=False))
        else:
            for line in report.lines():
                self.stdout.write(line)
        if not report.ok:
            failed = sorted({rule for _, rule in report.hard_failures})
            raise CommandError(f"hard rules failed: {', '.join(failed)}")
