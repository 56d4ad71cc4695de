"""API operations of the journal (docs/design.md section 4): append, import, entries, artifacts.

Thin: each operation resolves the scope through ``request.auth`` (:mod:`journal_app.auth`:
the key's tenant, ``Http404`` outside it) and calls the journal's services. Scopes are
``/sessions/{session}/{lane}/{branch}``; errors are mapped once, in ``config/api.py``.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

from django.db import InterfaceError, OperationalError, transaction
from django.http import Http404, HttpRequest
from ninja import File, Form, Query, Router, UploadedFile
from ninja import Path as PathParam
from ninja.errors import ValidationError
from pydantic import Field

from journal_app.formats import FORMATS, ParsedEntry
from journal_app.hashing import display, strip_prefix
from journal_app.hooks import transcript_import_service
from journal_app.models import Artifact, Entry, Journal, Session
from journal_app.privacy import filter_entry, filter_text
from journal_app.schemas import (
    ERRORS,
    MAX_SEQ,
    AppendIn,
    AppendOut,
    ArtifactContentOut,
    ArtifactOut,
    ArtifactReceiptOut,
    EntryDetailOut,
    EntryPageOut,
    HashPart,
    ImportOut,
    JournalOut,
    ScopePart,
    SessionOut,
    VerifyOut,
)
from journal_app.services import (
    artifact_read,
    entry_check,
    journal_append,
    journal_ensure,
    journal_verify,
    session_ensure,
)
from journal_app.services.imports import import_committed_lost

router = Router(tags=["journal"])


SCOPE = "/sessions/{session}/{lane}/{branch}"
#: Formats a single uploaded file can hold (an OpenCode export is a folder).
UploadFormat = Literal[tuple(n for n in FORMATS if n != "opencode-export")]  # type: ignore[valid-type]
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def journal_out(journal: Journal) -> dict[str, Any]:
    """A journal as :class:`~journal_app.schemas.JournalOut` data."""
    return {
        "session": journal.session.key,
        "lane": journal.lane,
        "branch": journal.branch,
        "head_seq": journal.head_seq,
        "head_hash": display(journal.head_hash) if journal.head_hash else None,
        "chunk_bytes": journal.chunk_bytes,
        "created_at": journal.created_at,
    }


def _session_out(session: Session) -> dict[str, Any]:
    return {
        "key": session.key,
        "title": session.shown_title,
        "source_format": session.source_format,
        "source_name": session.source_name,
        "created_at": session.created_at,
        "journals": [journal_out(j) for j in session.journals.all()],
    }


def entry_out(entry: Entry) -> dict[str, Any]:
    """An entry as :class:`~journal_app.schemas.EntryOut` data (no body)."""
    journal = entry.journal
    artifact = entry.artifact
    return {
        "scope": {"session": journal.session.key, "lane": journal.lane, "branch": journal.branch},
        "seq": entry.seq,
        "kind": entry.kind,
        "role": entry.role,
        "tool_call_id": entry.tool_call_id,
        "tool_name": entry.tool_name,
        "derived": entry.derived,
        "is_error": entry.is_error,
        "entry_hash": display(entry.entry_hash),
        "body_hash": display(entry.body_hash),
        "meta_hash": display(entry.meta_hash),
        "parent_hash": display(entry.parent_hash) if entry.parent_hash else None,
        "byte_length": entry.byte_length,
        "token_count": entry.token_count,
        "token_source": entry.token_source,
        "artifact": artifact.reference if artifact is not None else None,
    }


class EntryFilteredOut(EntryDetailOut):
    """An entry as every client sees it: ``content``, ``text`` and ``metadata`` filtered by
    :mod:`journal_app.privacy` (secret values -> ``[filtered: <kind>]``, hidden reasoning ->
    ``[filtered: reasoning]``); ``filtered`` says whether anything was replaced and
    ``filter_labels`` why (``"secret: aws-secret-key"``, ``"reasoning"``). ``verification``
    is over the stored bytes. The stored bytes: ``GET /entries/{hash}/raw`` (tenant admins,
    audited)."""

    filtered: bool = Field(description="true when a secret or hidden reasoning was replaced")
    filter_labels: list[str] = Field(description='why: "secret: <kind>" or "reasoning"')


class ArtifactFilteredOut(ArtifactContentOut):
    """An artifact's content filtered like an entry's; ``hash_verified`` is over the stored
    bytes, before filtering."""

    filtered: bool
    filter_labels: list[str]


def entry_detail(entry: Entry) -> dict[str, Any]:
    """An entry with content, chunks and its hashes recomputed now (``entry_check``).

    ``content``, ``text`` and ``metadata`` are filtered (:func:`journal_app.privacy.filter_entry`);
    the verification is over the stored bytes (docs/design.md section 4).
    """
    problems = entry_check(entry, chain=True)
    shown = filter_entry(
        kind=entry.kind, content=entry.content, text=entry.text, metadata=entry.meta_dict
    )
    return {
        **entry_out(entry),
        "content": shown.content,
        "metadata": shown.metadata,
        "text": shown.text,
        "filtered": shown.filtered,
        "filter_labels": shown.labels,
        "chunks": [
            {
                "position": c.position,
                "offset": c.offset,
                "length": c.length,
                "hash": display(c.hash),
            }
            for c in entry.chunks.all()
        ],
        "artifact_receipt": entry.artifact.receipt() if entry.artifact is not None else None,
        "verification": {"ok": not problems, "problems": problems},
    }


def _entries(request: HttpRequest) -> Any:
    return Entry.objects.filter(journal__session__tenant=request.auth.tenant).select_related(
        "journal__session", "artifact__tenant"
    )


def _artifact(request: HttpRequest, content_hash: str) -> Artifact:
    artifact = (
        Artifact.objects.filter(tenant=request.auth.tenant, content_hash=strip_prefix(content_hash))
        .select_related("tenant")
        .first()
    )
    if artifact is None:
        raise Http404("no such artifact")
    return artifact


@router.get("/sessions", response={200: list[SessionOut], **ERRORS}, summary="List sessions")
def session_list(
    request: HttpRequest,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> Any:
    """The key's tenant's sessions, newest first, each with its journals (scopes)."""
    sessions = (
        Session.objects.filter(tenant=request.auth.tenant)
        .select_related("tenant")
        .prefetch_related("journals__session")
        .order_by("-created_at", "pk")[offset : offset + limit]
    )
    return [_session_out(s) for s in sessions]


@router.get("/sessions/{session}", response={200: SessionOut, **ERRORS}, summary="Read a session")
def session_read(request: HttpRequest, session: ScopePart) -> Any:
    """One session of the key's tenant with its journals; 404 when the tenant has none."""
    return _session_out(request.auth.session(session))


