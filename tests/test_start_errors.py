"""A bad setting stops gunicorn's master and Celery's worker with one line naming the
variable and status 2, as ``manage.py`` does: no traceback (README "Run in production")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent
BAD = '{"gpt-5": "cheap"}'


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LEDGER_MODEL_PRICES": BAD, "DJANGO_SETTINGS_MODULE": "config.settings"}
    return subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("program", "args"),
    [
        ("gunicorn", ["-c", "python:config.gunicorn", "config.asgi:application", "--check-config"]),
        ("celery", ["-A", "config", "worker", "--pool", "solo"]),
        ("celery", ["-A", "config", "beat"]),
    ],
)
def test_a_bad_setting_is_one_line_and_status_2(program, args):
    done = _run([str(BIN / program), *args])
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"{program}: configuration error: LEDGER_MODEL_PRICES")
    assert len(lines) == 1, done.stderr


@pytest.mark.parametrize("command", [["sessions"], ["import_journal", "samples/demo-session.json"]])
def test_a_database_never_migrated_says_run_migrate(tmp_path, command):
    """A command over an empty SQLite file ends with one line naming the missing table and
    the command to run, status 2; the import is not reported as a lost connection."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'empty.db'}",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", *command],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "connection was lost" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("manage.py: the database has no table journal_app_")
    assert last.endswith("run `manage.py migrate` first")


def test_missing_table_reads_sqlite_and_postgresql_wording():
    from journal_app.services.errors import missing_table

    assert missing_table(Exception("no such table: journal_app_tenant")) == "journal_app_tenant"
    assert missing_table(Exception('relation "ledger_app_fold" does not exist\nLINE 1')) == (
        "ledger_app_fold"
    )
    assert missing_table(Exception("server closed the connection unexpectedly")) is None
