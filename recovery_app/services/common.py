"""Recovery's settings, errors, snapshots and hash-verified reads (DESIGN.md section 7).

Shared by :mod:`.attempt` (one bounded attempt at a fold) and :mod:`.tools` (the agent's
search, read and analyst).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from journal_app.errors import DomainError
from journal_app.models import Entry, Journal
from recovery_app import analyst as lexical_analyst
from recovery_app.analyst import AnalystModel, ReadView
from recovery_app.budget import Budget
from recovery_app.search import index_sync
from recovery_app.snapshot import (
    ReadCheck,
    Snapshot,
    StoredChunk,
    StoredEntry,
    verify_read,
)

log = logging.getLogger("ledgerkeep.recovery")
#: How far (in seq) a tool call's result is looked for before the whole journal is.
PAIR_WINDOW = 256


class RecoveryError(DomainError):
    """Base of recovery's own domain errors (the pure modules' errors are listed in __all__)."""

    status = 422
    code = "invalid_request"


class EntryNotFound(RecoveryError):
    """No entry of that seq or hash in the caller's journal at the revision (HTTP 404)."""

    status = 404
    code = "not_found"


def recovery_budget() -> Budget:
    """The budget from ``settings.RECOVERY_MAX_*``, the only copy of its figures (defaults
    in ``config/settings.py``: 3 rounds, 4 searches, 8 reads, 4 sources, 8,000 tokens, 30 s)."""
    return Budget(
        rounds=settings.RECOVERY_MAX_ROUNDS,
        searches=settings.RECOVERY_MAX_SEARCHES,
        reads=settings.RECOVERY_MAX_READS,
        sources=settings.RECOVERY_MAX_SOURCES,
        tokens=settings.RECOVERY_MAX_TOKENS,
        seconds=settings.RECOVERY_MAX_SECONDS,
    )


def analyst_model_from_settings() -> AnalystModel | None:
    """The model-backed analyst when a model is configured, else ``None`` (the offline default).

    Configured means ``OPENAI_BASE_URL`` plus ``RECOVERY_ANALYST_MODEL`` (or, failing that,
    ``WRITER_MODEL``); calls go through :class:`ledger_app.model_client.ModelClient`.
    Called only once an attempt has been admitted and triggered.
    """
    base_url = settings.OPENAI_BASE_URL
    model = settings.RECOVERY_ANALYST_MODEL or settings.WRITER_MODEL
    if not (base_url and model):
        return None
    from ledger_app.model_client import ModelClient, ModelConfig

    config = dataclasses.replace(ModelConfig.from_settings(settings), writer_model=model)
    return lexical_analyst.ModelAnalyst(ModelClient(config), model)


# --- snapshots and reads ------------------------------------------------------------------


def _journal(journal: Journal) -> Journal:
    return Journal.objects.select_related("session__tenant").get(pk=journal.pk)


def _snapshot_spec(journal: Journal, revision: int, exclude: Sequence[int] = ()) -> Snapshot:
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
    journal = _journal(journal)
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
    spec = _snapshot_spec(journal, rev, exclude_seqs)
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


def _reread(entry_id: int) -> Entry | None:
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
