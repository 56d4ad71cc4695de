"""Faults answered truthfully (README "REST API"): a connection lost after an import
committed says what was committed, one lost at the commit says it is unknown, a full
artifact store is 507 naming the store with nothing half-written.

The connection faults are real on PostgreSQL (``pg_terminate_backend`` from a side
connection) and raised at the same point on SQLite, so the default suite holds them too.
"""

from __future__ import annotations

import errno
import os

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection, connections

from journal_app.auth import api_key_create
from journal_app.models import Artifact, Entry, Session
from journal_app.services import tenant_ensure
from tests.api.conftest import Api
from tests.conftest import CORPUS

pytestmark = pytest.mark.django_db(transaction=True)

# 403 entries, tool results over the artifact threshold
SOURCE = CORPUS / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl"
UPLOAD = "/sessions/s1/main/main/import"
LOST = "server closed the connection unexpectedly"


@pytest.fixture(autouse=True)
def _no_auto_fold(settings, tmp_path):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.ARTIFACT_THRESHOLD_TOKENS = 500  # the source then holds artifacts


@pytest.fixture
def api(client):
    _, raw = api_key_create(tenant=tenant_ensure(slug="acme"), name="runtime")
    return Api(client, raw)


def _upload(api):
    with SOURCE.open("rb") as fh:
        return api.upload(UPLOAD, {"file": fh})


def _lose_connection_after(real, side=None):
    """``real`` (an import service) that returns, then loses its connection: terminated on
    PostgreSQL, the next query raising on SQLite."""

    def service(**kwargs):
        done = real(**kwargs)
        # the answer then needs a query (the session of a journal not read with it)
        done.imported.journal._state.fields_cache.pop("session", None)
        if side is not None:
            side.execute(
                "SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid]
            )
        else:
            _next_query_fails()
        return done

    return service


def _next_query_fails():
    def fail(*args, **kwargs):
        raise OperationalError(LOST)

    connections["default"].create_cursor = fail  # this connection only, until closed


@pytest.fixture
def fault_side(request):
    """The side connection on PostgreSQL, ``None`` on SQLite."""
    if connection.vendor == "postgresql":
        return request.getfixturevalue("side")
    return None


def _heal() -> None:
    """Take the faults off and close the connection: the next query opens a new one."""
    wrapper = connections["default"]
    wrapper.__dict__.pop("create_cursor", None)
    wrapper.__dict__.pop("commit", None)
    wrapper.close()


@pytest.fixture(autouse=True)
def _restore_connection():
    yield
    _heal()


def _stored() -> int:
    _heal()  # a new connection, as the next request gets
    return Entry.objects.filter(journal__session__key="s1").count()


def _upload_with(api, monkeypatch, fault, side) -> dict:
    """Upload the source through the import service wrapped by ``fault``: the 503's body."""
    import journal_app.api as journal_api

    real = journal_api.transcript_import_service()
    monkeypatch.setattr(journal_api, "transcript_import_service", lambda: fault(real, side))
    r = _upload(api)
    assert r.status_code == 503, r.content[:300]
    return r.json()


def test_an_upload_whose_connection_is_lost_after_commit_says_what_it_committed(
    api, monkeypatch, fault_side
):
    body = _upload_with(api, monkeypatch, _lose_connection_after, fault_side)

    assert body["code"] == "committed_then_lost"
    assert "nothing was written" not in body["message"]
    stored = _stored()
    assert stored == 403
    assert body["message"].startswith(
        f"the import of {SOURCE.name} committed: {stored} entries appended, 0 already present, "
        f"in acme/s1/main/main (head seq {stored})"
    )


def test_the_import_command_whose_connection_is_lost_after_commit_says_what_it_committed(
    monkeypatch, fault_side
):
    from recovery_app.management.commands import import_journal as command

    monkeypatch.setattr(
        command, "transcript_import", _lose_connection_after(command.transcript_import, fault_side)
    )

    with pytest.raises(CommandError) as caught:
        call_command(
            "import_journal",
            str(SOURCE),
            "--tenant",
            "acme",
            "--create-tenant",
            "--session",
            "s1",
            "--no-progress",
        )

    message = str(caught.value)
    assert "nothing written" not in message and "nothing was written" not in message
    stored = _stored()
    assert stored == 403
    assert message.startswith(
        f"the import of {SOURCE.name} committed: {stored} entries appended, 0 already present, "
        "in acme/s1/main/main"
    )


def _commit_lost(real, side=None):
    """``real`` (an import service) whose commit loses the connection: the backend is
    terminated just before COMMIT on PostgreSQL, COMMIT raises on SQLite."""
    wrapper = connections["default"]
    real_commit = wrapper.commit

    def commit():
        wrapper.__dict__.pop("commit", None)  # once
        if side is None:
            raise OperationalError(LOST)
        side.execute("SELECT pg_terminate_backend(%s)", [wrapper.connection.info.backend_pid])
        return real_commit()

    def service(**kwargs):
        wrapper.commit = commit
        return real(**kwargs)

    return service