@router.get(SCOPE, response={200: JournalOut, **ERRORS}, summary="Read a journal")
def journal_read(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart
) -> Any:
    """The journal of one scope and its head (revision)."""
    return journal_out(request.auth.journal(session, lane, branch))


@router.post(SCOPE + "/entries", response={200: AppendOut, **ERRORS}, summary="Append entries")
def entries_append(
    request: HttpRequest,
    payload: AppendIn,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
) -> Any:
    """Append a batch of entries at ``start_seq`` in one transaction (docs/design.md section 4).

    The session and journal are created on first use. Idempotent: entries at seqs the
    journal already holds must hash identically (counted ``unchanged``); a different hash
    at an existing seq is ``409 conflict`` and a ``start_seq`` past head + 1 is ``409 gap``;
    either way, and on any invalid entry (``422 invalid_entry``), nothing is written.
    """
    items = [
        ParsedEntry(
            kind=e.kind,
            role=e.role,
            content=e.content,
            tool_call_id=e.tool_call_id,
            tool_name=e.tool_name,
            derived=e.derived,
            metadata=e.metadata,
            usage=e.usage,
        )
        for e in payload.entries
    ]
    with transaction.atomic():
        s = session_ensure(tenant=request.auth.tenant, key=session, source_format="api")
        journal = journal_ensure(session=s, lane=lane, branch=branch)
        result = journal_append(journal=journal, items=items, start_seq=payload.start_seq)
    return {
        "appended": result.appended,
        "unchanged": result.unchanged,
        "head_seq": journal.head_seq,
        "head_hash": display(journal.head_hash) if journal.head_hash else None,
        "entries": [{"seq": e.seq, "entry_hash": display(e.entry_hash)} for e in result.entries],
    }


