"""API schemas of the journal, and the one error shape every API operation answers with.

docs/design.md sections 3, 4 and 9. Input schemas are strict (no type coercion: ``"1"`` is not
an integer, ``"yes"`` is not a boolean) and forbid unknown fields, so a typo in a field
name is an error, not a silently ignored value. Hashes are written ``sha256:<hex>``.

The server accepts exactly what the OpenAPI document says. The document
is JSON Schema 2020-12, where a number with a zero fractional part *is* an integer
(``5668.0`` validates against ``{"type": "integer"}``; no keyword can tell it from ``5668``),
so an integer field takes ``5668.0`` as ``5668`` and refuses ``5668.5``, ``"5668"`` and
``true``, as the schema does.
"""

from __future__ import annotations

import types
from datetime import datetime
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from ninja import Path, Schema
from ninja.schema import DjangoGetter
from pydantic import ConfigDict, Field, field_validator, model_validator

from journal_app.formats.base import KINDS, ROLES

#: What the ``{session}``, ``{lane}`` and ``{branch}`` path segments may hold (the journal's
#: own rule for scope names, :func:`journal_app.services.session_ensure`).
SCOPE_PART = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
#: ``sha256:<64 hex>`` or bare 64 hex digits.
HASH = r"^(sha256:)?[0-9a-fA-F]{64}$"
#: A string without NUL (PostgreSQL text cannot hold U+0000).
NO_NUL = r"^[^\x00]*$"
#: Largest ``seq`` a journal can hold (PositiveBigIntegerField).
MAX_SEQ = 2**63 - 1
#: Most entries one append batch may carry.
MAX_BATCH = 1000

#: Path parameters: a scope name, and an entry or content hash.
ScopePart = Annotated[str, Path(pattern=SCOPE_PART)]
HashPart = Annotated[str, Path(pattern=HASH)]

Kind = Literal["message", "tool_call", "tool_result", "reasoning", "event"]
Role = Literal["system", "developer", "user", "assistant", "tool", "runtime"]
assert set(Kind.__args__) == set(KINDS) and set(Role.__args__) == set(ROLES)  # type: ignore[attr-defined]


class ErrorOut(Schema):
    """The one error shape of the API (STYLE.md point 3; ``config/api.py`` maps every error).

    Attributes:
        code: a stable machine-readable name (``conflict``, ``invalid_entry``, ...).
        message: one sentence saying what is wrong (which file, entry, field).
        field: the offending field's path (``entries[2].content.text``), or ``null``.
        entry: which entry (``entries[2]``, ``seq 7``, ``line 12``), or ``null``.
    """

    code: str
    message: str
    field: str | None = None
    entry: str | None = None


#: Error responses every operation documents (and the only non-2xx statuses it returns):
#: the statuses of ``config/api.py``'s table. 405 is a wrong method on an existing path; 414
#: a URL over ``API_MAX_URL_BYTES``; 429 a key over ``API_RATE_LIMIT``; 503 a fold whose
#: model could not be reached (``model_unavailable``) or a dropped database connection; 507
#: a full artifact store (``artifact_store_full``).
ERROR_STATUSES = frozenset({400, 401, 403, 404, 405, 409, 413, 414, 422, 429, 503, 507})
ERRORS: dict[Any, Any] = {ERROR_STATUSES: ErrorOut}


def _is_int(annotation: Any) -> bool:
    if annotation is int:
        return True
    return get_origin(annotation) in (Union, types.UnionType) and int in get_args(annotation)