def test_a_connection_lost_at_the_commit_says_it_is_unknown_whether_it_was_written(
    api, monkeypatch, fault_side
):
    body = _upload_with(api, monkeypatch, _commit_lost, fault_side)

    assert body["code"] == "commit_unconfirmed"
    assert body["message"].startswith(
        f"the database connection was lost while committing the import of {SOURCE.name}; "
        "whether it was written is unknown"
    )
    assert "nothing was written" not in body["message"]

    monkeypatch.undo()
    _heal()
    r = _upload(api)  # the same import again: safe, and it says what the scope holds
    assert r.status_code == 200, r.content[:300]
    assert r.json()["appended"] + r.json()["unchanged"] == 403 == _stored()


def test_the_import_command_says_a_commit_it_lost_is_unknown(monkeypatch, fault_side):
    from recovery_app.management.commands import import_journal as command

    monkeypatch.setattr(
        command, "transcript_import", _commit_lost(command.transcript_import, fault_side)
    )

    with pytest.raises(CommandError) as caught:
        call_command(
            "import_journal", str(SOURCE), "--tenant", "acme", "--create-tenant", "--no-progress"
        )

    message = str(caught.value)
    assert message.startswith(f"import of {SOURCE}: the database connection was lost while ")
    assert "whether it was written is unknown" in message
    assert "nothing written" not in message


# A full artifact store ------------------------------------------------------------------


@pytest.fixture
def disk_full(monkeypatch):
    """``ENOSPC`` when an artifact's bytes are flushed to the disk (the temporary file exists
    then, holding part of them)."""
    real = os.fsync
    seen = []

    def fsync(fd):
        if os.path.isdir(f"/proc/self/fd/{fd}") or not os.path.exists(f"/proc/self/fd/{fd}"):
            return real(fd)
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def _files(settings) -> list[str]:
    root = settings.MEDIA_ROOT
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]


def test_an_upload_into_a_full_artifact_store_is_507_naming_it_and_writes_nothing(
    api, settings, disk_full
):
    r = _upload(api)

    assert r.status_code == 507, r.content[:300]
    body = r.json()
    assert body["code"] == "artifact_store_full"
    assert body["message"].startswith(f"the artifact store ({settings.MEDIA_ROOT}) is full: ")
    assert "nothing written" in body["message"]
    assert disk_full and disk_full[0].endswith(".tmp")  # a temporary file was being written
    assert _files(settings) == []  # and is gone: no half-written file
    assert (Session.objects.count(), Entry.objects.count(), Artifact.objects.count()) == (0, 0, 0)


def test_an_append_into_a_full_artifact_store_is_507_and_writes_nothing(api, settings, disk_full):
    big = "refund ledger line\n" * 2_000  # over the artifact threshold
    call = {"name": "bash", "arguments": {"cmd": "cat ledger.txt"}}
    entries = [
        {
            "kind": "tool_call",
            "role": "assistant",
            "content": call,
            "tool_call_id": "c1",
            "tool_name": "bash",
        },
        {
            "kind": "tool_result",
            "role": "tool",
            "content": {"output": big, "is_error": False},
            "tool_call_id": "c1",
            "tool_name": "bash",
        },
    ]
    r = api.post("/sessions/s1/main/main/entries", {"start_seq": 1, "entries": entries})

    assert r.status_code == 507, r.content[:300]
    assert r.json()["code"] == "artifact_store_full"
    assert str(settings.MEDIA_ROOT) in r.json()["message"]
    assert _files(settings) == []
    assert (Entry.objects.count(), Artifact.objects.count()) == (0, 0)


def test_the_import_command_into_a_full_artifact_store_names_it_and_writes_nothing(
    settings, disk_full
):
    with pytest.raises(CommandError) as caught:
        call_command(
            "import_journal", str(SOURCE), "--tenant", "acme", "--create-tenant", "--no-progress"
        )

    assert str(caught.value).startswith(
        f"import failed, nothing written: the artifact store ({settings.MEDIA_ROOT}) is full: "
    )
    assert _files(settings) == []
    assert (Session.objects.count(), Entry.objects.count(), Artifact.objects.count()) == (0, 0, 0)


def test_another_write_error_of_the_store_is_503_naming_it(api, settings, monkeypatch):
    def fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    r = _upload(api)

    assert r.status_code == 503, r.content[:300]
    assert r.json()["code"] == "artifact_write_failed"
    assert r.json()["message"].startswith(f"the artifact store ({settings.MEDIA_ROOT}) could not")
    assert Entry.objects.count() == 0
