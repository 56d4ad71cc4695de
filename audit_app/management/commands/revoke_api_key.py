"""``manage.py revoke_api_key PREFIX``: a revoked key never authenticates again.

Revoked and ``api_key.revoke`` logged (surface ``command``) by
:func:`audit_app.services.api_key_end`, as the admin does.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit_app.services import api_key_end
from journal_app.auth import ApiKeyError


class Command(BaseCommand):
    help = (
        "Revoke the API key with PREFIX (lk_<8 hex>, as create_api_key printed it; the whole "
        "key works too). Revoking twice keeps the first revocation time."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix", help="the key's visible prefix, lk_<8 hex>")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            key = api_key_end(prefix=opts["prefix"])
        except ApiKeyError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Revoked {key.role} key {key.prefix} ({key.name!r}) of tenant {key.tenant.slug} "
            f"at {key.revoked_at:%Y-%m-%d %H:%M:%S} UTC."
        )
