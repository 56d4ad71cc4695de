"""Shared fixtures. The corpus is a copy of shared/corpus kept in tests/fixtures/corpus."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "fixtures" / "corpus"


@pytest.fixture
def corpus() -> Path:
    return CORPUS


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, tmp_path_factory):
    """On SQLite the test database is a file, as the embedded default is (WAL, a busy
    timeout), not Django's shared in-memory database: there a page that reads while the
    live server's thread writes fails at once with "database table is locked" (shared-cache
    table locks ignore the busy timeout), which the product never meets. One file per test
    process (each pytest-xdist worker has its own temporary root), on tmpfs where there is
    one. ``TEST_DATABASE_NAME`` still wins."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3") and not db.get("TEST", {}).get("NAME"):
        shm = Path("/dev/shm")
        if shm.is_dir() and os.access(shm, os.W_OK):
            folder = Path(tempfile.mkdtemp(prefix="ledgerkeep-test-", dir=shm))
        else:
            folder = tmp_path_factory.mktemp("db")
        db.setdefault("TEST", {})["NAME"] = str(folder / "test.sqlite3")
        yield
        shutil.rmtree(folder, ignore_errors=True)  # the file and its -wal and -shm
        return
    yield


@pytest.fixture(scope="session")
def _worker_media(tmp_path_factory) -> Path:
    """One media folder per test process (each pytest-xdist worker has its own temporary
    root), so that no worker deletes or replaces the artifact files of another and no test
    writes into the developer's ``var/media``."""
    return tmp_path_factory.mktemp("media")


@pytest.fixture(autouse=True)
def _media_per_worker(settings, _worker_media):
    settings.MEDIA_ROOT = _worker_media


@pytest.fixture(autouse=True)
def _no_refused_key_limit(settings):
    """Refused API keys are counted per client address (``API_AUTH_FAILURE_RATE``); every
    test client is 127.0.0.1, so the suite's many 401 checks would share one counter. Tests
    of that limit set a rate themselves (tests/api/test_rate_limit.py)."""
    settings.API_AUTH_FAILURE_RATE = ""


@pytest.fixture(autouse=True)
def _drain_background_checks(request):
    """A test with a live server answers pages whose stored check runs on the background
    thread after commit (ledger_app.background), and a proxied call leaves the fold its
    append made due to that thread; wait for it before the database is flushed, or
    SQLite's shared in-memory database reports its table locked at teardown."""
    if "live_server" in request.fixturenames:
        request.getfixturevalue("transactional_db")
    elif "transactional_db" in request.fixturenames or request.node.get_closest_marker("django_db"):
        request.getfixturevalue("_django_db_helper")  # set up before: torn down after
    else:
        yield
        return
    yield
    from ledger_app.background import wait_for_background

    wait_for_background()
