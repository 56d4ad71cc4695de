"""The database connection dropped in the middle of an import (docs/design.md section 9).

The import's own progress callback, called after its first batch of rows is written inside
the import's transaction, has another connection end the import's backend
(``pg_terminate_backend``). The import fails with the clear error (``DatabaseUnavailable``: 503 on the API, a
``CommandError`` naming the file on the command line, never a traceback); nothing of it is left
(tenant, session, journal, entries, chunks, artifacts); the same import run again succeeds
and stores exactly what a clean import stores, hash for hash.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from journal_app.models import Artifact, Chunk, Entry, Journal, Session, Tenant
from journal_app.services import DatabaseUnavailable, journal_import
from tests.conftest import CORPUS

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

SOURCES = [
    # 403 entries, tool results over the artifact threshold: one journal, one append
    CORPUS / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl",
    # several sessions become several lanes: the drop comes after the first lane's rows
    CORPUS / "opencode-export" / "khala-sessions",
]


class _Rollback(Exception):
    pass


def _stored(tenant: str) -> list[tuple]:
    rows = []
    for e in Entry.objects.filter(journal__session__tenant__slug=tenant).order_by(
        "journal__lane", "seq"
    ):
        rows.append(
            (
                e.journal.lane,
                e.seq,
                e.entry_hash,
                e.body_hash,
                e.meta_hash,
                e.parent_hash,
                e.byte_length,
                e.artifact.content_hash if e.artifact_id else None,
                tuple(e.chunks.values_list("position", "offset", "length", "hash")),
            )
        )
    return rows


def _counts() -> dict[str, int]:
    return {
        m.__name__: m.objects.count() for m in (Tenant, Session, Journal, Entry, Chunk, Artifact)
    }


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_an_import_whose_connection_drops_leaves_nothing_and_runs_again_hash_for_hash(
    settings, tmp_path, side, postgres_only, path
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.ARTIFACT_THRESHOLD_TOKENS = 500  # some artifacts in both sources

    # the clean import's rows, then rolled back so the scope is empty again
    try:
        with transaction.atomic():
            journal_import(path=path, tenant="acme", session="s1")
            clean = _stored("acme")
            raise _Rollback
    except _Rollback:
        pass
    assert clean and any(row[7] for row in clean), "the source should hold artifacts"
    before = _counts()

    calls = []

    def drop_connection(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 1:
            pid = connection.connection.info.backend_pid
            side.execute("SELECT pg_terminate_backend(%s)", [pid])

    with pytest.raises(DatabaseUnavailable) as caught:
        journal_import(path=path, tenant="acme", session="s1", progress=drop_connection)
    assert caught.value.status == 503 and caught.value.code == "database_unavailable"
    assert str(caught.value).startswith(
        f"the database connection was lost during the import of {path.name}; nothing was written"
    )
    assert isinstance(caught.value.__cause__, DatabaseError)
    assert len(calls) == 1  # nothing was written after the drop
    # the dropped connection was closed by the failed rollback: the next query reconnects
    assert _counts() == before
    assert side.execute("SELECT count(*) FROM journal_app_entry").fetchone() == (before["Entry"],)

    result = journal_import(path=path, tenant="acme", session="s1")
    assert result.append.appended == len(clean)
    assert _stored("acme") == clean


def test_the_import_command_reports_a_dropped_connection_without_a_traceback(
    settings, tmp_path, side, monkeypatch
):
    from django.core.management import CommandError, call_command

    from ledger_app.services import transcript_import as command  # the command's import service

    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    settings.MEDIA_ROOT = tmp_path / "media"
    real = command.journal_import
    path = SOURCES[0]

    def dropping_import(**kwargs):
        def progress(done: int, total: int) -> None:
            side.execute(
                "SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid]
            )

        return real(**{**kwargs, "progress": progress})

    monkeypatch.setattr(command, "journal_import", dropping_import)
    with pytest.raises(CommandError) as caught:
        call_command(
            "import_journal", str(path), "--tenant", "acme", "--create-tenant", "--session", "s1"
        )

    assert str(caught.value).startswith("import failed, nothing written: the database connection")
    assert path.name in str(caught.value)
    assert Entry.objects.count() == 0  # and the connection works again
