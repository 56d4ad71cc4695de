"""Artifact bytes written atomically, checked by hash, and orphans collected."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from hypothesis import given
from hypothesis import strategies as st

from journal_app.artifact_storage import artifact_bytes_put, artifact_orphans
from journal_app.hashing import chunk_hash
from journal_app.models import Artifact
from journal_app.services import artifact_check, artifact_store, journal_import, tenant_ensure
from tests.conftest import CORPUS

ROOT = Path(__file__).resolve().parents[2]
SOURCE = CORPUS / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl"
CONTENT = "pytest output\n" + "line of a long tool result\n" * 400


@pytest.fixture
def media(settings, tmp_path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    return settings.MEDIA_ROOT


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_put_writes_the_bytes_and_leaves_no_temporary_file(media):
    data = CONTENT.encode()
    digest = chunk_hash(data)

    assert artifact_bytes_put(name=f"artifacts/t/{digest}", data=data, digest=digest) == "written"
    assert (media / "artifacts/t" / digest).read_bytes() == data
    assert sorted(p.name for p in (media / "artifacts/t").iterdir()) == [digest]
    assert artifact_bytes_put(name=f"artifacts/t/{digest}", data=data, digest=digest) == "kept"


@pytest.mark.django_db
def test_a_batch_of_artifacts_syncs_each_folder_once_and_every_file(media, monkeypatch):
    from journal_app.services.scope import ArtifactItem, artifacts_store

    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    tenant = tenant_ensure(slug="t")
    items = [ArtifactItem(content=f"{CONTENT}{i}") for i in range(5)]

    stored = artifacts_store(tenant=tenant, items=[*items, items[0]])

    assert len(synced) == 5 + 1  # each new file, then the one folder they were renamed into
    assert [created for _, created in stored] == [True] * 5 + [False]
    assert all(
        chunk_hash((media / a.storage_name).read_bytes()) == a.content_hash for a, _ in stored
    )
    synced.clear()
    artifacts_store(tenant=tenant, items=items)  # all kept: nothing written, nothing synced
    assert synced == []


@pytest.mark.django_db
def test_a_truncated_file_at_the_address_is_replaced_not_committed(media):
    tenant = tenant_ensure(slug="acme")
    data = CONTENT.encode()
    target = media / "artifacts" / "acme" / chunk_hash(data)
    target.parent.mkdir(parents=True)
    target.write_bytes(data[: len(data) // 2])  # a crash mid-write, before the fix

    artifact, created = artifact_store(tenant=tenant, content=CONTENT)

    assert created
    assert target.read_bytes() == data
    assert artifact_check(artifact) == []


@pytest.mark.django_db
def test_storing_existing_content_repairs_its_damaged_bytes(media):
    tenant = tenant_ensure(slug="acme")
    artifact, _ = artifact_store(tenant=tenant, content=CONTENT)
    path = media / artifact.storage_name
    path.write_bytes(b"tampered")

    again, created = artifact_store(tenant=tenant, content=CONTENT)

    assert (again.pk, created) == (artifact.pk, False)
    assert path.read_bytes() == CONTENT.encode()


def test_a_writer_killed_mid_write_leaves_only_a_temporary_file(media, tmp_path):
    # a real process writes half the bytes and is killed with SIGKILL inside the write
    data = CONTENT.encode()
    digest = chunk_hash(data)
    script = f"""
import os, signal, django
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
os.environ["MEDIA_ROOT"] = {str(media)!r}
django.setup()
import io
from journal_app import artifact_storage
real_write = io.BufferedWriter.write
class Dying(io.FileIO):
    def write(self, b):
        super().write(bytes(b)[: len(b) // 2])
        os.fsync(self.fileno())
        os.kill(os.getpid(), signal.SIGKILL)
from pathlib import Path
Path.open = lambda self, mode="r", *a, **k: Dying(self, mode.replace("b", ""))
data = {data!r}
artifact_storage.artifact_bytes_put(name="artifacts/t/{digest}", data=data, digest={digest!r})
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, timeout=120)

    assert run.returncode == -signal.SIGKILL
    folder = media / "artifacts" / "t"
    assert not (folder / digest).exists()  # never a short file at the address
    (temp,) = folder.iterdir()
    assert temp.name.startswith(f".{digest}.") and temp.name.endswith(".tmp")
    assert 0 < temp.stat().st_size < len(data)
    # the next write succeeds as if nothing had happened
    assert artifact_bytes_put(name=f"artifacts/t/{digest}", data=data, digest=digest) == "written"
    assert (folder / digest).read_bytes() == data


@pytest.mark.django_db(transaction=True)
def test_gc_artifacts_lists_then_deletes_the_orphans_of_a_failed_import(media, settings, capsys):
    settings.ARTIFACT_THRESHOLD_TOKENS = 500

    def dying(done: int, total: int) -> None:
        raise KeyboardInterrupt  # killed after the first batch, artifacts already written

    with pytest.raises(KeyboardInterrupt):
        journal_import(path=SOURCE, tenant="acme", session="s1", progress=dying)
    assert Artifact.objects.count() == 0
    orphans = sorted((media / "artifacts" / "acme").iterdir())
    assert orphans, "the failed import should have written artifact files"
    kept = artifact_store(tenant=tenant_ensure(slug="acme"), content=CONTENT)[0]
    for path in (media / "artifacts" / "acme").iterdir():
        _age(path, 7200)

    call_command("gc_artifacts")
    dry = capsys.readouterr().out
    assert f"{len(orphans)} orphan file(s)" in dry and "dry run: nothing deleted" in dry
    assert kept.storage_name not in dry
    assert all(p.exists() for p in orphans)

    fresh = media / "artifacts" / "acme" / ("f" * 64)
    fresh.write_bytes(b"an import in flight")
    call_command("gc_artifacts", "--delete")
    assert f"{len(orphans)} orphan file(s) deleted" in capsys.readouterr().out
    assert not any(p.exists() for p in orphans)
    assert (media / kept.storage_name).exists() and fresh.exists()
    assert artifact_check(kept) == []
    assert artifact_orphans(referenced={kept.storage_name}, min_age=timedelta(0)) != []


@given(
    st.lists(
        st.lists(
            st.sampled_from(["ok", "error", "FAIL", "failed", "x", "not found", "Traceback"]),
            max_size=5,
        ).map(" ".join),
        max_size=40,
    )
)
def test_the_preview_error_scan_finds_the_lines_a_per_line_search_finds(lines):
    """One scan of the joined text (the preview is recomputed by verify) gives the
    same first error lines, in order, as a search of each line."""
    from journal_app.artifacts import _ERROR_LINE, PREVIEW_ERROR_LINES, _error_lines

    want = [ln for ln in lines if _ERROR_LINE.search(ln)][:PREVIEW_ERROR_LINES]
    assert _error_lines(lines, PREVIEW_ERROR_LINES) == want


@given(
    st.lists(
        st.sampled_from(
            ["ok", "Error:", "EXCEPTION", "xerror", "failures", "Fatal", "not  found", "panic!"]
            + ["denied", "FAIL", "fail", "é", "\n", "_error", "error_", "TRACEBACK", " "]
        ),
        max_size=30,
    ).map("".join)
)
def test_the_guarded_error_pattern_matches_what_the_plain_one_does(text):
    import re

    from journal_app.artifacts import _ERROR_LINE

    plain = re.compile(
        r"(?i)\b(error|exception|traceback|failed|failure|fatal|panic|denied|not found|FAIL)\b"
    )
    assert [m.span() for m in _ERROR_LINE.finditer(text)] == [
        m.span() for m in plain.finditer(text)
    ]
