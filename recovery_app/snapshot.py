"""Frozen snapshots and hash-verified reads (DESIGN.md section 7). Pure.

A :class:`Snapshot` is frozen to one scope (tenant, session, lane, branch) at one revision.
Every request is admitted against it first (:func:`admit`): a request from another scope
(another lane, say) or at a lower revision is denied before anything else happens, and
in particular before any model is called.

Search gives leads; reads give evidence. :func:`verify_read` re-checks an entry that was
re-read in full against the snapshot and against its own hashes: scope, seq (at or before
the revision, and the seq the lead named), raw (a summary or compaction marker returns
nothing), entry hash, body hash, byte length, metadata hash, and the position, offset,
length and hash of every chunk. A lead that fails any check is discarded with the reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from journal_app.chunking import chunk
from journal_app.hashing import body_hash, entry_hash, entry_header

SCOPE_PARTS = ("tenant", "session", "lane", "branch")
CHECKS = (
    "scope",
    "revision",
    "seq",
    "raw",
    "entry_hash",
    "body_hash",
    "byte_length",
    "meta_hash",
    "chunks",
)


class Denied(Exception):
    """A request the snapshot does not admit. ``reason``: the scope part, or ``revision``."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        super().__init__(f"denied ({reason}): {detail}")


@dataclass(frozen=True)
class Snapshot:
    """One scope at one revision. ``head_hash`` is the entry hash at ``revision`` when frozen.

    ``exclude_seqs`` are entries that are never results (the messages that fired the
    trigger: a question is not its own answer).
    """

    tenant: str
    session: str
    lane: str
    branch: str
    revision: int
    journal_id: int
    head_hash: str = ""
    exclude_seqs: tuple[int, ...] = ()

    @property
    def scope(self) -> dict[str, str]:
        return {p: getattr(self, p) for p in SCOPE_PARTS}

    @property
    def label(self) -> str:
        """``tenant/session/lane/branch``."""
        return "/".join(getattr(self, p) for p in SCOPE_PARTS)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.scope,
            "scope": self.label,
            "revision": self.revision,
            "head_hash": self.head_hash,
            "exclude_seqs": list(self.exclude_seqs),
        }


def admit(snapshot: Snapshot, *, scope: dict[str, str], revision: int) -> None:
    """Admit a request from ``scope`` that has seen the journal up to ``revision``.

    Raises:
        Denied: ``tenant``/``session``/``lane``/``branch`` when that part of the caller's
            scope differs from the snapshot's; ``revision`` when the request's revision is
            lower than the snapshot's (its view is older than what is frozen).
    """
    for part in SCOPE_PARTS:
        if scope.get(part) != getattr(snapshot, part):
            raise Denied(
                part,
                f"the snapshot is frozen to {part} {getattr(snapshot, part)!r} "
                f"({snapshot.label}); the request comes from {part} {scope.get(part)!r}",
            )
    if revision < snapshot.revision:
        raise Denied(
            "revision",
            f"the request is at revision {revision}, lower than the snapshot's "
            f"revision {snapshot.revision}",
        )


@dataclass(frozen=True)
class StoredChunk:
    position: int
    offset: int
    length: int
    hash: str


@dataclass
class StoredEntry:
    """An entry as re-read from storage, with its journal's scope and chunk size."""

    scope: dict[str, str]
    journal_id: int
    chunk_bytes: int
    seq: int
    kind: str
    role: str
    tool_call_id: str
    derived: bool
    body: str
    body_hash: str
    byte_length: int
    meta: str
    meta_hash: str
    parent_hash: str
    entry_hash: str
    chunks: Sequence[StoredChunk] = field(default_factory=list)


@dataclass
class ReadCheck:
    """Outcome of :func:`verify_read`: ``checks`` maps each name of :data:`CHECKS` to ok."""

    ok: bool
    checks: dict[str, bool]
    failed: list[str]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": self.checks, "failed": self.failed, "reason": self.reason}


