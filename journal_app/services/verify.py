"""Re-hashing stored journals: bodies, entries, chunks, the chain and artifacts."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import transaction

from journal_app.chain import ArtifactFigures, check_figures
from journal_app.chain_check import StoredChunk, StoredFields, check_entry
from journal_app.models import (
    Artifact,
    Chunk,
    Entry,
    Journal,
    Tenant,
)
from journal_app.services.append import figures_check
from journal_app.services.scope import artifact_check

Progress = Callable[[int, int], None]


@dataclass
class VerifyReport:
    """Result of :func:`journal_verify`: entries checked, the first mismatch of each journal
    that has one (``failures``, in the order checked) and the first of them."""

    journals: int = 0
    entries: int = 0
    chunks: int = 0
    bytes: int = 0
    first_failure: dict[str, Any] | None = None
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.first_failure is None


def entry_check(entry: Entry, *, chain: bool = False) -> list[str]:
    """Recompute one entry's hashes and its figures hash now (the UI's "hash verified" badge).

    Args:
        chain: also check ``parent_hash`` against the previous entry (one more query).

    Returns:
        Problems naming each field that does not match; empty when all match.
    """
    expected_parent = None
    if chain:
        expected_parent = (
            Entry.objects.filter(journal_id=entry.journal_id, seq=entry.seq - 1)
            .values_list("entry_hash", flat=True)
            .first()
            or ""
        )
    return figures_check(entry) + entry.hash_problems(expected_parent=expected_parent)


#: the stored columns :func:`journal_verify` reads per entry, artifact figures joined
_COLUMNS = (
    "seq", "kind", "role", "tool_call_id", "tool_name", "derived", "is_error", "body",
    "body_hash", "byte_length", "meta", "meta_hash", "parent_hash", "entry_hash",
    "token_count", "token_source", "source_ref", "figures_hash", "artifact_id",
    "artifact__content_hash", "artifact__byte_size", "artifact__token_count",
    "artifact__token_source", "artifact__tenant_id", "artifact__media_type",
    "artifact__preview", "artifact__storage_name",
)  # fmt: skip
_CHUNK_COLUMNS = ("entry__seq", "position", "offset", "length", "hash")
#: rows per fetch of the server-side cursors: memory is bounded by it, not by the journal
FETCH = 2000


class _Row(namedtuple("_Row", [c.replace("__", "_") for c in _COLUMNS])):  # noqa: PYI024
    """One entry's stored columns, named as :data:`_COLUMNS` with ``__`` as ``_``."""

    def artifact(self, tenant: Tenant) -> Artifact:
        """The entry's artifact from the joined columns (``tenant``: the journal's)."""
        if self.artifact_tenant_id != tenant.pk:  # not the journal's tenant: read it whole
            return Artifact.objects.select_related("tenant").get(pk=self.artifact_id)
        return Artifact(
            pk=self.artifact_id,
            tenant=tenant,
            content_hash=self.artifact_content_hash,
            media_type=self.artifact_media_type,
            byte_size=self.artifact_byte_size,
            token_count=self.artifact_token_count,
            token_source=self.artifact_token_source,
            preview=self.artifact_preview,
            storage_name=self.artifact_storage_name,
        )


def _stream(journal: Journal) -> Iterator[tuple[_Row, list[StoredChunk]]]:
    """Each entry of ``journal`` in seq order with its stored chunks, as raw columns.

    Two queries whatever the journal's size, each read through a server-side cursor
    (``.iterator(chunk_size=FETCH)``; on PostgreSQL a named cursor, so memory holds one
    fetch): the entries by seq, and their chunks by (entry seq, position), merged here.
    """
    entries = (
        Entry.objects.filter(journal=journal)
        .order_by("seq")
        .values_list(*_COLUMNS)
        .iterator(chunk_size=FETCH)
    )
    chunks = (
        Chunk.objects.filter(entry__journal=journal)
        .order_by("entry__seq", "position")
        .values_list(*_CHUNK_COLUMNS)
        .iterator(chunk_size=FETCH)
    )
    pending = next(chunks, None)
    for values in entries:
        row = _Row(*values)
        mine: list[StoredChunk] = []
        while pending is not None and pending[0] <= row.seq:
            if pending[0] == row.seq:
                mine.append(StoredChunk(*pending[1:]))
            pending = next(chunks, None)
        yield row, mine


