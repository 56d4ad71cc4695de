"""The bytes of artifacts in Django's default storage: atomic writes and garbage collection.

docs/design.md section 4 ("Artifacts"). An artifact's bytes live at
``artifacts/<tenant>/<sha256>``; the name is the content's hash, so a file at that name is
only as good as its bytes:

* :func:`artifact_bytes_put` writes to a temporary name beside the target, re-reads and
  checks the hash, then renames over the target (``os.replace``: atomic on one file
  system). A process killed mid-write leaves a temporary file, never a short file at the
  content-addressed name. A file already at the name is trusted only when its hash matches
  the content; otherwise it is replaced.
* An import that fails or is killed rolls its :class:`~journal_app.models.Artifact` rows
  back, but files it wrote stay: nothing references them. :func:`artifact_orphans` finds
  them (and stray temporary files), :func:`artifact_gc` deletes them; the ``gc_artifacts``
  command runs it, as a dry run unless asked to delete.

Storages other than the file system (S3-compatible via django-storages) write whole objects
or nothing; there the bytes are saved under the name itself and read back to check the hash.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage, default_storage

from journal_app.hashing import chunk_hash

#: Folder of every artifact in the storage: ``artifacts/<tenant>/<sha256>``.
ARTIFACT_ROOT = "artifacts"
#: Temporary files are ``.<sha256>.<random>.tmp`` beside their target.
TEMP_SUFFIX = ".tmp"
#: Files younger than this are never collected: an import still in its transaction holds
#: them without a committed row yet.
DEFAULT_MIN_AGE = timedelta(hours=1)


class ArtifactBytesError(OSError):
    """The bytes written for an artifact do not hash to its content hash.

    Nothing at the artifact's name is changed. :func:`journal_app.services.artifact_store`
    turns it into ``ArtifactBytesError`` (a domain error, HTTP 503), so the import or
    append that stored it rolls back. Usually a full or failing disk.
    """


def _hash_file(storage: Storage, name: str) -> str | None:
    try:
        with storage.open(name, "rb") as fh:
            return chunk_hash(fh.read())
    except OSError:
        return None


def artifact_bytes_put(*, name: str, data: bytes, digest: str, sync_dir: bool = True) -> str:
    """Make the storage hold exactly ``data`` at ``name``; idempotent.

    Args:
        name: storage name, ``artifacts/<tenant>/<sha256>``.
        data: the artifact's bytes (UTF-8 of its content).
        digest: ``sha256`` hex of ``data`` (:func:`journal_app.hashing.chunk_hash`).
        sync_dir: fsync the folder after the rename (the rename made durable). A caller
            storing many artifacts passes ``False`` and calls :func:`artifact_dirs_sync`
            once for all of them before it commits the rows naming them (one folder fsync
            per folder instead of one per file: half the fsyncs of an append).

    Returns:
        ``"kept"`` (a file with the right hash was there; its modification time is renewed
        so that :func:`artifact_gc` leaves it to the caller's transaction), ``"written"``
        (there was none) or ``"replaced"`` (a file with other bytes was there, e.g. cut
        short by a crash, and has been replaced).

    Raises:
        ArtifactBytesError: the bytes read back do not hash to ``digest`` (the target is
            left as it was; the temporary file is removed).
    """
    if chunk_hash(data) != digest:
        raise ArtifactBytesError(f"artifact bytes do not hash to sha256:{digest}; nothing written")
    storage = default_storage
    existed = storage.exists(name)
    if existed and _hash_file(storage, name) == digest:
        if isinstance(storage, FileSystemStorage):
            os.utime(storage.path(name))
        return "kept"
    if isinstance(storage, FileSystemStorage):
        _put_file(Path(storage.path(name)), data, digest)
        if sync_dir:
            _sync_dir(Path(storage.path(name)).parent)
    else:
        if existed:
            storage.delete(name)
        saved = storage.save(name, ContentFile(data))
        if saved != name or _hash_file(storage, name) != digest:
            raise ArtifactBytesError(
                f"artifact {name}: the stored bytes do not hash to sha256:{digest}"
            )
    return "replaced" if existed else "written"


def _put_file(target: Path, data: bytes, digest: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}{TEMP_SUFFIX}")
    try:
        with temp.open("xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if chunk_hash(temp.read_bytes()) != digest:
            raise ArtifactBytesError(
                f"artifact {target.name}: the bytes written do not hash to sha256:{digest}"
            )
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def _sync_dir(folder: Path) -> None:
    """fsync a folder: the renames into it become durable (best effort where unsupported)."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def artifact_dirs_sync(names: Iterable[str]) -> int:
    """fsync, once each, the folders holding the storage ``names`` written with
    ``artifact_bytes_put(..., sync_dir=False)``; a no-op for storages that are not local
    folders (their ``save`` is durable on return).

    Returns:
        The number of folders synced.
    """
    storage = default_storage
    if not isinstance(storage, FileSystemStorage):
        return 0
    folders = {Path(storage.path(name)).parent for name in names}
    for folder in sorted(folders):
        _sync_dir(folder)
    return len(folders)


@dataclass(frozen=True)
class StoredFile:
    """A file under :data:`ARTIFACT_ROOT`: storage name, size in bytes, age in seconds."""

    name: str
    size: int
    age_seconds: float

    @property
    def temporary(self) -> bool:
        """A temporary file of an interrupted :func:`artifact_bytes_put`."""
        return Path(self.name).name.startswith(".") and self.name.endswith(TEMP_SUFFIX)


def _walk(storage: Storage, folder: str) -> Iterator[str]:
    try:
        dirs, files = storage.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in sorted(files):
        yield f"{folder}/{name}"
    for sub in sorted(dirs):
        yield from _walk(storage, f"{folder}/{sub}")


def _stat(storage: Storage, name: str) -> StoredFile | None:
    try:
        size = storage.size(name)
        modified = storage.get_modified_time(name).timestamp()
    except (OSError, NotImplementedError):
        return None
    return StoredFile(name=name, size=size, age_seconds=max(0.0, time.time() - modified))


def artifact_orphans(
    *, referenced: set[str], min_age: timedelta = DEFAULT_MIN_AGE
) -> list[StoredFile]:
    """Files under :data:`ARTIFACT_ROOT` that no artifact row names, older than ``min_age``.

    Args:
        referenced: every ``Artifact.storage_name`` (committed rows).
        min_age: files modified more recently are left alone (an import in flight).

    Returns:
        The orphans, sorted by name: bytes of rolled-back imports and temporary files.
    """
    storage = default_storage
    out = []
    for name in _walk(storage, ARTIFACT_ROOT):
        if name in referenced:
            continue
        found = _stat(storage, name)
        if found is not None and found.age_seconds >= min_age.total_seconds():
            out.append(found)
    return out


def artifact_gc(*, referenced: set[str], orphans: list[StoredFile], min_age: timedelta) -> int:
    """Delete ``orphans`` (from :func:`artifact_orphans`); returns how many were deleted.

    Each file is checked again just before it goes: still unreferenced (``referenced`` is
    read again by the caller right before this call) and still older than ``min_age`` (an
    import that has just reused an orphan's bytes renewed its modification time, see
    :func:`artifact_bytes_put`).
    """
    storage = default_storage
    deleted = 0
    for orphan in orphans:
        if orphan.name in referenced:
            continue
        now = _stat(storage, orphan.name)
        if now is None or now.age_seconds < min_age.total_seconds():
            continue
        storage.delete(orphan.name)
        deleted += 1
    return deleted