def verify_read(
    snapshot: Snapshot, stored: StoredEntry, *, lead_seq: int, lead_hash: str
) -> ReadCheck:
    """Check an entry re-read in full against the snapshot and its own hashes.

    Args:
        snapshot: the frozen scope and revision.
        stored: the entry as just re-read (all fields and every chunk).
        lead_seq, lead_hash: what the search result said (seq and entry hash, hex).

    Returns:
        :class:`ReadCheck`; ``reason`` names every failed check with stored and recomputed
        values (``"chunks: chunk 1 hash stored ..., recomputed ..."``).
    """
    problems: dict[str, str] = {}
    if stored.scope != snapshot.scope or stored.journal_id != snapshot.journal_id:
        problems["scope"] = (
            f"entry belongs to {'/'.join(stored.scope.get(p, '?') for p in SCOPE_PARTS)}, snapshot is {snapshot.label}"
        )
    if stored.seq > snapshot.revision:
        problems["revision"] = (
            f"seq {stored.seq} is after the snapshot's revision {snapshot.revision}"
        )
    if stored.seq != lead_seq:
        problems["seq"] = f"the lead named seq {lead_seq}, the entry is at seq {stored.seq}"
    if stored.derived:
        problems["raw"] = "a summary or compaction marker (derived entry) is never evidence"
    raw = stored.body.encode("utf-8", errors="surrogatepass")
    b_hash = body_hash(raw)
    if b_hash != stored.body_hash:
        problems["body_hash"] = f"stored {stored.body_hash}, recomputed {b_hash}"
    if len(raw) != stored.byte_length:
        problems["byte_length"] = f"stored {stored.byte_length}, recomputed {len(raw)}"
    m_hash = metadata_hash_text(stored.meta)
    if m_hash != stored.meta_hash:
        problems["meta_hash"] = f"stored {stored.meta_hash}, recomputed {m_hash}"
    header = entry_header(
        **snapshot.scope,
        seq=stored.seq,
        kind=stored.kind,
        role=stored.role,
        tool_call_id=stored.tool_call_id,
        body_hash=b_hash,
        byte_length=len(raw),
        parent_hash=stored.parent_hash,
        meta_hash=m_hash,
        derived=stored.derived,
    )
    e_hash = entry_hash(header)
    if e_hash != stored.entry_hash or stored.entry_hash != lead_hash:
        problems["entry_hash"] = (
            f"lead {lead_hash}, stored {stored.entry_hash}, recomputed {e_hash}"
        )
    chunk_problems = []
    expected = chunk(raw, stored.chunk_bytes)
    got = sorted(stored.chunks, key=lambda c: c.position)
    if len(expected) != len(got):
        chunk_problems.append(f"stored {len(got)} chunks, recomputed {len(expected)}")
    for want, have in zip(expected, got, strict=False):
        for name in ("position", "offset", "length", "hash"):
            if getattr(want, name) != getattr(have, name):
                chunk_problems.append(
                    f"chunk {have.position} {name} stored {getattr(have, name)}, "
                    f"recomputed {getattr(want, name)}"
                )
    if chunk_problems:
        problems["chunks"] = "; ".join(chunk_problems)
    checks = {name: name not in problems for name in CHECKS}
    failed = [name for name in CHECKS if name in problems]
    reason = "; ".join(f"{name}: {problems[name]}" for name in failed)
    return ReadCheck(not failed, checks, failed, reason)


def metadata_hash_text(meta: str) -> str:
    """The metadata hash of stored canonical metadata text (as the journal computes it)."""
    return hashlib.sha256(meta.encode("utf-8", errors="surrogatepass")).hexdigest()


__all__ = [
    "CHECKS",
    "Denied",
    "ReadCheck",
    "Snapshot",
    "StoredChunk",
    "StoredEntry",
    "admit",
    "metadata_hash_text",
    "verify_read",
]
