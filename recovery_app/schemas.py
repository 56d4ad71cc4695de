"""API schemas of recovery's agent tools (DESIGN.md section 7). Hashes read ``sha256:<hex>``."""

from __future__ import annotations

from typing import Any

from ninja import Schema
from pydantic import ConfigDict, Field


class SearchHitOut(Schema):
    """A lead: where to read. Not evidence until read and verified."""

    seq: int
    entry: str
    kind: str
    role: str
    tool_name: str
    snippet: str = Field(description="text around the first match, secrets and reasoning filtered")
    filtered: bool
    filter_labels: list[str]


class SearchOut(Schema):
    query: str = Field(description="the normalised query the cursor is signed for")
    revision: int = Field(description="the frozen revision every page of this query reads")
    hits: list[SearchHitOut]
    next_cursor: str | None = Field(
        description="HMAC-signed; refused when stale, changed, or used in another scope"
    )


class ChunkOut(Schema):
    position: int
    offset: int
    length: int
    hash: str


class ReadOut(Schema):
    """An entry re-read in full: every check, and the filtered content when all pass."""

    revision: int
    seq: int
    entry: str
    kind: str
    role: str
    tool_call_id: str
    tool_name: str
    verified: bool
    checks: dict[str, bool]
    reason: str
    content: dict[str, Any] | None
    text: str | None
    filtered: bool
    filter_labels: list[str]
    byte_length: int
    body_hash: str
    chunks: list[ChunkOut]
    range: list[int] | None = Field(
        None, description="[start, end) in characters of the entry's text, when asked for"
    )
    range_sha256: str | None = Field(
        None, description="sha256 of the range's UTF-8 bytes before filtering"
    )


class AnalystIn(Schema):
    model_config = ConfigDict(extra="forbid", strict=True)

    question: str = Field(min_length=1, max_length=2000, pattern=r"^[^\x00]*$")


class CitationOut(Schema):
    entry: str
    seq: int
    range: list[int] = Field(description="byte range [start, end) of the entry's canonical body")
    chunks: list[int]
    quote: str


class ClaimOut(Schema):
    claim: str
    status: str = Field(description="current (at the revision), historical, reported, unresolved")
    citations: list[CitationOut]


class RejectedClaimOut(Schema):
    claim: str
    status: str
    reason: str


class AnalystOut(Schema):
    receipt: int
    outcome: str
    reason: str
    revision: int
    claims: list[ClaimOut]
    rejected: list[RejectedClaimOut]
    queries: list[str]
    usage: dict[str, Any]
