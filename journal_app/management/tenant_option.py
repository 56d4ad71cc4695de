"""The ``--tenant`` and ``--create-tenant`` options of the commands that write to the journal
(``import_journal``, ``follow``): one definition, one check
(:func:`journal_app.services.scope.tenant_for_command`; README "Your own transcripts")."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from journal_app.services import JournalError
from journal_app.services.scope import DEFAULT_TENANT, tenant_for_command


def add_tenant_arguments(parser: CommandParser) -> None:
    """Add ``--tenant SLUG`` (default ``default``) and ``--create-tenant`` to ``parser``."""
    parser.add_argument(
        "--tenant",
        default=DEFAULT_TENANT,
        help="tenant slug (default: %(default)s); a tenant that does not exist yet is "
        "refused, nothing written, unless it is 'default' or --create-tenant is given",
    )
    parser.add_argument(
        "--create-tenant",
        action="store_true",
        help="create the --tenant when it does not exist yet",
    )


def command_tenant(options: dict[str, Any], refused: str = "") -> str:
    """The checked ``--tenant`` of a command's ``options``, before it writes anything.

    Args:
        options: the command's options (``tenant``, ``create_tenant``).
        refused: words put before the refusal (``"import of PATH refused: "``).

    Returns:
        The tenant slug (a new one is created by the command's write, in its transaction).

    Raises:
        CommandError: an invalid slug, or a tenant that does not exist and may not be
            created; the message names the slug, the close matches, the known tenants and
            how to create it.
    """
    try:
        return tenant_for_command(options["tenant"], create=options["create_tenant"])
    except JournalError as exc:
        raise CommandError(f"{refused}{exc}") from None
