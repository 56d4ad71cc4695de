"""``manage.py demo``: the embedded default's main job, minus the web server.

Creates the demo tenant and user, imports the sample session shipped in ``samples/``,
compacts it (the same call as ``manage.py compact``), verifies the journal, and prints where to log in. Safe to run again: the
import is idempotent and an already-folded range is not folded twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from journal_app.models import Membership
from journal_app.services import journal_import, journal_verify, tenant_ensure
from ledger_app.services import ledger_compact

SAMPLE = Path(settings.BASE_DIR) / "samples" / "demo-session.json"


class Command(BaseCommand):
    help = "Set up the demo: tenant 'demo', user 'demo' (password 'demo-password'), the sample session imported and folded."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--path", default=str(SAMPLE), help="transcript to import (default: the shipped sample)"
        )
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="demo-password")
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="URL to print")

    def handle(self, *args: Any, **opts: Any) -> None:
        tenant = tenant_ensure(slug="demo", name="Demo tenant")
        User = get_user_model()
        user, created = User.objects.get_or_create(username=opts["username"])
        if created or not user.check_password(opts["password"]):
            user.set_password(opts["password"])
            user.save()
        Membership.objects.get_or_create(
            user=user, tenant=tenant, defaults={"role": Membership.Role.REVIEWER}
        )
        result = journal_import(path=opts["path"], tenant="demo", session="refund-rounding")
        journal = result.journal
        compacted = ledger_compact(journal=journal)
        report = journal_verify(journals=[journal])
        self.stdout.write(
            "\n".join(
                [
                    f"imported   {journal.scope_label}: {journal.head_seq} entries "
                    f"({result.append.appended} new), format {result.parsed.format}",
                    f"folded     {compacted.summary()} "
                    f"({sum(f.facts_added for f in compacted.folds)} facts added)",
                    f"verified   {report.entries} entries, {report.chunks} chunks: "
                    + ("every hash matched" if report.ok else f"MISMATCH {report.first_failure}"),
                    "",
                    f"open       {opts['url']}",
                    f"login      {opts['username']} / {opts['password']}",
                ]
            )
        )
