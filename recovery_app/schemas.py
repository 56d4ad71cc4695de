"""API schemas of recovery's agent tools (docs/design.md section 7). Hashes read ``sha256:<hex>``."""

from __future__ import annotations

from dataclasses import MISSING
from dataclasses import fields as dataclass_fields
from typing import Any, get_type_hints

from ninja import Schema
from pydantic import ConfigDict, Field, create_model

from recovery_app.services.tools import ReadResult


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


def _schema_of(source: type, name: str, doc: str, **overrides: Any) -> type[Schema]:
    """A ninja schema with the fields of dataclass ``source``: same names, order, types and
    defaults, so the answer's shape has one definition; ``overrides`` maps a field name to
    its ``(type, default or FieldInfo)`` where the schema says more (a nested schema, a
    description)."""
    hints = get_type_hints(source)
    fields: dict[str, Any] = {
        f.name: overrides.get(f.name, (hints[f.name], ... if f.default is MISSING else f.default))
        for f in dataclass_fields(source)
    }
    model: type[Schema] = create_model(name, __base__=Schema, __doc__=doc, **fields)
    return model


#: An entry re-read in full (:class:`recovery_app.services.ReadResult`, field for field).
ReadOut = _schema_of(
    ReadResult,
    "ReadOut",
    "An entry re-read in full: every check, and the filtered content when all pass.",
    chunks=(list[ChunkOut], ...),
    range=(
        list[int] | None,
        Field(None, description="[start, end) in characters of the entry's text, when asked for"),
    ),
    range_sha256=(
        str | None,
        Field(None, description="sha256 of the range's UTF-8 bytes before filtering"),
    ),
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
