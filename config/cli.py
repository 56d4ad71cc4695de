"""``ledgerkeep``: the project's management commands without ``manage.py``.

The console entry point of the installed package (``[project.scripts]`` in
``pyproject.toml``): ``ledgerkeep import_journal PATH --tenant T``, ``ledgerkeep compact``,
``ledgerkeep verify_journal``, ``ledgerkeep runserver``, ... take the same arguments as
``manage.py`` and read the same environment variables (README "Configuration").
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None, *, prog: str = "ledgerkeep") -> None:
    """Run one management command: ``argv`` (default ``sys.argv``) as ``manage.py`` takes it.

    A setting that cannot be used (config/env.py ``SettingError``, e.g. DEBUG off without
    ``DJANGO_SECRET_KEY``, a bad ``LEDGER_MODEL_PRICES``) ends the process with status 2 and
    the one-line message, no traceback; so does a database that has not been migrated (a
    table missing: the line says to run ``migrate``). ``prog`` names the program in help and
    errors (``manage.py`` calls this too).
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line
    from django.db import DatabaseError

    from config.env import SettingError
    from config.startup import configuration_error

    args = list(sys.argv if argv is None else argv)
    try:
        execute_from_command_line([prog, *args[1:]])
    except SettingError as exc:  # a start-up error: the message names the variable
        configuration_error(prog, exc)
    except DatabaseError as exc:
        from journal_app.services.errors import missing_table  # the apps are loaded by now

        table = missing_table(exc)
        if table is None:
            raise
        sys.stderr.write(
            f"{prog}: the database has no table {table}: it is not migrated; run "
            f"`{prog} migrate` first\n"
        )
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
