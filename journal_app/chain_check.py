"""Checking a stored entry against its chain: every hash recomputed from stored values. Pure.

:func:`check_entry` recomputes the body hash, byte length, metadata hash, entry hash (under
the entry's scope), the parent link and the chunks of one stored entry and lists every
mismatch. It is the one entry check: ``Entry.hash_problems`` (the "hash verified" badge),
``journal_verify`` and recovery's verified read all call it. The hashes it recomputes are
the ones :func:`journal_app.chain.prepare_entries` wrote.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from journal_app.chunking import chunk
from journal_app.hashing import body_hash, header_hash


@dataclass(frozen=True)
class StoredChunk:
    """One stored chunk of an entry's body: its position, byte offset, length and hash."""

    position: int
    offset: int
    length: int
    hash: str


class StoredFields(Protocol):
    """The stored columns of an entry that :func:`check_entry` re-hashes: an ``Entry`` row,
    a row of ``journal_verify``'s stream or recovery's ``StoredEntry`` all have them."""

    @property
    def seq(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def tool_call_id(self) -> str: ...
    @property
    def tool_name(self) -> str: ...
    @property
    def derived(self) -> bool: ...
    @property
    def is_error(self) -> bool | None: ...
    @property
    def body(self) -> str: ...
    @property
    def body_hash(self) -> str: ...
    @property
    def byte_length(self) -> int: ...
    @property
    def meta(self) -> str: ...
    @property
    def meta_hash(self) -> str: ...
    @property
    def parent_hash(self) -> str: ...
    @property
    def entry_hash(self) -> str: ...


def check_entry(
    stored: StoredFields,
    *,
    scope: Mapping[str, str],
    chunks: Sequence[StoredChunk],
    expected_parent: str | None,
    chunk_bytes: int,
) -> list[str]:
    """Recompute every hash of one stored entry and list what does not match.

    The one entry check: ``Entry.hash_problems`` (the "hash verified" badge,
    ``journal_app.services.entry_check``), ``journal_verify`` and recovery's verified read
    (``recovery_app.snapshot.verify_read``) all call it.

    Args:
        stored: the entry's stored columns (:class:`StoredFields`).
        scope: ``tenant``, ``session``, ``lane``, ``branch`` the entry header is hashed under.
        chunks: the entry's stored chunks, in order.
        expected_parent: the previous entry's stored ``entry_hash`` (``""`` for seq 1), or
            ``None`` to skip the chain check (a single-entry badge).
        chunk_bytes: the journal's chunk size.

    Returns:
        Problems as short sentences naming the field (``"body_hash: stored ..., recomputed
        ..."``); empty when everything matches.
    """
    problems: list[str] = []
    raw = stored.body.encode("utf-8", errors="surrogatepass")
    recomputed_body = body_hash(raw)
    if recomputed_body != stored.body_hash:
        problems.append(f"body_hash: stored {stored.body_hash}, recomputed {recomputed_body}")
    if len(raw) != stored.byte_length:
        problems.append(f"byte_length: stored {stored.byte_length}, recomputed {len(raw)}")
    recomputed_meta = hashlib.sha256(
        stored.meta.encode("utf-8", errors="surrogatepass")
    ).hexdigest()
    if recomputed_meta != stored.meta_hash:
        problems.append(f"meta_hash: stored {stored.meta_hash}, recomputed {recomputed_meta}")
    if expected_parent is not None and stored.parent_hash != expected_parent:
        problems.append(
            f"parent_hash: stored {stored.parent_hash}, previous entry is {expected_parent}"
        )
    recomputed_entry = header_hash(
        tenant=scope["tenant"],
        session=scope["session"],
        lane=scope["lane"],
        branch=scope["branch"],
        seq=stored.seq,
        kind=stored.kind,
        role=stored.role,
        tool_call_id=stored.tool_call_id,
        body_hash=recomputed_body,
        byte_length=len(raw),
        parent_hash=stored.parent_hash,
        meta_hash=recomputed_meta,
        derived=stored.derived,
        tool_name=stored.tool_name,
    )
    if recomputed_entry != stored.entry_hash:
        problems.append(f"entry_hash: stored {stored.entry_hash}, recomputed {recomputed_entry}")
    if stored.is_error is not None and stored.kind == "tool_result":
        try:
            shown = bool(json.loads(stored.body).get("is_error"))
        except (ValueError, AttributeError):
            shown = None
        if shown is not None and shown != stored.is_error:
            problems.append(f"is_error: stored {stored.is_error}, the body says {shown}")
    expected_chunks = chunk(raw, chunk_bytes)
    if len(expected_chunks) != len(chunks):
        problems.append(f"chunks: stored {len(chunks)}, recomputed {len(expected_chunks)}")
    for want, got in zip(expected_chunks, chunks, strict=False):
        if (want.position, want.offset, want.length, want.hash) != (
            got.position,
            got.offset,
            got.length,
            got.hash,
        ):
            problems.append(
                f"chunk {got.position}: stored offset {got.offset} length {got.length} "
                f"hash {got.hash}, recomputed offset {want.offset} length {want.length} hash {want.hash}"
            )
    return problems
