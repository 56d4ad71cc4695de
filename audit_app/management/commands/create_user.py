"""``manage.py create_user USERNAME --tenant SLUG[:ROLE] ... [--role R] [--password P]``."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit_app.services import AccountError, account_ensure
from journal_app.models import Membership, Tenant

ROLES = ", ".join(Membership.Role.values)


class Command(BaseCommand):
    help = (
        "Create or update a user and their tenant memberships. Each --tenant SLUG[:ROLE] gives "
        f"the user a role in that tenant ({ROLES}; default --role). Roles are also Django "
        "groups with permissions: operators read (bodies filtered), comment and annotate; "
        "reviewers also decide P0 retirements; admins also read the audit log and the "
        "unfiltered entries, and export sessions. A new user without --password "
        "gets a random one, printed once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--tenant",
            action="append",
            default=[],
            metavar="SLUG[:ROLE]",
            help="a tenant the user belongs to, optionally with a role; repeatable",
        )
        parser.add_argument(
            "--role",
            default=Membership.Role.OPERATOR,
            choices=Membership.Role.values,
            help="role for --tenant items without one (default: %(default)s)",
        )
        parser.add_argument("--password", default=None, help="the password (or use --password-env)")
        parser.add_argument(
            "--password-env", default=None, metavar="VAR", help="read the password from $VAR"
        )
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--superuser", action="store_true", help="sees every tenant (and the admin site)"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        password = opts["password"]
        if opts["password_env"]:
            password = os.environ.get(opts["password_env"])
            if not password:
                raise CommandError(f"${opts['password_env']} is empty or unset")
        memberships = []
        for item in opts["tenant"]:
            slug, _, role = item.partition(":")
            role = role or opts["role"]
            tenant = Tenant.objects.filter(slug=slug).first()
            if tenant is None:
                raise CommandError(
                    f"no tenant {slug!r}: create it first with manage.py create_tenant {slug}"
                )
            memberships.append((tenant, role))
        try:
            user, created, generated = account_ensure(
                username=opts["username"],
                password=password,
                email=opts["email"],
                memberships=memberships,
                superuser=opts["superuser"],
            )
        except AccountError as exc:
            raise CommandError(str(exc)) from exc
        roles = sorted(
            f"{m.tenant.slug}:{m.role}"
            for m in Membership.objects.filter(user=user).select_related("tenant")
        )
        groups = sorted(user.groups.values_list("name", flat=True))
        self.stdout.write(
            f"user {'created' if created else 'updated'} {user.get_username()}"
            + (" (superuser)" if user.is_superuser else "")
            + f": tenants {', '.join(roles) or 'none'}; groups {', '.join(groups) or 'none'}"
        )
        if generated:
            self.stdout.write(f"password   {generated}  (shown once)")
