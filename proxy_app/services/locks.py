"""The locks the proxy's journal writes take, so that calls of one session take turns.

* :func:`session_lock`: one transaction in which no other proxied call of the session places
  a history (a PostgreSQL advisory lock, or a process lock on SQLite);
* :func:`sqlite_serial`: on SQLite only, the same process lock around any other write (a
  fold, an answer), since SQLite has one writer.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

#: the advisory-lock class of proxy placements (first key of ``pg_advisory_xact_lock``)
LOCK_CLASS = 0x1ED9
#: SQLite has one writer: the proxy's placements in a process take turns on this lock
_SQLITE_LOCK = threading.RLock()


@contextmanager
def session_lock(tenant_id: int, session_key: str) -> Iterator[None]:
    """One transaction in which no other proxied call of the session places a history.

    PostgreSQL: a transaction-level advisory lock on ``(LOCK_CLASS, 32 bits of sha256 of
    "tenant:session")``, taken before the session row may exist (so two first calls do not
    both create it) and released at commit or rollback; other sessions do not wait. SQLite:
    a process lock around the transaction (SQLite serialises writers anyway; the lock keeps
    two deferred transactions from deadlocking on their upgrade to writing).
    """
    if connection.vendor == "postgresql":
        digest = hashlib.sha256(f"{tenant_id}:{session_key}".encode()).digest()
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)",
                    [LOCK_CLASS, int.from_bytes(digest[:4], "big", signed=True)],
                )
            yield
        return
    with _SQLITE_LOCK, transaction.atomic():
        yield


@contextmanager
def sqlite_serial() -> Iterator[None]:
    """On SQLite, the process lock of :func:`session_lock` (a fold writes too); elsewhere
    nothing."""
    if connection.vendor == "postgresql":
        yield
        return
    with _SQLITE_LOCK:
        yield
