"""``manage.py create_tenant SLUG [--name NAME]``: create a tenant (idempotent).

The tenant is created and ``tenant.create`` logged (surface ``command``) by
:func:`audit_app.services.tenant_create`; running it again for an existing slug changes and
logs nothing.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit_app.services import tenant_create
from journal_app.services import JournalError


class Command(BaseCommand):
    help = (
        "Create a tenant (an organisation: every session, journal and artifact belongs to one). "
        "Running it again for an existing slug changes nothing. Then add users with create_user."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="letters, digits, '.', '_' or '-' (1-100 characters)")
        parser.add_argument("--name", default="", help="display name (default: the slug)")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            tenant, created = tenant_create(slug=opts["slug"], name=opts["name"])
        except JournalError as exc:
            raise CommandError(str(exc)) from exc
        verb = "created" if created else "exists "
        self.stdout.write(f"tenant {verb} {tenant.slug} ({tenant.name})")
