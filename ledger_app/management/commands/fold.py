"""``manage.py fold``: an alias of ``compact`` (one command, one fold service)."""

from __future__ import annotations

from ledger_app.management.commands.compact import Command as CompactCommand


class Command(CompactCommand):
    help = "Alias of `compact`. " + CompactCommand.help
