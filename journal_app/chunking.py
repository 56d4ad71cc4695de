"""Fixed-size chunking of entry bodies (docs/design.md section 4, "Chunks").

Pure module. A body is cut every ``size`` bytes (4 KiB by default), moving a cut back to
the start of a UTF-8 sequence when it would fall inside one, so every chunk decodes on its
own. Each chunk records position (0-based), byte offset, byte length and sha256.
"""

from __future__ import annotations

from dataclasses import dataclass

from journal_app.hashing import chunk_hash

DEFAULT_CHUNK_BYTES = 4096


@dataclass(frozen=True)
class ChunkSpec:
    """One chunk of a body: ``position`` (0-based), ``offset`` and ``length`` in bytes."""

    position: int
    offset: int
    length: int
    hash: str


def _is_continuation(byte: int) -> bool:
    return byte & 0b1100_0000 == 0b1000_0000


def chunk_bounds(body: bytes, size: int = DEFAULT_CHUNK_BYTES) -> list[tuple[int, int]]:
    """Return ``[(offset, length), ...]`` covering ``body`` with cuts at UTF-8 boundaries.

    Args:
        body: the canonical body bytes.
        size: target chunk size in bytes (at least 4, so a UTF-8 sequence always fits).

    Raises:
        ValueError: ``size`` is below 4.
    """
    if size < 4:
        raise ValueError("chunk size must be at least 4 bytes")
    bounds: list[tuple[int, int]] = []
    start, n = 0, len(body)
    while start < n:
        end = min(start + size, n)
        while end < n and _is_continuation(body[end]):
            end -= 1
        bounds.append((start, end - start))
        start = end
    if not bounds:
        bounds.append((0, 0))
    return bounds


def chunk(body: bytes, size: int = DEFAULT_CHUNK_BYTES) -> list[ChunkSpec]:
    """Split ``body`` into :class:`ChunkSpec` items with their hashes (see :func:`chunk_bounds`)."""
    return [
        ChunkSpec(position=i, offset=off, length=ln, hash=chunk_hash(body[off : off + ln]))
        for i, (off, ln) in enumerate(chunk_bounds(body, size))
    ]
