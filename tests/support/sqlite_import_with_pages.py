"""A child process of ``tests/test_sqlite_import_concurrency.py``: the embedded default (a
SQLite file, eager tasks) importing a generated session while another thread logs in and
views pages, as a person does while a large import folds.

Usage: ``python -m tests.support.sqlite_import_with_pages DB SOURCE [--fail-fold]
[--viewer-busy-timeout-0]``. The last flag gives the page viewer's connections (only theirs)
a busy timeout of 0, as if each of its writes had already waited out
``SQLITE_BUSY_TIMEOUT_SECONDS`` behind the import; the import keeps the default.
Prints one JSON object: the import's outcome (exit message), the page statuses, every
log line or traceback that mentions a locked database, and the ledger's folds.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import traceback
from collections import Counter

LOCKED = "database is locked"


class _Seen(logging.Handler):
    """Every log record, message and traceback as text."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info))
        self.lines.append(text)


def main() -> None:
    db, source = sys.argv[1], sys.argv[2]
    fail_fold = "--fail-fold" in sys.argv
    viewer_no_wait = "--viewer-busy-timeout-0" in sys.argv
    os.environ["DATABASE_URL"] = f"sqlite:///{db}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["CELERY_BROKER_URL"] = "memory://localhost/"  # the embedded default
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import CommandError, call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test client's response.templates; nothing else changes
    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    from journal_app.models import Membership
    from journal_app.services import tenant_ensure

    user = get_user_model().objects.create_user("alice", password="pw-for-the-test-only")
    Membership.objects.create(user=user, tenant=tenant_ensure(slug="acme"), role="admin")

    seen = _Seen()
    logging.getLogger().addHandler(seen)
    logging.getLogger().setLevel(logging.INFO)

    if fail_fold:  # the fold cannot be written: every automatic fold fails
        from django.db import OperationalError

        from ledger_app.services import fold_stages

        def locked(*args, **kwargs):
            raise OperationalError("disk I/O error (forced by the test)")

        fold_stages.fold_store = locked

    done = threading.Event()
    statuses: Counter[str] = Counter()
    page_errors: list[str] = []

    def pages() -> None:
        client = Client()
        urls = [
            "/",
            "/t/acme/big/",
            "/t/acme/big/main/main/",
            "/ledger/acme/big/main/main/",
            "/ledger/acme/big/main/main/folds/",
        ]
        rounds = 0
        try:
            while not done.is_set() or rounds < 2:
                r = client.post(
                    "/accounts/login/", {"username": "alice", "password": "pw-for-the-test-only"}
                )
                statuses[f"login {r.status_code}"] += 1
                if r.status_code >= 500 and r.status_code != 503:
                    page_errors.append(f"login: {r.status_code}")
                for url in urls:
                    r = client.get(url)
                    statuses[f"{r.status_code}"] += 1
                    if r.status_code >= 500 and r.status_code != 503:  # 503: busy, truthful
                        page_errors.append(f"{url}: {r.status_code}")
                rounds += 1
        except Exception:
            page_errors.append(traceback.format_exc())
        finally:
            connection.close()

    viewer = threading.Thread(target=pages)
    if viewer_no_wait:
        from django.db.backends.signals import connection_created

        def no_wait(sender, connection, **kwargs):
            if threading.current_thread() is viewer:
                with connection.cursor() as cursor:
                    cursor.execute("PRAGMA busy_timeout = 0")

        connection_created.connect(no_wait, weak=False)
    viewer.start()
    outcome = {"error": "", "stdout": ""}
    from io import StringIO

    out = StringIO()
    try:
        call_command(
            "import_journal",
            source,
            "--tenant",
            "acme",
            "--session",
            "big",
            "--no-progress",
            stdout=out,
        )
    except CommandError as exc:
        outcome["error"] = str(exc)
    outcome["stdout"] = out.getvalue()
    done.set()
    viewer.join()

    from ledger_app.background import run_in_background

    run_in_background(lambda: None).result(timeout=300)  # the pages' background checks
    from journal_app.models import Journal
    from ledger_app.models import Fold, TaskRun
    from ledger_app.receivers import unfolded_count

    journal = Journal.objects.get(session__key="big")
    folds = list(
        Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD)
        .order_by("number")
        .values_list("seq_start", "seq_end")
    )
    print(
        json.dumps(
            {
                "import": outcome,
                "statuses": dict(statuses),
                "page_errors": page_errors,
                "locked": [line for line in seen.lines if LOCKED in line],
                "head_seq": journal.head_seq,
                "folds": folds,
                "unfolded_tokens": unfolded_count(journal.pk),
                "threshold": settings.LEDGER_FOLD_THRESHOLD_TOKENS,
                "failed_runs": list(
                    TaskRun.objects.filter(status="failed").values_list("error", flat=True)
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