def _refuse_unknown_fields(request: HttpRequest, form: set[str], files: set[str]) -> None:
    errors = [
        {"type": "extra_forbidden", "loc": ("form", name), "msg": "unknown field"}
        for name in sorted(set(request.POST) - form)
    ] + [
        {"type": "extra_forbidden", "loc": ("file", name), "msg": "unknown field"}
        for name in sorted(set(request.FILES) - files)
    ]
    if errors:
        raise ValidationError(errors)


@router.post(
    SCOPE + "/import",
    response={200: ImportOut, **ERRORS},
    summary="Import a transcript",
    # the form takes ``file`` and ``format`` only (_refuse_unknown_fields): say so
    openapi_extra={
        "requestBody": {
            "content": {"multipart/form-data": {"schema": {"additionalProperties": False}}}
        }
    },
)
def journal_import_upload(
    request: HttpRequest,
    file: File[UploadedFile],
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    format: Form[UploadFormat | None] = None,  # noqa: A002 (the field's public name)
) -> Any:
    """Import one transcript file (multipart field ``file``) into this scope, in one transaction.

    ``format`` names the importer, or is omitted to detect it. A malformed transcript is
    ``422 invalid_transcript`` naming the file, line or index and field; a transcript that
    differs from what the scope holds is ``409 conflict``; nothing is written in either case.
    Importing the same file again changes nothing. A ledgerkeep export brings its ledger
    too (folds with manifests, deltas and verdicts, retirements and decisions, comments,
    annotations, receipts), re-verified, into any session: the same service as the
    ``import_journal`` command (:mod:`journal_app.hooks`); ``ledger`` says what came back.
    """
    _refuse_unknown_fields(request, {"format"}, {"file"})
    name = _UNSAFE.sub("-", Path(file.name or "").name).strip(".-")[:120] or "transcript.json"
    with tempfile.TemporaryDirectory(prefix="ledgerkeep-import-") as folder:
        path = Path(folder) / name
        with path.open("wb") as fh:
            for part in file.chunks():
                fh.write(part)
        options = {
            "path": path,
            "fmt": format,
            "tenant": request.auth.tenant.slug,
            "session": session,
            "lane": lane,
            "branch": branch,
        }
        done = transcript_import_service()(**options)
        result, ledgers = done.imported, done.ledgers
    try:  # committed: a connection lost from here on must not answer "nothing was written"
        return {
            "journal": journal_out(result.journal),
            "format": result.parsed.format,
            "appended": result.append.appended,
            "unchanged": result.append.unchanged,
            "counts": result.counts,
            "ledger": [
                {"journal": j.scope_label, **ledgers[j.pk].to_dict()}
                for j in result.journals
                if j.pk in ledgers
            ],
        }
    except (OperationalError, InterfaceError) as exc:
        scope = f"{request.auth.tenant.slug}/{session}/{lane}/{branch}"
        raise import_committed_lost(result=result, name=name, scope=scope, exc=exc) from exc


@router.get(SCOPE + "/entries", response={200: EntryPageOut, **ERRORS}, summary="List entries")
def entry_list(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ, description="entries with seq > after")] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Any:
    """Entries of the scope in seq order, without bodies (read one for content and chunks)."""
    journal = request.auth.journal(session, lane, branch)
    rows = list(
        Entry.objects.filter(journal=journal, seq__gt=after)
        .select_related("journal__session", "artifact__tenant")
        .defer("body", "meta")
        .order_by("seq")[: limit + 1]
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "entries": [entry_out(e) for e in rows],
        "next_after": rows[-1].seq if more else None,
    }


