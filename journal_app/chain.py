"""Building a journal's hash chain and each entry's figures hash (docs/design.md section 4). Pure.

:func:`prepare_entries` turns parsed items into rows ready to insert: canonical body,
``body_hash``, ``byte_length``, metadata hash, ``parent_hash`` and ``entry_hash``, chunks and
token counts. :func:`journal_app.chain_check.check_entry` recomputes all of it from stored
values and lists every mismatch, which is what ``journal_verify`` and the "hash verified"
badge rely on.

The figures derived at append (``token_count``, ``token_source``, ``source_ref`` and the
artifact an oversized result was moved to, with its size and token figures) are not part
of the entry header: they depend on the tokenizer and the artifact threshold, not on what
was said. :func:`figures_hash` binds them to the entry instead, and
:func:`check_figures` recomputes it, so a change to any of them is reported at its entry
without recounting tokens.

What an item must be to become an entry is :mod:`journal_app.entry_validation`; the hash
chains of stored records (folds, the audit log) are :mod:`journal_app.record_chain`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from journal_app.chunking import ChunkSpec, chunk
from journal_app.content import content_text
from journal_app.entry_validation import EntryInvalid, validate_item
from journal_app.formats.base import ParsedEntry
from journal_app.hashing import (
    CanonicalisationError,
    body_hash,
    canonical_record,
    header_hash,
)
from journal_app.tokens import count_tokens, source_label


@dataclass
class PreparedEntry:
    """A row-to-be. ``body`` and ``meta`` are canonical JSON text (UTF-8 when encoded)."""

    seq: int
    kind: str
    role: str
    tool_call_id: str
    tool_name: str
    derived: bool
    is_error: bool
    body: str
    body_hash: str
    byte_length: int
    meta: str
    meta_hash: str
    parent_hash: str
    entry_hash: str
    token_count: int
    token_source: str
    source_ref: str
    text: str
    chunks: list[ChunkSpec] = field(default_factory=list)


def _meta_of(item: ParsedEntry) -> dict[str, Any]:
    meta = dict(item.metadata)
    if item.usage is not None:
        meta["usage"] = item.usage
    if item.source_ref:
        meta["source_ref"] = item.source_ref
    return meta


def prepare_entries(
    *,
    scope: Mapping[str, str],
    start_seq: int,
    parent_hash: str,
    items: Iterable[ParsedEntry],
    chunk_bytes: int,
    encoding: str = "o200k_base",
) -> list[PreparedEntry]:
    """Hash and chunk ``items`` as the continuation of a chain.

    Args:
        scope: ``{"tenant", "session", "lane", "branch"}`` strings.
        start_seq: the ``seq`` of the first item (head + 1).
        parent_hash: the head's ``entry_hash`` (``""`` for an empty journal).
        items: parsed entries in order.
        chunk_bytes: chunk size in bytes (docs/design.md section 4: 4 KiB by default).
        encoding: tiktoken encoding for ``token_count`` (an item's ``token_figure``, a
            provider-reported figure, is stored instead when it has one).

    Returns:
        Prepared rows, seq ``start_seq, start_seq+1, ...``, each chained to the previous.

    Raises:
        EntryInvalid: unknown kind or role, missing text or call id, content that has no
            RFC 8785 form (lone surrogates, NaN). Raised before anything is returned.
    """
    out: list[PreparedEntry] = []
    parent = parent_hash
    for index, item in enumerate(items):
        validate_item(index, item)
        try:
            body_bytes = canonical_record(item.content)
        except CanonicalisationError as exc:
            raise EntryInvalid(
                index, "content", f"cannot be canonical JSON: {exc}", item.source_ref
            ) from None
        meta = _meta_of(item)
        try:
            meta_bytes = canonical_record(meta)
        except CanonicalisationError as exc:
            raise EntryInvalid(
                index, "metadata", f"cannot be canonical JSON: {exc}", item.source_ref
            ) from None
        seq = start_seq + index
        b_hash = body_hash(body_bytes)
        m_hash = hashlib.sha256(meta_bytes).hexdigest()
        e_hash = header_hash(
            tenant=scope["tenant"],
            session=scope["session"],
            lane=scope["lane"],
            branch=scope["branch"],
            seq=seq,
            kind=item.kind,
            role=item.role,
            tool_call_id=item.tool_call_id,
            body_hash=b_hash,
            byte_length=len(body_bytes),
            parent_hash=parent,
            meta_hash=m_hash,
            derived=item.derived,
            tool_name=item.tool_name,
        )
        text = content_text(item.kind, item.content)
        out.append(
            PreparedEntry(
                seq=seq,
                kind=item.kind,
                role=item.role,
                tool_call_id=item.tool_call_id,
                tool_name=item.tool_name,
                derived=item.derived,
                is_error=bool(item.content.get("is_error"))
                if item.kind == "tool_result"
                else False,
                body=body_bytes.decode("utf-8"),
                body_hash=b_hash,
                byte_length=len(body_bytes),
                meta=meta_bytes.decode("utf-8"),
                meta_hash=m_hash,
                parent_hash=parent,
                entry_hash=e_hash,
                token_count=item.token_figure[0]
                if item.token_figure
                else count_tokens(text, encoding),
                token_source=item.token_figure[1] if item.token_figure else source_label(encoding),
                source_ref=item.source_ref[:100],
                text=text,
                chunks=chunk(body_bytes, chunk_bytes),
            )
        )
        parent = e_hash
    return out


@dataclass(frozen=True)
class ArtifactFigures:
    """What an entry's figures hash records about its artifact (``None``: no artifact)."""

    content_hash: str
    byte_size: int
    token_count: int
    token_source: str


