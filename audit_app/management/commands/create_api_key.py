"""``manage.py create_api_key TENANT --name NAME [--role client|reviewer --user USERNAME]``.

The key is created and ``api_key.create`` logged (surface ``command``) by
:func:`audit_app.services.api_key_issue`, as the admin does.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit_app.services import api_key_issue
from journal_app.auth import ApiKeyError
from journal_app.models import ApiKey
from journal_app.services import JournalError, tenant_ensure


class Command(BaseCommand):
    help = (
        "Create an API key for TENANT (created if missing) and print it once: only its "
        "sha256 is stored. The key's visible prefix (lk_<8 hex>) names it in lists, logs and "
        "revoke_api_key. Reviewer keys need --user, a reviewer or admin of the tenant, under "
        "whose name review decisions are recorded. With --quiet only the key is printed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="tenant slug")
        parser.add_argument("--name", required=True, help="what uses the key, e.g. 'ci runtime'")
        parser.add_argument(
            "--role", choices=ApiKey.Role.values, default=ApiKey.Role.CLIENT, help="key role"
        )
        parser.add_argument("--user", default=None, help="username (reviewer keys)")
        parser.add_argument("--quiet", action="store_true", help="print the key only")

    def handle(self, *args: Any, **opts: Any) -> None:
        user = None
        if opts["user"]:
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"no user {opts['user']!r}")
        try:
            tenant = tenant_ensure(slug=opts["tenant"])
            key, raw = api_key_issue(tenant=tenant, name=opts["name"], role=opts["role"], user=user)
        except (ApiKeyError, JournalError) as exc:
            raise CommandError(str(exc)) from None
        if opts["quiet"]:
            self.stdout.write(raw)
            return
        self.stdout.write(
            f"Created {key.role} key {key.prefix} ({key.name!r}) for tenant {tenant.slug}.\n"
            "Store it now; it is not shown again:\n" + raw
        )
