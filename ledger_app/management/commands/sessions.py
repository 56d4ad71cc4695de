"""``ledgerkeep sessions [TENANT]``: list the journals with entries, tokens, folds and the
last activity (README, "Command line")."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal_app.models import Tenant
from ledger_app.selectors.sessions import journal_summaries


class Command(BaseCommand):
    help = (
        "List the journals (tenant/session/lane/branch) with their entries, tokens, folds and "
        "last activity; TENANT narrows to one tenant."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", nargs="?", default="", help="a tenant slug")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            rows = journal_summaries(opts["tenant"])
        except Tenant.DoesNotExist:
            known = ", ".join(Tenant.objects.order_by("slug").values_list("slug", flat=True))
            raise CommandError(
                f"no tenant {opts['tenant']!r}" + (f" (tenants: {known})" if known else "")
            ) from None
        if not rows:
            self.stdout.write("no journals yet: `import_journal PATH` imports a transcript")
            return
        width = max(len("SCOPE"), *(len(r["scope"]) for r in rows))
        self.stdout.write(
            f"{'SCOPE':<{width}}  {'ENTRIES':>8}  {'TOKENS':>11}  {'FOLDS':>5}  LAST ACTIVITY"
        )
        for r in rows:
            at = r["last_activity"].strftime("%Y-%m-%d %H:%M") if r["last_activity"] else "-"
            self.stdout.write(
                f"{r['scope']:<{width}}  {r['entries']:>8,}  {r['tokens']:>11,}  "
                f"{r['folds']:>5}  {at}"
            )
        self.stdout.write(
            f"{len(rows)} journal{'s' if len(rows) != 1 else ''}, "
            f"{sum(r['entries'] for r in rows):,} entries, "
            f"{sum(r['tokens'] for r in rows):,} tokens"
        )