def journal_verify(
    *, journals: Sequence[Journal], progress: Progress | None = None
) -> VerifyReport:
    """Recompute every entry, body and chunk hash, the parent chain and the figures, streaming.

    Each journal is checked up to its first entry that does not match, which is reported
    (scope, seq, entry hash, the problems); the other journals are still checked, so one
    mismatch never hides another journal's state. Also checks the seq is gapless and the journal head matches the last entry,
    and that each artifact's stored bytes still hash to its content hash.

    Reads raw columns through server-side cursors (two queries per journal whatever its
    length, the artifacts' columns joined) inside one read transaction; each
    body is encoded once and its chunk hashes are computed from the same bytes.

    Returns:
        :class:`VerifyReport`; memory stays flat in journal size (:data:`FETCH` rows held).
    """
    report = VerifyReport()
    total = sum(j.head_seq for j in journals)
    checked: dict[int, list[str]] = {}
    with transaction.atomic():  # named cursors live in a transaction (no WITH HOLD copy)
        for journal in journals:
            failure = _verify_one(journal, report, total, progress, checked)
            if failure is not None:
                report.failures.append(failure)
                report.first_failure = report.first_failure or failure
    return report


def _verify_one(
    journal: Journal,
    report: VerifyReport,
    total: int,
    progress: Progress | None,
    checked: dict[int, list[str]],
) -> dict[str, Any] | None:
    journal.refresh_from_db(fields=["head_seq", "head_hash"])
    report.journals += 1
    scope = journal.scope_fields()
    tenant = journal.session.tenant
    expected_parent = ""
    expected_seq = 1
    for row, chunks in _stream(journal):
        problems: list[str] = []
        if row.seq != expected_seq:
            problems.append(f"seq: expected {expected_seq}, found {row.seq} (gap)")
        problems += check_entry(
            cast(StoredFields, row),  # _Row is built from _COLUMNS at import: mypy sees no fields
            scope=scope,
            chunks=chunks,
            expected_parent=expected_parent,
            chunk_bytes=journal.chunk_bytes,
        )
        problems += check_figures(
            entry_hash=row.entry_hash,
            token_count=row.token_count,
            token_source=row.token_source,
            source_ref=row.source_ref,
            artifact=None
            if row.artifact_id is None
            else ArtifactFigures(
                row.artifact_content_hash or "",
                row.artifact_byte_size or 0,
                row.artifact_token_count or 0,
                row.artifact_token_source or "",
            ),
            figures_hash_stored=row.figures_hash,
        )
        if row.artifact_id is not None and not problems:
            if row.artifact_id not in checked:
                checked[row.artifact_id] = artifact_check(row.artifact(tenant))
            problems += checked[row.artifact_id]
        report.entries += 1
        report.chunks += len(chunks)
        report.bytes += row.byte_length
        if problems:
            return {
                "scope": journal.scope_label,
                "seq": row.seq,
                "entry_hash": row.entry_hash,
                "problems": problems,
            }
        expected_parent = row.entry_hash
        expected_seq += 1
        if progress:
            progress(report.entries, total)
    if journal.head_seq != expected_seq - 1 or journal.head_hash != expected_parent:
        return {
            "scope": journal.scope_label,
            "seq": journal.head_seq,
            "entry_hash": journal.head_hash,
            "problems": [
                f"head: journal says seq {journal.head_seq} sha256:{journal.head_hash}, "
                f"entries end at seq {expected_seq - 1} sha256:{expected_parent}"
            ],
        }
    return None
