"""The embedded default under concurrency (README "Configuration"): on a SQLite file, an
import of a large generated session folds everything while another thread logs in and
views pages, with no "database is locked" anywhere; a fold that could not be written is an
error in the import's summary and exit code.

Each case is a child process (``tests/support/sqlite_import_with_pages.py``) on a database
file of its own, as ``ledgerkeep`` runs with no ``DATABASE_URL``: the suite's own test
database is in memory and shared by one process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.generator import write_openai_chat

ROOT = Path(__file__).resolve().parents[1]
#: the child runs as the embedded default, whatever the suite runs against
_SERVICES = {"DATABASE_URL", "TEST_DATABASE_NAME", "CELERY_BROKER_URL", "CELERY_TASK_ALWAYS_EAGER"}


def _run(tmp_path: Path, entries: int, *extra: str) -> dict:
    source = tmp_path / "big.json"
    write_openai_chat(source, entries)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.sqlite_import_with_pages",
            str(tmp_path / "ledgerkeep.sqlite3"),
            str(source),
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
        env={k: v for k, v in os.environ.items() if k not in _SERVICES},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.xdist_group("sqlite-import-concurrency")
def test_an_import_folds_everything_while_pages_are_viewed_with_no_locked_database(tmp_path):
    got = _run(tmp_path, 1_500)

    assert got["import"]["error"] == "", got["import"]
    assert got["locked"] == []
    assert got["page_errors"] == []
    assert got["statuses"].get("login 302", 0) >= 2  # logged in during the import, and after
    assert got["statuses"].get("200", 0) >= 10
    # every entry is in a fold: contiguous ranges from seq 1 to the head
    folds = got["folds"]
    assert folds and folds[0][0] == 1 and folds[-1][1] == got["head_seq"] > 1_000
    assert all(b[0] == a[1] + 1 for a, b in zip(folds, folds[1:], strict=False))
    assert got["unfolded_tokens"] == 0
    assert got["failed_runs"] == []
    assert f"over seq 1-{got['head_seq']}" in got["import"]["stdout"]


@pytest.mark.xdist_group("sqlite-import-concurrency")
def test_a_fold_that_could_not_be_written_is_an_import_error(tmp_path):
    got = _run(tmp_path, 300, "--fail-fold")

    error = got["import"]["error"]
    assert error.startswith("the import committed its entries, but 1 automatic fold run(s) failed")
    assert "disk I/O error (forced by the test)" in error
    assert got["folds"] == []
    assert got["unfolded_tokens"] > got["threshold"]  # what the error says is left
    assert got["page_errors"] == []


@pytest.mark.xdist_group("sqlite-import-concurrency")
def test_a_login_that_waits_past_the_busy_timeout_is_told_503_not_a_500(tmp_path):
    # the viewer's busy timeout is 0: any write of its that meets the import's transaction is
    # refused at once, as one that meets a 20,000-entry import is after
    # SQLITE_BUSY_TIMEOUT_SECONDS. The import keeps the default wait: with 0 for the whole
    # process (as this test once had it), the import's own commit could meet the login's
    # short write and fail, which the product's 30 s wait never lets happen.
    got = _run(tmp_path, 1_500, "--viewer-busy-timeout-0")

    assert got["page_errors"] == []  # no 500, no traceback in a request: 503 or an answer
    assert "500" not in got["statuses"] and "login 500" not in got["statuses"]
    assert got["import"]["error"] == "", got["import"]


def test_only_sqlites_busy_error_becomes_the_503_page(rf):
    from django.db import OperationalError

    from config.busy import RETRY_AFTER, DatabaseBusyMiddleware

    middleware = DatabaseBusyMiddleware(lambda request: None)
    request = rf.post("/accounts/login/")

    busy = middleware.process_exception(request, OperationalError("database is locked"))
    assert busy.status_code == 503 and busy["Retry-After"] == str(RETRY_AFTER)
    assert "The database is busy" in busy.content.decode()
    assert middleware.process_exception(request, OperationalError("no such table: x")) is None
    assert middleware.process_exception(request, ValueError("database is locked")) is None
