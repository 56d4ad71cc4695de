"""Re-hashing stored journals: bodies, entries, chunks, the chain and artifacts."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from journal_app.chain import (
    StoredChunk,
    check_entry,
)
from journal_app.models import (
    Entry,
    Journal,
)
from journal_app.services.append import figures_check
from journal_app.services.scope import artifact_check

Progress = Callable[[int, int], None]


@dataclass
class VerifyReport:
    """Result of :func:`journal_verify`: entries checked and the first mismatch, if any."""

    journals: int = 0
    entries: int = 0
    chunks: int = 0
    bytes: int = 0
    first_failure: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.first_failure is None


def _stored_chunks(entry: Entry) -> list[StoredChunk]:
    return [StoredChunk(c.position, c.offset, c.length, c.hash) for c in entry.chunks.all()]


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
    journal = entry.journal
    return figures_check(entry) + check_entry(
        scope=journal.scope_fields(),
        seq=entry.seq,
        kind=entry.kind,
        role=entry.role,
        tool_call_id=entry.tool_call_id,
        derived=entry.derived,
        tool_name=entry.tool_name,
        is_error=entry.is_error,
        body=entry.body,
        body_hash_stored=entry.body_hash,
        byte_length=entry.byte_length,
        meta=entry.meta,
        meta_hash_stored=entry.meta_hash,
        parent_hash=entry.parent_hash,
        entry_hash_stored=entry.entry_hash,
        chunks=_stored_chunks(entry),
        expected_parent=expected_parent,
        chunk_bytes=journal.chunk_bytes,
    )


def _iter_entries(journal: Journal, batch: int = 1000) -> Iterator[Entry]:
    # seq is gapless, so a range (not OFFSET/LIMIT over the rest) keeps every batch an index
    # range scan; a gap still shows up as a seq mismatch in the caller
    last = 0
    head = (
        Entry.objects.filter(journal=journal).order_by("-seq").values_list("seq", flat=True).first()
        or 0
    )
    while last < head:
        rows = list(
            Entry.objects.filter(journal=journal, seq__gt=last, seq__lte=last + batch)
            .order_by("seq")
            .select_related("artifact")
            .prefetch_related("chunks")
        )
        yield from rows
        last += batch


def journal_verify(
    *, journals: Sequence[Journal], progress: Progress | None = None
) -> VerifyReport:
    """Recompute every entry, body and chunk hash, the parent chain and the figures, streaming.

    Stops at the first entry that does not match and reports it (scope, seq, entry hash,
    the problems). Also checks the seq is gapless and the journal head matches the last entry,
    and that each artifact's stored bytes still hash to its content hash.

    Returns:
        :class:`VerifyReport`; memory stays flat in journal size (batches of 1,000 entries).
    """
    report = VerifyReport()
    total = sum(j.head_seq for j in journals)
    for journal in journals:
        journal.refresh_from_db(fields=["head_seq", "head_hash"])
        report.journals += 1
        scope = journal.scope_fields()
        expected_parent = ""
        expected_seq = 1
        for entry in _iter_entries(journal):
            problems: list[str] = []
            if entry.seq != expected_seq:
                problems.append(f"seq: expected {expected_seq}, found {entry.seq} (gap)")
            chunks = _stored_chunks(entry)
            problems += check_entry(
                scope=scope,
                seq=entry.seq,
                kind=entry.kind,
                role=entry.role,
                tool_call_id=entry.tool_call_id,
                derived=entry.derived,
                tool_name=entry.tool_name,
                is_error=entry.is_error,
                body=entry.body,
                body_hash_stored=entry.body_hash,
                byte_length=entry.byte_length,
                meta=entry.meta,
                meta_hash_stored=entry.meta_hash,
                parent_hash=entry.parent_hash,
                entry_hash_stored=entry.entry_hash,
                chunks=chunks,
                expected_parent=expected_parent,
                chunk_bytes=journal.chunk_bytes,
            )
            problems += figures_check(entry)
            if entry.artifact_id is not None and not problems:
                problems += artifact_check(entry.artifact)
            report.entries += 1
            report.chunks += len(chunks)
            report.bytes += entry.byte_length
            if problems:
                report.first_failure = {
                    "scope": journal.scope_label,
                    "seq": entry.seq,
                    "entry_hash": entry.entry_hash,
                    "problems": problems,
                }
                return report
            expected_parent = entry.entry_hash
            expected_seq += 1
            if progress:
                progress(report.entries, total)
        if journal.head_seq != expected_seq - 1 or journal.head_hash != expected_parent:
            report.first_failure = {
                "scope": journal.scope_label,
                "seq": journal.head_seq,
                "entry_hash": journal.head_hash,
                "problems": [
                    f"head: journal says seq {journal.head_seq} sha256:{journal.head_hash}, "
                    f"entries end at seq {expected_seq - 1} sha256:{expected_parent}"
                ],
            }
            return report
    return report
