"""The embedded default's SQLite settings: WAL, a busy timeout, immediate write transactions,
so an import and page views proceed together (README "Configuration")."""

from __future__ import annotations

import copy

import pytest
from django.conf import settings
from django.db import connection
from django.db.backends.sqlite3.base import DatabaseWrapper

pytestmark = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="the embedded default's settings (SQLite)"
)


def _wrapper(path) -> DatabaseWrapper:
    conf = copy.deepcopy(settings.DATABASES["default"])
    conf["NAME"] = str(path)
    return DatabaseWrapper(conf, alias=f"side-{id(path)}")


@pytest.fixture(autouse=True)
def _side_databases(django_db_blocker):
    with django_db_blocker.unblock():  # side connections to files of these tests' own
        yield


def test_a_file_database_opens_in_wal_mode_with_a_busy_timeout(tmp_path):
    db = _wrapper(tmp_path / "x.sqlite3")
    with db.cursor() as cur:
        cur.execute("PRAGMA journal_mode")
        assert cur.fetchone()[0] == "wal"
        cur.execute("PRAGMA busy_timeout")
        assert cur.fetchone()[0] == settings.DATABASES["default"]["OPTIONS"]["timeout"] * 1000
    assert db.transaction_mode == "IMMEDIATE"
    db.close()


def test_a_reader_reads_while_a_writer_holds_its_transaction(tmp_path):
    path = tmp_path / "y.sqlite3"
    writer, reader = _wrapper(path), _wrapper(path)
    with writer.cursor() as cur:
        cur.execute("CREATE TABLE t (n INTEGER)")
        cur.execute("INSERT INTO t VALUES (1)")
    writer.set_autocommit(False)
    with writer.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (2)")  # uncommitted: holds the write lock
    # a second connection (a page view) reads meanwhile: under WAL the committed row, not
    # "database is locked"
    assert _count(reader) == 1
    writer.commit()
    writer.close()


def _count(db: DatabaseWrapper) -> int:
    with db.cursor() as cur:
        cur.execute("SELECT count(*) FROM t")
        n = cur.fetchone()[0]
    db.close()
    return n
