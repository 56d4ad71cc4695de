"""Start-up checks of the programs that load the settings late (gunicorn's master, Celery's
worker and beat): a bad setting stops them with one line, as ``manage.py`` does
(:mod:`config.cli`; README "Run in production")."""

from __future__ import annotations

import sys
from typing import NoReturn

from config.env import SettingError


def configuration_error(program: str, exc: Exception) -> NoReturn:
    """End the process with status 2 after one line on stderr,
    ``<program>: configuration error: <exc>`` (the message names the variable): how
    ``manage.py``, ``ledgerkeep``, gunicorn and Celery all stop on a setting they cannot use.

    Raises:
        SystemExit: always, status 2.
    """
    sys.stderr.write(f"{program}: configuration error: {exc}\n")
    raise SystemExit(2)


def settings_or_exit(program: str) -> None:
    """Load the settings (:mod:`config.settings`) now, and end the process with status 2
    and one line naming the variable when a setting cannot be used, not a traceback.

    Args:
        program: the name the line starts with (``gunicorn``, ``celery``).

    Raises:
        SystemExit: status 2, after writing ``<program>: configuration error: ...`` to stderr.
    """
    try:
        import config.settings  # noqa: F401  (read from the environment on import)
    except SettingError as exc:
        configuration_error(program, exc)
