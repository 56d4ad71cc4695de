"""Fixtures of the failure tests: real Celery workers on Redis, side connections to PostgreSQL.

The worker and connection-drop tests need PostgreSQL (the worker processes share the test
database, and ``pg_terminate_backend`` drops a connection) and Redis at
``FAILURE_TEST_BROKER_URL`` (default ``redis://127.0.0.1:6379/8``, a database index of their
own; each test also uses a queue of its own). They skip on SQLite with the reason.
Assertions are on state, polled with a deadline, never on timing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from django.db import connection
from kombu import Exchange, Queue

ROOT = Path(__file__).resolve().parents[2]
BROKER = os.environ.get("FAILURE_TEST_BROKER_URL", "redis://127.0.0.1:6379/8")
DEADLINE = 45.0


def database_url() -> str:
    """The test database as a ``DATABASE_URL`` for worker processes."""
    db = connection.settings_dict
    auth = quote(db["USER"] or "")
    if db["PASSWORD"]:
        auth += ":" + quote(db["PASSWORD"])
    host = db["HOST"] or "127.0.0.1"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{auth + '@' if auth else ''}{host}{port}/{quote(db['NAME'])}"


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"gave up after {timeout:.0f} s waiting for {what}")


@pytest.fixture
def postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip(
            "needs PostgreSQL: worker processes must share the test database and the test "
            f"drops connections with pg_terminate_backend (this run uses {connection.vendor}); "
            "set DATABASE_URL=postgres://..."
        )


@pytest.fixture
def side(postgres_only) -> Iterator[psycopg.Connection]:
    """A second, autocommit connection to the test database (another client's view)."""
    with psycopg.connect(
        dbname=connection.settings_dict["NAME"],
        user=connection.settings_dict["USER"] or None,
        password=connection.settings_dict["PASSWORD"] or None,
        host=connection.settings_dict["HOST"] or "127.0.0.1",
        port=connection.settings_dict["PORT"] or None,
        autocommit=True,
    ) as conn:
        yield conn


def lock_waiters(side: psycopg.Connection) -> list[int]:
    """Backends of the test database waiting on a lock (other than the side connection)."""
    rows = side.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    ).fetchall()
    return [r[0] for r in rows]


def backend_alive(side: psycopg.Connection, pid: int) -> bool:
    return bool(side.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone())


class Workers:
    """Start Celery worker processes on one fresh queue; stop and clean up at teardown."""

    def __init__(self, tmp: Path) -> None:
        self.queue = f"failure-{uuid.uuid4().hex[:12]}"
        self.tmp = tmp
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def start(self, *, visibility_timeout: int | None = None) -> subprocess.Popen:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": BROKER,
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "LEDGER_FOLD_THRESHOLD_TOKENS": str(10**9),
        }
        env.pop("FAILURE_VISIBILITY_TIMEOUT", None)
        if visibility_timeout is not None:
            env["FAILURE_VISIBILITY_TIMEOUT"] = str(visibility_timeout)
        name = f"w{len(self.procs)}-{self.queue}@%h"
        log = self.tmp / f"worker-{len(self.procs)}.log"
        command = [
            sys.executable, "-m", "celery", "-A", "tests.failure.worker_app", "worker",
            "--pool", "solo", "--concurrency", "1", "-Q", self.queue, "-n", name,
            "--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel", "INFO",
        ]  # fmt: skip
        with log.open("wb") as fh:
            proc = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.procs.append((proc, log))
        return proc

    def wait_ready(self, proc: subprocess.Popen) -> None:
        log = next(path for p, path in self.procs if p is proc)
        wait_for(
            lambda: proc.poll() is not None or b" ready." in log.read_bytes(),
            "the worker to be ready",
        )
        assert proc.poll() is None, f"worker exited early:\n{log.read_text(errors='replace')}"

    def kill9(self, proc: subprocess.Popen) -> None:
        """``kill -9`` of the worker's whole process group: no shutdown, no ack, no rollback."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)

    def send(self, task: Any, *, args: list[Any], task_id: str | None = None) -> str:
        from config.celery import app

        eager = app.conf.task_always_eager
        app.conf.task_always_eager = False
        try:
            with app.connection_for_write(BROKER) as conn:
                sent = task.apply_async(
                    args=args, queue=self.queue, connection=conn, task_id=task_id
                )
        finally:
            app.conf.task_always_eager = eager
        return sent.id

    def logs(self) -> str:
        return "\n".join(
            f"--- worker {i} ---\n{path.read_text(errors='replace')}"
            for i, (_, path) in enumerate(self.procs)
        )

    def close(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=15)
        self._clean_broker()

    def _clean_broker(self) -> None:
        from config.celery import app

        with app.connection_for_write(BROKER) as conn:
            queue = Queue(self.queue, Exchange(self.queue), routing_key=self.queue)
            bound = queue.bind(conn.default_channel)
            bound.declare()  # the channel learns the binding, so delete() removes it from Redis
            bound.delete()
            client = conn.default_channel.client
            # messages a killed worker left unacknowledged for this queue only
            for tag, raw in client.hgetall("unacked").items():
                try:
                    _, _, routing_key = json.loads(raw)
                except (ValueError, TypeError):
                    continue
                if routing_key == self.queue:
                    client.hdel("unacked", tag)
                    client.zrem("unacked_index", tag)


@pytest.fixture
def workers(postgres_only, tmp_path) -> Iterator[Workers]:
    pool = Workers(tmp_path)
    try:
        yield pool
    finally:
        pool.close()
        print(pool.logs())
