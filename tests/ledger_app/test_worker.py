"""A real Celery worker folds a journal through Redis (STYLE.md point 9: not only eager mode).

Needs PostgreSQL (the worker process connects to the test database) and Redis at
``CELERY_TEST_BROKER_URL`` (default ``redis://127.0.0.1:6379/14``, a database index of its
own; the queue name is unique per run too, so the worker cannot take anyone else's tasks).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection
from kombu import Exchange, Queue

from config.celery import app
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.models import Fold, TaskRun
from ledger_app.tasks import fold_journal

ROOT = Path(__file__).resolve().parents[2]
BROKER = os.environ.get("CELERY_TEST_BROKER_URL", "redis://127.0.0.1:6379/14")


def _database_url() -> str:
    db = connection.settings_dict
    auth = quote(db["USER"] or "")
    if db["PASSWORD"]:
        auth += ":" + quote(db["PASSWORD"])
    host = db["HOST"] or "127.0.0.1"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{auth + '@' if auth else ''}{host}{port}/{quote(db['NAME'])}"


def _stop(worker: subprocess.Popen) -> None:
    if worker.poll() is not None:
        return
    os.killpg(worker.pid, signal.SIGTERM)
    try:
        worker.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=15)


def _delete_queue(name: str) -> None:
    with app.connection_for_write(BROKER) as conn:
        queue = Queue(name, Exchange(name), routing_key=name).bind(conn.default_channel)
        queue.declare()  # the channel learns the binding, so delete() removes it from Redis
        queue.delete()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_folds_a_journal_once(settings, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip(
            "the worker process must share the test database, which only PostgreSQL allows "
            f"(this run uses {connection.vendor}); set DATABASE_URL=postgres://..."
        )
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9  # no in-process fold from the receiver
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key="worker"))
    journal_append(
        journal=journal,
        items=[
            message("system", "Never touch the payments tables without asking first."),
            message("user", "Fix the refund rounding."),
            tool_call("c1", "exec", {"command": "pytest tests/test_refunds.py"}),
            tool_result("c1", "1 passed", exit_code=0),
            message("assistant", "The refund test passes."),
        ],
    )

    queue = f"ledger-test-{uuid.uuid4().hex[:12]}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": BROKER,
        "CELERY_TASK_ALWAYS_EAGER": "false",
    }
    log_path = tmp_path / "worker.log"
    command = [
        sys.executable, "-m", "celery", "-A", "config", "worker",
        "--pool", "solo", "--concurrency", "1", "-Q", queue, "-n", f"{queue}@%h",
        "--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel", "INFO",
    ]  # fmt: skip
    eager = app.conf.task_always_eager
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        app.conf.task_always_eager = False
        with app.connection_for_write(BROKER) as conn:
            sent = fold_journal.apply_async(args=[journal.pk], queue=queue, connection=conn)

        deadline = time.monotonic() + 60
        run = None
        while time.monotonic() < deadline and worker.poll() is None:
            run = TaskRun.objects.filter(task_id=sent.id, finished_at__isnull=False).first()
            if run is not None and Fold.objects.filter(journal=journal).exists():
                break
            time.sleep(0.25)

        assert worker.poll() is None, "the worker exited early"
        assert run is not None, "no finished run within 60 seconds"
        assert run.status == TaskRun.Status.SUCCEEDED, run.error
        assert Fold.objects.filter(journal=journal).count() == 1
        result = run.result
        assert (result["fold"], result["created"], result["folds"]) == (1, True, [1])
        assert result["writer"] == "offline" and "1 fold(s) by writer offline" in result["reason"]
    finally:
        app.conf.task_always_eager = eager
        _stop(worker)
        _delete_queue(queue)
        print(f"--- worker output ({' '.join(command)}) ---")
        print(log_path.read_text(errors="replace"))