@router.get(
    SCOPE + "/entries/{seq}",
    response={200: EntryFilteredOut, **ERRORS},
    summary="Read an entry (filtered)",
)
def entry_read(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    seq: Annotated[int, PathParam(ge=1, le=MAX_SEQ)],
) -> Any:
    """One entry by seq: content, metadata, chunks, artifact receipt, hashes recomputed now;
    secrets and hidden reasoning filtered (``filtered``, ``filter_labels``)."""
    journal = request.auth.journal(session, lane, branch)
    entry = _entries(request).filter(journal=journal, seq=seq).first()
    if entry is None:
        raise Http404(f"no entry at seq {seq}")
    return entry_detail(entry)


@router.get(
    "/entries/{entry_hash}",
    response={200: EntryFilteredOut, **ERRORS},
    summary="Read an entry by hash (filtered)",
)
def entry_by_hash(request: HttpRequest, entry_hash: HashPart) -> Any:
    """The entry a support hash names (``sha256:<hex>`` or hex), in the key's tenant only;
    filtered like every entry read (the stored bytes: ``GET /entries/{hash}/raw``)."""
    entry = _entries(request).filter(entry_hash=strip_prefix(entry_hash)).first()
    if entry is None:
        raise Http404("no such entry")
    return entry_detail(entry)


@router.get(SCOPE + "/verify", response={200: VerifyOut, **ERRORS}, summary="Verify a journal")
def journal_verify_read(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart
) -> Any:
    """Recompute every entry, body and chunk hash, the parent chain and every artifact hash."""
    report = journal_verify(journals=[request.auth.journal(session, lane, branch)])
    return {
        "ok": report.ok,
        "entries": report.entries,
        "chunks": report.chunks,
        "bytes": report.bytes,
        "first_failure": report.first_failure,
    }


@router.get(
    SCOPE + "/artifacts",
    response={200: list[ArtifactReceiptOut], **ERRORS},
    summary="List artifact receipts",
)
def artifact_list(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart
) -> Any:
    """Receipts of the artifacts this scope's entries refer to, in first-use order."""
    journal = request.auth.journal(session, lane, branch)
    seen: dict[int, Artifact] = {}
    for entry in (
        Entry.objects.filter(journal=journal, artifact__isnull=False)
        .select_related("artifact__tenant")
        .only("seq", "artifact")
        .order_by("seq")
    ):
        seen.setdefault(entry.artifact_id, entry.artifact)
    return [a.receipt() for a in seen.values()]


@router.get(
    "/artifacts/{content_hash}", response={200: ArtifactOut, **ERRORS}, summary="Read a receipt"
)
def artifact_receipt(request: HttpRequest, content_hash: HashPart) -> Any:
    """An artifact's receipt and the entries that refer to it."""
    artifact = _artifact(request, content_hash)
    hashes = (
        Entry.objects.filter(artifact=artifact).order_by("pk").values_list("entry_hash", flat=True)
    )
    return {
        "receipt": artifact.receipt(),
        "created_at": artifact.created_at,
        "entries": [display(h) for h in hashes],
    }


@router.get(
    "/artifacts/{content_hash}/content",
    response={200: ArtifactFilteredOut, **ERRORS},
    summary="Read an artifact's content (filtered)",
)
def artifact_content(request: HttpRequest, content_hash: HashPart) -> Any:
    """The stored content, with its sha256 recomputed on read (``hash_verified``), shown with
    secrets and hidden reasoning filtered (``filtered``, ``filter_labels``).

    Stored bytes that are missing read as empty content with ``hash_verified: false``.
    """
    artifact = _artifact(request, content_hash)
    try:
        text, ok = artifact_read(artifact=artifact)
    except OSError:
        text, ok = "", False
    shown = filter_text(text, kind="tool_result")
    return {
        "reference": artifact.reference,
        "content_hash": display(artifact.content_hash),
        "hash_verified": ok,
        "content": shown.text,
        "filtered": shown.filtered,
        "filter_labels": shown.labels,
    }
