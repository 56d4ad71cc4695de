"""Recovery's snapshots and hash-verified reads (docs/design.md section 7).

:func:`snapshot_freeze` freezes a journal at a revision (recording its head hash and
bringing the search index up to it); :func:`read_verify` checks an entry read again against
that snapshot and gives the analyst's view of it. Shared by :mod:`.attempt` (one bounded
attempt at a fold) and :mod:`.tools` (the agent's search, read and analyst). Reads only: the
one write is the search index's catch-up in :func:`snapshot_freeze`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from journal_app.models import Entry, Journal
from recovery_app.citations import ReadView
from recovery_app.errors import RecoveryError
from recovery_app.search import index_sync
from recovery_app.snapshot import (
    ReadCheck,
    Snapshot,
    StoredChunk,
    StoredEntry,
    verify_read,
)


def journal_reload(journal: Journal) -> Journal:
    """``journal`` read again with its session and tenant (its head as stored now)."""
    return Journal.objects.select_related("session__tenant").get(pk=journal.pk)


def snapshot_spec(journal: Journal, revision: int, exclude: Sequence[int] = ()) -> Snapshot:
    """The snapshot of ``journal``'s scope at ``revision`` before it is frozen (no head hash:
    :func:`snapshot_freeze` adds it): what an attempt admits a request against and records
    first. ``exclude`` seqs are never admitted."""
    scope = journal.scope_fields()
    return Snapshot(
        **scope, revision=revision, journal_id=journal.pk, exclude_seqs=tuple(sorted(exclude))
    )


def snapshot_freeze(
    *, journal: Journal, revision: int | None = None, exclude_seqs: Sequence[int] = ()
) -> Snapshot:
    """Freeze ``journal`` (its scope) at ``revision`` (default: its head).

    Records the entry hash at the revision and makes sure the search index holds every entry
    up to it. Raw entries with ``seq <= revision`` are admitted; ``exclude_seqs`` never are.

    Raises:
        RecoveryError: ``revision`` is negative or beyond the journal's head.
    """
    journal = journal_reload(journal)
    rev = journal.head_seq if revision is None else int(revision)
    if rev < 0 or rev > journal.head_seq:
        raise RecoveryError(
            f"revision {rev} is outside journal {journal.scope_label} (head {journal.head_seq})"
        )
    head_hash = (
        Entry.objects.filter(journal=journal, seq=rev).values_list("entry_hash", flat=True).first()
        or ""
    )
    index_sync(journal=journal, upto=rev)
    spec = snapshot_spec(journal, rev, exclude_seqs)
    return Snapshot(**{**spec.__dict__, "head_hash": head_hash})


def _stored(entry: Entry) -> StoredEntry:
    j = entry.journal
    return StoredEntry(
        scope=j.scope_fields(),
        journal_id=j.pk,
        chunk_bytes=j.chunk_bytes,
        seq=entry.seq,
        kind=entry.kind,
        role=entry.role,
        tool_call_id=entry.tool_call_id,
        derived=entry.derived,
        body=entry.body,
        body_hash=entry.body_hash,
        byte_length=entry.byte_length,
        meta=entry.meta,
        meta_hash=entry.meta_hash,
        parent_hash=entry.parent_hash,
        entry_hash=entry.entry_hash,
        chunks=[StoredChunk(c.position, c.offset, c.length, c.hash) for c in entry.chunks.all()],
        tool_name=entry.tool_name,
        is_error=entry.is_error,
    )


@dataclass
class Read:
    """An entry re-read in full and checked: the row, the check, and the analyst's view."""

    entry: Entry
    check: ReadCheck
    view: ReadView
    admitted: bool = False

    def record(self, query: str = "") -> dict[str, Any]:
        """The receipt's line for this read."""
        e = self.entry
        return {
            "seq": e.seq,
            "entry": e.entry_hash,
            "kind": e.kind,
            "role": e.role,
            "tokens": e.token_count,
            "query": query,
            **self.check.to_dict(),
        }


def entry_reread(entry_id: int) -> Entry | None:
    """The entry of pk ``entry_id`` read again in full (journal, scope, chunks), or ``None``."""
    return (
        Entry.objects.select_related("journal__session__tenant")
        .prefetch_related("chunks")
        .filter(pk=entry_id)
        .first()
    )


def read_verify(snapshot: Snapshot, entry: Entry, *, lead_seq: int, lead_hash: str) -> Read:
    """Check a re-read ``entry`` against ``snapshot`` (:func:`recovery_app.snapshot.verify_read`)."""
    check = verify_read(snapshot, _stored(entry), lead_seq=lead_seq, lead_hash=lead_hash)
    chunks = sorted((c.position, c.offset, c.length) for c in entry.chunks.all())
    view = ReadView(
        seq=entry.seq,
        entry_hash=entry.entry_hash,
        kind=entry.kind,
        role=entry.role,
        content=entry.content,
        body=entry.body,
        chunks=chunks,
        tool_call_id=entry.tool_call_id,
        tool_name=entry.tool_name,
        is_error=entry.is_error,
        derived=entry.derived,
        verified=check.ok,
        reason=check.reason,
    )
    return Read(entry, check, view)