class StrictIn(Schema):
    """Base of request bodies: unknown fields and type coercion are refused.

    One exception, so that the server refuses only what the schema refuses: an integer field
    given an integral JSON number (``5668.0``, ``1e3``) takes its integer value (see the
    module docstring); ``5668.5``, ``"5668"`` and ``true`` stay refused.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data: Any) -> Any:
        # ninja's Schema hands the fields over wrapped in a DjangoGetter (its own wrap
        # validator runs first): convert the dict inside it
        raw = data._obj if isinstance(data, DjangoGetter) else data
        if not isinstance(raw, dict):
            return data
        ints = {f.alias or name for name, f in cls.model_fields.items() if _is_int(f.annotation)}
        converted = {
            k: int(v) if k in ints and type(v) is float and v.is_integer() else v
            for k, v in raw.items()
        }
        if isinstance(data, DjangoGetter):
            data._obj = converted
            return data
        return converted


class EntryIn(StrictIn):
    """One entry to append, in the shape the importers produce (``journal_app.formats.base``).

    ``content`` by kind: message ``{"text": str}``; tool_call ``{"name": str, "arguments":
    any}``; tool_result ``{"output": str, "is_error": bool, "exit_code"?: int}``; reasoning
    ``{"text": str}``; event ``{"type": str, ...}``. ``metadata`` holds source fields the
    journal does not model; ``usage`` provider-reported token usage. Both are hashed with the
    entry.

    ``metadata.pending`` (boolean, tool_call entries): the runtime declares the call pending,
    legitimately waiting for its result (an approval, a long job). The context then says
    "pending since seq N" instead of "did not complete", and the result, when it arrives,
    closes the call's obligation.
    """

    kind: Kind
    role: Role
    content: dict[str, Any]
    # their length (at most 200 characters) is checked where every surface appends
    # (journal_app.chain), so the API refuses a longer one with the importers' error
    tool_call_id: str = Field("", pattern=NO_NUL)
    tool_name: str = Field("", pattern=NO_NUL)
    derived: bool = False
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        json_schema_extra={
            "properties": {
                "pending": {
                    "type": "boolean",
                    "description": "tool_call entries: the runtime declares the call pending "
                    "(waiting for an approval or a long job); the context says 'pending since "
                    "seq N', never 'did not complete', until its result arrives",
                }
            }
        },
    )
    usage: dict[str, Any] | None = None

    @field_validator("metadata")
    @classmethod
    def _pending_flag(cls, metadata: dict[str, Any]) -> dict[str, Any]:
        pending = metadata.get("pending")
        if pending is not None and not isinstance(pending, bool):
            raise ValueError("metadata.pending must be a boolean (true: the call is pending)")
        return metadata


class AppendIn(StrictIn):
    """An append batch: ``entries`` go at ``start_seq``, ``start_seq + 1``, ...

    ``start_seq`` is required so a retried batch is recognised: entries at seqs the journal
    already holds must hash identically (a no-op) or the whole batch is refused (409).
    """

    start_seq: int = Field(ge=1, le=MAX_SEQ)
    entries: list[EntryIn] = Field(min_length=1, max_length=MAX_BATCH)


class AppendedOut(Schema):
    seq: int
    entry_hash: str


class AppendOut(Schema):
    """What an append did: rows written, entries already present (no-ops), the new head."""

    appended: int
    unchanged: int
    head_seq: int
    head_hash: str | None
    entries: list[AppendedOut]


class ScopeOut(Schema):
    session: str
    lane: str
    branch: str


class JournalOut(Schema):
    """One journal (scope) and its head: ``head_seq`` is its current revision."""

    session: str
    lane: str
    branch: str
    head_seq: int
    head_hash: str | None
    chunk_bytes: int
    created_at: datetime


class SessionOut(Schema):
    key: str
    title: str
    source_format: str
    source_name: str
    created_at: datetime
    journals: list[JournalOut]


class ChunkOut(Schema):
    """A fixed-size slice of the body: position, byte offset, length (bytes), sha256."""

    position: int
    offset: int
    length: int
    hash: str


class VerificationOut(Schema):
    """The entry's hashes recomputed now: body, metadata, entry, chunks and parent link."""

    ok: bool
    problems: list[str]


class ArtifactReceiptOut(Schema):
    """An artifact receipt (docs/design.md section 4): what the context carries instead of content."""

    reference: str
    media_type: str
    original_size: dict[str, int]
    token_source: str
    preview: str
    content_hash: str
    source_tool: str


class EntryOut(Schema):
    """An entry without its body (lists)."""

    scope: ScopeOut
    seq: int
    kind: str
    role: str
    tool_call_id: str
    tool_name: str
    derived: bool
    is_error: bool
    entry_hash: str
    body_hash: str
    meta_hash: str
    parent_hash: str | None
    byte_length: int
    token_count: int
    token_source: str
    artifact: str | None


class EntryDetailOut(EntryOut):
    """An entry with its content, metadata, chunks, artifact receipt and verification."""

    content: dict[str, Any]
    metadata: dict[str, Any]
    text: str
    chunks: list[ChunkOut]
    artifact_receipt: ArtifactReceiptOut | None
    verification: VerificationOut


class EntryPageOut(Schema):
    """A page of entries in seq order; pass ``next_after`` as ``after`` for the next page."""

    entries: list[EntryOut]
    next_after: int | None


class LedgerReimportOut(Schema):
    """What the import of a ledgerkeep export re-created beside one journal."""

    journal: str = Field(description="the journal's scope, tenant/session/lane/branch")
    folds: int
    attempts: int
    retirements: int
    decisions: int
    comments: int
    annotations: int
    receipts: int
    unchanged: bool = Field(description="the exported ledger was already here: nothing written")
    skipped: list[str]


class ImportOut(Schema):
    """What an import did: the journal, the detected format, entry counts, the append outcome,
    and for a ledgerkeep export the ledger re-created per journal (else empty)."""

    journal: JournalOut
    format: str
    appended: int
    unchanged: int
    counts: dict[str, int]
    ledger: list[LedgerReimportOut]


class VerifyOut(Schema):
    """:func:`journal_app.services.journal_verify` over one journal."""

    ok: bool
    entries: int
    chunks: int
    bytes: int
    first_failure: dict[str, Any] | None


class ArtifactOut(Schema):
    receipt: ArtifactReceiptOut
    created_at: datetime
    entries: list[str]


class ArtifactContentOut(Schema):
    """The stored bytes of an artifact, decoded, with their hash recomputed on read."""

    reference: str
    content_hash: str
    hash_verified: bool
    content: str
