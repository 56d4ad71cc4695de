"""Frozen snapshots and hash-verified reads (docs/design.md section 7). Pure.

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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from journal_app.chain_check import StoredChunk, check_entry
from journal_app.errors import DomainError

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


class Denied(DomainError):
    """A request the snapshot does not admit. ``reason``: the scope part, or ``revision`` (403)."""

    status = 403
    code = "forbidden"

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
    tool_name: str = ""
    is_error: bool | None = None


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

    The hashes are recomputed by the journal's own :func:`journal_app.chain_check.check_entry`
    (one definition of the entry header and the chunking), under the *snapshot's* scope:
    an entry of another scope cannot pass.

    Args:
        snapshot: the frozen scope and revision.
        stored: the entry as just re-read (all fields and every chunk).
        lead_seq, lead_hash: what the search result said (seq and entry hash, hex).

    Returns:
        :class:`ReadCheck`; ``reason`` names every failed check with stored and recomputed
        values (``"chunks: chunk 1: stored offset ... hash ..., recomputed ..."``).
    """
    problems: dict[str, list[str]] = {}

    def fail(name: str, detail: str) -> None:
        problems.setdefault(name, []).append(detail)

    if stored.scope != snapshot.scope or stored.journal_id != snapshot.journal_id:
        where = "/".join(stored.scope.get(p, "?") for p in SCOPE_PARTS)
        fail("scope", f"entry belongs to {where}, snapshot is {snapshot.label}")
    if stored.seq > snapshot.revision:
        fail("revision", f"seq {stored.seq} is after the snapshot's revision {snapshot.revision}")
    if stored.seq != lead_seq:
        fail("seq", f"the lead named seq {lead_seq}, the entry is at seq {stored.seq}")
    if stored.derived:
        fail("raw", "a summary or compaction marker (derived entry) is never evidence")
    if stored.entry_hash != lead_hash:
        fail("entry_hash", f"the lead named {lead_hash}, the entry is {stored.entry_hash}")
    for problem in check_entry(
        stored,
        scope=snapshot.scope,
        chunks=stored.chunks,
        expected_parent=None,
        chunk_bytes=stored.chunk_bytes,
    ):
        name, _, detail = problem.partition(": ")
        if name.startswith("chunk"):
            name, detail = "chunks", problem
        fail(name, detail)
    names = list(CHECKS) + [n for n in problems if n not in CHECKS]
    checks = {name: name not in problems for name in names}
    failed = [name for name in names if name in problems]
    reason = "; ".join(f"{name}: {', '.join(problems[name])}" for name in failed)
    return ReadCheck(not failed, checks, failed, reason)


__all__ = [
    "CHECKS",
    "Denied",
    "ReadCheck",
    "Snapshot",
    "StoredChunk",
    "StoredEntry",
    "admit",
    "verify_read",
]
