"""The journal's domain errors and the write transaction that maps a lost connection.

Every error is a :class:`~journal_app.errors.DomainError`, mapped to HTTP once in
``config/api.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import InterfaceError, OperationalError, transaction

from journal_app.errors import DomainError


class JournalError(DomainError):
    """Base of the journal's domain errors (mapped to HTTP once, in ``config/api.py``)."""

    status = 422
    code = "invalid_request"


class DatabaseUnavailable(JournalError):
    """The database connection was lost in the middle of a write; nothing written (HTTP 503).

    The transaction is rolled back by the server; the same request may succeed once the
    database answers again (a dropped connection is a clear error, not a traceback).
    """

    status = 503
    code = "database_unavailable"


class CommitUnconfirmed(DatabaseUnavailable):
    """The connection was lost while the transaction committed (HTTP 503): the server may
    have written it or not, and the client cannot tell. Running the same import again is
    safe (an identical import changes nothing) and says what the scope holds."""

    code = "commit_unconfirmed"


class CommittedConnectionLost(JournalError):
    """The write committed, then the connection was lost before the answer was complete
    (HTTP 503). The message says what was committed; nothing needs to be sent again."""

    status = 503
    code = "committed_then_lost"


class ArtifactWriteError(JournalError):
    """An artifact's bytes could not be stored with their hash (HTTP 503); nothing written."""

    status = 503
    code = "artifact_write_failed"


class ArtifactStoreFull(ArtifactWriteError):
    """The artifact store has no space left (``ENOSPC``/``EDQUOT``; HTTP 507 Insufficient
    Storage). The message names the store; no temporary file and no row is left."""

    status = 507
    code = "artifact_store_full"


#: a missing table as SQLite (``no such table: x``) and PostgreSQL (``relation "x" does not
#: exist``) word it
_MISSING_TABLE = re.compile(r'no such table: (\w+)|relation "(\w+)" does not exist')


def missing_table(exc: BaseException) -> str | None:
    """The table a database error says does not exist (the database was never migrated, or
    is another project's), or ``None`` for any other error.

    Args:
        exc: any exception (``OperationalError`` on SQLite, ``ProgrammingError`` on
            PostgreSQL).

    Returns:
        The table's name, e.g. ``"journal_app_tenant"``.
    """
    found = _MISSING_TABLE.search(str(exc))
    return None if found is None else found.group(1) or found.group(2)


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


@contextmanager
def _write_transaction(what: str) -> Iterator[None]:
    """``transaction.atomic()`` whose lost connection becomes a truthful error.

    Lost while the body ran (or inside an enclosing transaction): the transaction is rolled
    back, :class:`DatabaseUnavailable` "nothing was written". Lost at the outermost commit
    itself: whether the server committed is unknown, :class:`CommitUnconfirmed` says so.
    """
    outermost = not transaction.get_connection().in_atomic_block
    body_done = False
    try:
        with transaction.atomic():
            yield
            body_done = True
    except (OperationalError, InterfaceError) as exc:
        if missing_table(exc):
            raise  # not a lost connection: the database is not migrated (config/cli.py says so)
        if body_done and outermost:
            raise CommitUnconfirmed(
                f"the database connection was lost while committing {what}; whether it was "
                "written is unknown: run the same import again, an identical import stores "
                f"nothing twice and says what the scope holds ({_first_line(exc)})"
            ) from exc
        raise DatabaseUnavailable(
            f"the database connection was lost during {what}; nothing was written, "
            f"try again ({_first_line(exc)})"
        ) from exc


class ConflictError(JournalError):
    """A different entry at an existing ``seq`` (HTTP 409). Nothing was written."""

    status = 409
    code = "conflict"

    def __init__(self, seq: int, stored_hash: str, new_hash: str) -> None:
        self.seq = seq
        self.stored_hash = stored_hash
        self.new_hash = new_hash
        super().__init__(
            f"seq {seq} already holds sha256:{stored_hash}; the new entry hashes to "
            f"sha256:{new_hash}: conflict, nothing written",
            entry=f"seq {seq}",
        )


class GapError(JournalError):
    """An append that would leave a gap in ``seq`` (seq is gapless per branch); HTTP 409."""

    status = 409
    code = "gap"

    def __init__(self, message: str) -> None:
        super().__init__(f"{message}; nothing written", field="start_seq")
