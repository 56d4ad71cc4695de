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
