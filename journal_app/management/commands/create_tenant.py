"""``manage.py create_tenant SLUG [--name NAME]``: create a tenant (idempotent)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal_app.models import Tenant
from journal_app.services import JournalError, tenant_ensure


class Command(BaseCommand):
    help = (
        "Create a tenant (an organisation: every session, journal and artifact belongs to one). "
        "Running it again for an existing slug changes nothing. Then add users with create_user."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="letters, digits, '.', '_' or '-' (1-100 characters)")
        parser.add_argument("--name", default="", help="display name (default: the slug)")

    def handle(self, *args: Any, **opts: Any) -> None:
        existed = Tenant.objects.filter(slug=opts["slug"]).exists()
        try:
            tenant = tenant_ensure(slug=opts["slug"], name=opts["name"])
        except JournalError as exc:
            raise CommandError(str(exc)) from exc
        verb = "exists " if existed else "created"
        self.stdout.write(f"tenant {verb} {tenant.slug} ({tenant.name})")