def figures_hash(
    *,
    entry_hash: str,
    token_count: int,
    token_source: str,
    source_ref: str,
    artifact: ArtifactFigures | None,
) -> str:
    """sha256 hex of the figures derived for one entry, bound to its ``entry_hash``.

    Args:
        entry_hash: the entry's hash (hex): the figures of one entry never verify another.
        token_count, token_source: the entry's token figure and where it came from.
        source_ref: the source position (``line 12``) the entry was imported from.
        artifact: the artifact the entry's output was moved to (content hash, byte size,
            token figures), or ``None``.

    Returns:
        sha256 hex over the RFC 8785 form of those values (``Entry.figures_hash``).
    """
    fast = _figures_text(entry_hash, token_count, token_source, source_ref, artifact)
    if fast is not None:
        try:
            return hashlib.sha256(fast.encode("utf-8")).hexdigest()
        except UnicodeEncodeError:
            pass  # a lone surrogate: the general encoder names the error
    record: dict[str, Any] = {
        "entry_hash": entry_hash,
        "token_count": token_count,
        "token_source": token_source,
        "source_ref": source_ref,
        "artifact": None
        if artifact is None
        else {
            "content_hash": artifact.content_hash,
            "byte_size": artifact.byte_size,
            "token_count": artifact.token_count,
            "token_source": artifact.token_source,
        },
    }
    return hashlib.sha256(canonical_record(record)).hexdigest()


_MAX_INT = 2**53 - 1  # the largest integer RFC 8785 writes exactly


def _figures_text(
    entry_hash: str,
    token_count: int,
    token_source: str,
    source_ref: str,
    artifact: ArtifactFigures | None,
) -> str | None:
    """The figures record's RFC 8785 text written directly (keys in sorted order, strings
    through the JSON string encoder :func:`canonical_record` uses), or ``None`` when a value
    is not of the plain type it must be (then the general encoder decides). Every append and
    every verify hashes one figures record per entry."""
    ints = (
        [token_count]
        if artifact is None
        else [token_count, artifact.byte_size, artifact.token_count]
    )
    strs = [entry_hash, token_source, source_ref]
    if artifact is not None:
        strs += [artifact.content_hash, artifact.token_source]
    if not all(type(i) is int and -_MAX_INT <= i <= _MAX_INT for i in ints) or not all(
        type(v) is str for v in strs
    ):
        return None
    enc = json.encoder.encode_basestring
    art = (
        "null"
        if artifact is None
        else (
            f'{{"byte_size":{artifact.byte_size},"content_hash":{enc(artifact.content_hash)},'
            f'"token_count":{artifact.token_count},"token_source":{enc(artifact.token_source)}}}'
        )
    )
    return (
        f'{{"artifact":{art},"entry_hash":{enc(entry_hash)},"source_ref":{enc(source_ref)},'
        f'"token_count":{token_count},"token_source":{enc(token_source)}}}'
    )


def check_figures(
    *,
    entry_hash: str,
    token_count: int,
    token_source: str,
    source_ref: str,
    artifact: ArtifactFigures | None,
    figures_hash_stored: str,
) -> list[str]:
    """Recompute :func:`figures_hash` from stored values; ``[]`` when it matches.

    Returns:
        One problem naming the figures (``"figures_hash: stored ..., recomputed ..."``).
    """
    recomputed = figures_hash(
        entry_hash=entry_hash,
        token_count=token_count,
        token_source=token_source,
        source_ref=source_ref,
        artifact=artifact,
    )
    if recomputed == figures_hash_stored:
        return []
    return [
        f"figures_hash: stored {figures_hash_stored or '(none)'}, recomputed {recomputed} from "
        f"token_count {token_count}, token_source {token_source!r}, source_ref {source_ref!r}"
        + (
            f", artifact tokens {artifact.token_count} ({artifact.token_source})"
            if artifact is not None
            else ""
        )
    ]
