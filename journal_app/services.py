"""Every state change of the journal (DESIGN.md section 4).

Services are keyword-only and never return HTTP responses. Each write runs in one
transaction: an import, an append batch either lands whole or leaves nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone
from django.utils.text import slugify

from journal_app.artifact_storage import ArtifactBytesError, artifact_bytes_put
from journal_app.artifacts import make_preview, media_type_of
from journal_app.chain import (
    ArtifactFigures,
    EntryInvalid,
    PreparedEntry,
    StoredChunk,
    check_entry,
    check_figures,
    figures_hash,
    prepare_entries,
)
from journal_app.errors import DomainError
from journal_app.formats import FormatError, ParsedEntry, ParsedSession, parse_path
from journal_app.hashing import CanonicalisationError, canonical_body, chunk_hash
from journal_app.identifiers import RULES_VERSION, identifiers_dump, identifiers_of
from journal_app.models import (
    Artifact,
    Chunk,
    Entry,
    EntryIdentifiers,
    Journal,
    Session,
    Tenant,
)
from journal_app.signals import entries_appended
from journal_app.tokens import count_tokens, source_label

Progress = Callable[[int, int], None]

__all__ = [
    "AppendResult",
    "ConflictError",
    "EntryInvalid",
    "FormatError",
    "GapError",
    "ImportResult",
    "JournalError",
    "VerifyReport",
    "artifact_store",
    "entry_check",
    "figures_check",
    "journal_append",
    "journal_ensure",
    "journal_import",
    "journal_verify",
    "session_ensure",
    "tenant_ensure",
]


class JournalError(DomainError):
    """Base of the journal's domain errors (mapped to HTTP once, in ``config/api.py``)."""

    status = 422
    code = "invalid_request"


class DatabaseUnavailable(JournalError):
    """The database connection was lost in the middle of a write; nothing written (HTTP 503).

    The transaction is rolled back by the server; the same request may succeed once the
    database answers again (issue 16: a dropped connection is a clear error, not a traceback).
    """

    status = 503
    code = "database_unavailable"


class ArtifactWriteError(JournalError):
    """An artifact's bytes could not be stored with their hash (HTTP 503); nothing written."""

    status = 503
    code = "artifact_write_failed"


@contextmanager
def _write_transaction(what: str) -> Iterator[None]:
    """``transaction.atomic()`` whose lost connection becomes :class:`DatabaseUnavailable`."""
    try:
        with transaction.atomic():
            yield
    except (OperationalError, InterfaceError) as exc:
        detail = (str(exc).strip().splitlines() or [""])[0]
        raise DatabaseUnavailable(
            f"the database connection was lost during {what}; nothing was written, "
            f"try again ({type(exc).__name__}: {detail})"
        ) from exc


class ConflictError(JournalError):
    """A different entry at an existing ``seq`` (HTTP 409). Nothing was written."""

    status = 409
    code = "conflict"

    def __init__(self, seq: int, stored_hash: str, new_hash: str) -> None:
        self.seq = seq
        self.stored_hash = stored_hash
        self.new_hash = new_hash
        super().__init__(
            f"seq {seq} already holds sha256:{stored_hash}; the new entry hashes to "
            f"sha256:{new_hash}: conflict, nothing written",
            entry=f"seq {seq}",
        )


class GapError(JournalError):
    """An append that would leave a gap in ``seq`` (seq is gapless per branch); HTTP 409."""

    status = 409
    code = "gap"

    def __init__(self, message: str) -> None:
        super().__init__(f"{message}; nothing written", field="start_seq")


BATCH = 500
_SCOPE_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _check_scope_part(name: str, value: str) -> str:
    if not _SCOPE_PART.match(value):
        raise JournalError(
            f"{name} {value!r} is not valid: use 1-100 letters, digits, '.', '_' or '-'"
        )
    return value


def tenant_ensure(*, slug: str, name: str = "") -> Tenant:
    """Return the tenant ``slug``, creating it (name defaults to the slug)."""
    _check_scope_part("tenant", slug)
    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": name or slug})
    return tenant


def session_ensure(
    *,
    tenant: Tenant,
    key: str,
    title: str = "",
    source_format: str = "",
    source_name: str = "",
    meta: dict[str, Any] | None = None,
) -> Session:
    """Return the session ``key`` of ``tenant``, creating it with the given descriptors."""
    _check_scope_part("session", key)
    session, created = Session.objects.get_or_create(
        tenant=tenant,
        key=key,
        defaults={
            "title": title[:300],
            "source_format": source_format,
            "source_name": source_name[:500],
            "meta": canonical_body(meta or {}).decode("utf-8"),
        },
    )
    return session


def journal_ensure(*, session: Session, lane: str = "main", branch: str = "main") -> Journal:
    """Return the journal of scope (session, lane, branch), creating it empty."""
    _check_scope_part("lane", lane)
    _check_scope_part("branch", branch)
    journal, _ = Journal.objects.get_or_create(
        session=session,
        lane=lane,
        branch=branch,
        defaults={"chunk_bytes": settings.JOURNAL_CHUNK_BYTES},
    )
    return journal


def artifact_store(
    *, tenant: Tenant, content: str, source_tool: str = "", media_type: str | None = None
) -> tuple[Artifact, bool]:
    """Store ``content`` once per tenant, content-addressed (DESIGN.md section 4).

    Returns:
        ``(artifact, created)``. Content whose sha256 already exists for the tenant returns
        the existing artifact and ``created=False`` (no A -> B -> C reload loop, seed 001).

    The bytes are written atomically and hash-checked (:mod:`journal_app.artifact_storage`):
    a file already at the content-addressed name counts only when its hash matches, else
    it is replaced, for a new artifact and an existing one alike.

    Raises:
        ArtifactWriteError: the bytes could not be stored with their hash.
    """
    data = content.encode("utf-8")
    digest = chunk_hash(data)
    existing = Artifact.objects.filter(tenant=tenant, content_hash=digest).first()
    name = existing.storage_name if existing is not None else f"artifacts/{tenant.slug}/{digest}"
    try:
        artifact_bytes_put(name=name, data=data, digest=digest)
    except ArtifactBytesError as exc:
        raise ArtifactWriteError(f"{exc}; nothing written") from exc
    if existing is not None:
        return existing, False
    mtype = media_type or media_type_of(content)
    artifact = Artifact(
        tenant=tenant,
        content_hash=digest,
        media_type=mtype,
        byte_size=len(data),
        token_count=count_tokens(content, settings.TOKEN_ENCODING),
        token_source=source_label(settings.TOKEN_ENCODING),
        preview=make_preview(content, mtype),
        source_tool=source_tool[:200],
        storage_name=name,
    )
    artifact.save()
    return artifact, True


def artifact_read(*, artifact: Artifact) -> tuple[str, bool]:
    """Read an artifact's content and recompute its hash: ``(text, hash_matches)``.

    Raises:
        OSError (``FileNotFoundError``): the stored bytes are gone from the storage.
    """
    with default_storage.open(artifact.storage_name, "rb") as fh:
        data = fh.read()
    return data.decode("utf-8", errors="replace"), chunk_hash(data) == artifact.content_hash


def artifact_check(artifact: Artifact) -> list[str]:
    """Recompute an artifact from its stored bytes: hash, byte size, media type, preview.

    Returns problems naming each field that does not match (empty when all match); a
    missing file is a problem too.
    """
    try:
        text, ok = artifact_read(artifact=artifact)
    except OSError as exc:
        return [f"artifact {artifact.reference}: stored bytes missing ({exc})"]
    if not ok:
        return [f"artifact {artifact.reference}: stored bytes do not match content_hash"]
    problems = []
    size = len(text.encode("utf-8"))
    if size != artifact.byte_size:
        problems.append(
            f"artifact {artifact.reference}: byte_size stored {artifact.byte_size}, recomputed {size}"
        )
    if media_type_of(text) != artifact.media_type:
        problems.append(f"artifact {artifact.reference}: media_type stored {artifact.media_type!r}")
    if make_preview(text, artifact.media_type) != artifact.preview:
        problems.append(f"artifact {artifact.reference}: preview differs from the content")
    return problems


@dataclass
class AppendResult:
    """Outcome of one append batch: entries written, entries already present (no-ops), head."""

    appended: int
    unchanged: int
    head_seq: int
    entries: list[Entry] = field(default_factory=list)


def _artifact_figures(artifact: Artifact | None) -> ArtifactFigures | None:
    if artifact is None:
        return None
    return ArtifactFigures(
        artifact.content_hash, artifact.byte_size, artifact.token_count, artifact.token_source
    )


def figures_check(entry: Entry) -> list[str]:
    """Recompute ``entry.figures_hash`` from its stored figures (and its artifact's).

    Returns:
        Problems naming ``figures_hash`` when a token figure, the token source, the source
        position or the artifact's figures changed since the append; empty otherwise.
    """
    return check_figures(
        entry_hash=entry.entry_hash,
        token_count=entry.token_count,
        token_source=entry.token_source,
        source_ref=entry.source_ref,
        artifact=_artifact_figures(entry.artifact),
        figures_hash_stored=entry.figures_hash,
    )


def _insert(
    journal: Journal,
    prepared: Sequence[PreparedEntry],
    progress: Progress | None,
    total: int,
    done0: int,
) -> list[Entry]:
    tenant = journal.session.tenant
    threshold = settings.ARTIFACT_THRESHOLD_TOKENS
    rows: list[Entry] = []
    done = done0
    for start in range(0, len(prepared), BATCH):
        batch = prepared[start : start + BATCH]
        entries = []
        for p in batch:
            artifact = None
            if p.kind == "tool_result" and p.token_count > threshold:
                artifact, _ = artifact_store(tenant=tenant, content=p.text, source_tool=p.tool_name)
            entries.append(
                Entry(
                    journal=journal,
                    seq=p.seq,
                    kind=p.kind,
                    role=p.role,
                    tool_call_id=p.tool_call_id[:200],
                    tool_name=p.tool_name[:200],
                    derived=p.derived,
                    is_error=p.is_error,
                    body=p.body,
                    body_hash=p.body_hash,
                    byte_length=p.byte_length,
                    meta=p.meta,
                    meta_hash=p.meta_hash,
                    parent_hash=p.parent_hash,
                    entry_hash=p.entry_hash,
                    token_count=p.token_count,
                    token_source=p.token_source,
                    artifact=artifact,
                    source_ref=p.source_ref,
                    figures_hash=figures_hash(
                        entry_hash=p.entry_hash,
                        token_count=p.token_count,
                        token_source=p.token_source,
                        source_ref=p.source_ref,
                        artifact=_artifact_figures(artifact),
                    ),
                )
            )
        created = Entry.objects.bulk_create(entries)
        chunks = [
            Chunk(entry=e, position=c.position, offset=c.offset, length=c.length, hash=c.hash)
            for e, p in zip(created, batch, strict=True)
            for c in p.chunks
        ]
        Chunk.objects.bulk_create(chunks, batch_size=BATCH)
        EntryIdentifiers.objects.bulk_create(
            [entry_identifiers_row(e, p.text) for e, p in zip(created, batch, strict=True)],
            batch_size=BATCH,
        )
        rows.extend(created)
        done += len(batch)
        if progress:
            progress(done, total)
    return rows


def entry_identifiers_row(entry: Entry, text: str | None = None) -> EntryIdentifiers:
    """The (unsaved) :class:`EntryIdentifiers` row of ``entry``: its identifiers extracted
    once from its immutable bytes (issue 18). ``text`` is the entry's readable text when the
    caller has it already (else it is derived from the body)."""
    content = entry.content if entry.kind == "tool_call" else {}
    found = identifiers_of(
        kind=entry.kind,
        text=entry.text if text is None else text,
        content=content,
        tool_call_id=entry.tool_call_id,
        derived=entry.derived,
    )
    return EntryIdentifiers(entry=entry, rules=RULES_VERSION, values=identifiers_dump(found))


def _check_pairing(journal: Journal, head: int, start: int, fresh: Sequence[PreparedEntry]) -> None:
    """Refuse a new tool result whose call is not earlier in the journal, or a second result.

    The same rule importers apply (:func:`journal_app.formats.base.check_pairing`), for
    entries appended one batch at a time; a call without its result is allowed (interrupted).
    """
    ids = {p.tool_call_id for p in fresh if p.kind in ("tool_call", "tool_result")}
    if not ids:
        return
    stored = Entry.objects.filter(journal=journal, seq__lte=head, tool_call_id__in=ids)
    calls = set(stored.filter(kind="tool_call").values_list("tool_call_id", flat=True))
    results = set(stored.filter(kind="tool_result").values_list("tool_call_id", flat=True))
    for p in fresh:
        if p.kind == "tool_call":
            calls.add(p.tool_call_id)
        elif p.kind == "tool_result":
            index = p.seq - start
            if p.tool_call_id not in calls:
                raise EntryInvalid(
                    index,
                    "tool_call_id",
                    f"tool result for {p.tool_call_id!r} has no matching tool call before it",
                    p.source_ref,
                )
            if p.tool_call_id in results:
                raise EntryInvalid(
                    index,
                    "tool_call_id",
                    f"second tool result for {p.tool_call_id!r}",
                    p.source_ref,
                )
            results.add(p.tool_call_id)


def journal_append(
    *,
    journal: Journal,
    items: Sequence[ParsedEntry],
    start_seq: int | None = None,
    progress: Progress | None = None,
) -> AppendResult:
    """Append ``items`` to ``journal`` in one transaction, idempotently.

    Args:
        journal: the scope to append to.
        items: parsed entries in order.
        start_seq: the ``seq`` of the first item; ``None`` means head + 1. Items at seqs the
            journal already holds must hash identically (no-op) or the batch is refused.
        progress: called as ``progress(done, total)`` while rows are written.

    Returns:
        :class:`AppendResult`.

    Raises:
        ConflictError: a different entry hash at an existing seq (HTTP 409); nothing written.
        GapError: ``start_seq`` beyond head + 1.
        EntryInvalid: an item that cannot be an entry (names the index and field), or a
            tool result without an earlier call, or a second result for one call.
    """
    caller = journal
    with transaction.atomic():
        journal = (
            Journal.objects.select_for_update().select_related("session__tenant").get(pk=journal.pk)
        )
        head = journal.head_seq
        start = head + 1 if start_seq is None else start_seq
        if start < 1:
            raise GapError(f"seq starts at 1, got {start}")
        if start > head + 1:
            raise GapError(f"seq {start} would leave a gap: the journal's head is {head}")
        parent = ""
        if start > 1:
            parent = Entry.objects.values_list("entry_hash", flat=True).get(
                journal=journal, seq=start - 1
            )
        prepared = prepare_entries(
            scope=journal.scope_fields(),
            start_seq=start,
            parent_hash=parent,
            items=items,
            chunk_bytes=journal.chunk_bytes,
            encoding=settings.TOKEN_ENCODING,
        )
        overlap = [p for p in prepared if p.seq <= head]
        if overlap:
            stored = dict(
                Entry.objects.filter(
                    journal=journal, seq__gte=overlap[0].seq, seq__lte=overlap[-1].seq
                ).values_list("seq", "entry_hash")
            )
            for p in overlap:
                if stored.get(p.seq) != p.entry_hash:
                    raise ConflictError(p.seq, stored.get(p.seq, ""), p.entry_hash)
        if overlap and progress:
            progress(len(overlap), len(prepared))
        fresh = [p for p in prepared if p.seq > head]
        _check_pairing(journal, head, start, fresh)
        rows = _insert(journal, fresh, progress, len(prepared), len(overlap))
        if fresh:
            journal.head_seq = fresh[-1].seq
            journal.head_hash = fresh[-1].entry_hash
            journal.save(update_fields=["head_seq", "head_hash"])
            committed = journal
            transaction.on_commit(
                lambda: entries_appended.send(
                    sender=Journal,
                    journal=committed,
                    appended=len(fresh),
                    head_seq=committed.head_seq,
                )
            )
    caller.head_seq, caller.head_hash = journal.head_seq, journal.head_hash
    return AppendResult(
        appended=len(fresh), unchanged=len(overlap), head_seq=journal.head_seq, entries=rows
    )


@dataclass
class ImportResult:
    """What an import did: the journal, the parsed session, and the append outcome.

    ``counts`` holds entries per kind (``derived`` apart), ``failed_tool_results`` and
    ``duplicates``: source records repeated byte for byte that were read once (listed in
    ``parsed.metadata["duplicates"]``).
    """

    journal: Journal
    parsed: ParsedSession
    append: AppendResult
    counts: dict[str, int]
    #: every journal written: one, or one per lane when the source holds several (OpenCode)
    journals: list[Journal] = field(default_factory=list)


def _counts(entries: Sequence[ParsedEntry]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in entries:
        key = "derived" if e.derived else e.kind
        counts[key] = counts.get(key, 0) + 1
        if e.kind == "tool_result" and e.content.get("is_error"):
            counts["failed_tool_results"] = counts.get("failed_tool_results", 0) + 1
    return counts


def default_session_key(path: str | Path) -> str:
    """A session key from a file or folder name: slugified, at most 80 characters."""
    stem = Path(path).name
    for suffix in (".traj.json", ".jsonl", ".json", ".traj"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return (slugify(stem) or "session")[:80]


def journal_import(
    *,
    path: str | Path,
    fmt: str | None = None,
    tenant: str = "default",
    session: str | None = None,
    lane: str = "main",
    branch: str = "main",
    progress: Progress | None = None,
    on_parsed: Callable[[ParsedSession], None] | None = None,
) -> ImportResult:
    """Import one transcript into the journal of one scope, in one transaction.

    Args:
        path: a transcript file, or an OpenCode export folder.
        fmt: a format name (``journal_app.formats.FORMATS``) or ``None`` to detect.
        tenant, session, lane, branch: the scope; ``session`` defaults to the file name.
        progress: ``progress(done, total)`` while entries are written.
        on_parsed: called once the source is parsed, before anything is written.

    Returns:
        :class:`ImportResult`. Importing the same file into the same scope again is a no-op
        (every entry hashes identically). A source holding several lines of work (an
        OpenCode export of several sessions) becomes one journal per lane of the session.

    Raises:
        FormatError: unreadable or malformed source (names file, line/index, field).
        EntryInvalid: an entry that cannot be stored (names the entry and field).
        ConflictError: the scope already holds different entries at the same seqs.
        DatabaseUnavailable: the database connection dropped mid-import.
        ArtifactWriteError: an artifact's bytes could not be stored with their hash.
        In every case zero rows are written (tenant, session and journal included).
    """
    parsed = parse_path(path, fmt)
    if on_parsed:
        on_parsed(parsed)
    # A lone surrogate in the title would only fail at the database; the entry it came from
    # is refused below with its line, so the title just must not stop us getting there.
    parsed.title = (
        parsed.title.encode("utf-8", errors="replace").decode("utf-8").replace("\x00", "")
    )
    session_meta = {"source_session_id": parsed.source_session_id, **parsed.metadata}
    try:
        canonical_body(session_meta)
    except CanonicalisationError as exc:
        raise FormatError(
            path, "", "metadata", f"source-level fields cannot be canonical JSON: {exc}"
        ) from None
    with _write_transaction(f"the import of {Path(path).name}"):
        t = tenant_ensure(slug=tenant)
        s = session_ensure(
            tenant=t,
            key=session or default_session_key(path),
            title=parsed.title,
            source_format=parsed.format,
            source_name=Path(path).name,
            meta=session_meta,
        )
        by_lane: dict[str, list[ParsedEntry]] = {}
        for item in parsed.entries:
            by_lane.setdefault(item.lane or lane, []).append(item)
        journals: list[Journal] = []
        total = AppendResult(appended=0, unchanged=0, head_seq=0)
        done = 0
        for lane_name, items in by_lane.items():
            try:
                j = journal_ensure(session=s, lane=lane_name, branch=branch)
            except JournalError as exc:
                if lane_name == lane:
                    raise
                raise FormatError(path, items[0].source_ref, "lane", str(exc)) from None

            def lane_progress(n: int, _total: int, _base: int = done) -> None:
                if progress:
                    progress(_base + n, len(parsed.entries))

            try:
                result = journal_append(journal=j, items=items, start_seq=1, progress=lane_progress)
            except EntryInvalid as exc:
                where = exc.source_ref or f"entry {exc.index}"
                raise FormatError(path, where, exc.field, exc.reason) from None
            if j.ended_at is None:
                # a transcript file is the record of a run that stopped
                j.ended_at = timezone.now()
                j.save(update_fields=["ended_at"])
            done += len(items)
            total.appended += result.appended
            total.unchanged += result.unchanged
            total.entries.extend(result.entries)
            journals.append(j)
    for j in journals:
        j.refresh_from_db()
    total.head_seq = journals[0].head_seq
    return ImportResult(
        journal=journals[0],
        parsed=parsed,
        append=total,
        counts={
            **_counts(parsed.entries),
            "duplicates": int((parsed.metadata.get("duplicates") or {}).get("count", 0)),
        },
        journals=journals,
    )


@dataclass
class VerifyReport:
    """Result of :func:`journal_verify`: entries checked and the first mismatch, if any."""

    journals: int = 0
    entries: int = 0
    chunks: int = 0
    bytes: int = 0
    first_failure: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.first_failure is None


def _stored_chunks(entry: Entry) -> list[StoredChunk]:
    return [StoredChunk(c.position, c.offset, c.length, c.hash) for c in entry.chunks.all()]


def entry_check(entry: Entry, *, chain: bool = False) -> list[str]:
    """Recompute one entry's hashes and its figures hash now (the UI's "hash verified" badge).

    Args:
        chain: also check ``parent_hash`` against the previous entry (one more query).

    Returns:
        Problems naming each field that does not match; empty when all match.
    """
    expected_parent = None
    if chain:
        expected_parent = (
            Entry.objects.filter(journal_id=entry.journal_id, seq=entry.seq - 1)
            .values_list("entry_hash", flat=True)
            .first()
            or ""
        )
    journal = entry.journal
    return figures_check(entry) + check_entry(
        scope=journal.scope_fields(),
        seq=entry.seq,
        kind=entry.kind,
        role=entry.role,
        tool_call_id=entry.tool_call_id,
        derived=entry.derived,
        tool_name=entry.tool_name,
        is_error=entry.is_error,
        body=entry.body,
        body_hash_stored=entry.body_hash,
        byte_length=entry.byte_length,
        meta=entry.meta,
        meta_hash_stored=entry.meta_hash,
        parent_hash=entry.parent_hash,
        entry_hash_stored=entry.entry_hash,
        chunks=_stored_chunks(entry),
        expected_parent=expected_parent,
        chunk_bytes=journal.chunk_bytes,
    )


def _iter_entries(journal: Journal, batch: int = 1000) -> Iterator[Entry]:
    # seq is gapless, so a range (not OFFSET/LIMIT over the rest) keeps every batch an index
    # range scan; a gap still shows up as a seq mismatch in the caller
    last = 0
    head = (
        Entry.objects.filter(journal=journal).order_by("-seq").values_list("seq", flat=True).first()
        or 0
    )
    while last < head:
        rows = list(
            Entry.objects.filter(journal=journal, seq__gt=last, seq__lte=last + batch)
            .order_by("seq")
            .select_related("artifact")
            .prefetch_related("chunks")
        )
        yield from rows
        last += batch


def journal_verify(
    *, journals: Sequence[Journal], progress: Progress | None = None
) -> VerifyReport:
    """Recompute every entry, body and chunk hash, the parent chain and the figures, streaming.

    Stops at the first entry that does not match and reports it (scope, seq, entry hash,
    the problems). Also checks the seq is gapless and the journal head matches the last entry,
    and that each artifact's stored bytes still hash to its content hash.

    Returns:
        :class:`VerifyReport`; memory stays flat in journal size (batches of 1,000 entries).
    """
    report = VerifyReport()
    total = sum(j.head_seq for j in journals)
    for journal in journals:
        journal.refresh_from_db(fields=["head_seq", "head_hash"])
        report.journals += 1
        scope = journal.scope_fields()
        expected_parent = ""
        expected_seq = 1
        for entry in _iter_entries(journal):
            problems: list[str] = []
            if entry.seq != expected_seq:
                problems.append(f"seq: expected {expected_seq}, found {entry.seq} (gap)")
            chunks = _stored_chunks(entry)
            problems += check_entry(
                scope=scope,
                seq=entry.seq,
                kind=entry.kind,
                role=entry.role,
                tool_call_id=entry.tool_call_id,
                derived=entry.derived,
                tool_name=entry.tool_name,
                is_error=entry.is_error,
                body=entry.body,
                body_hash_stored=entry.body_hash,
                byte_length=entry.byte_length,
                meta=entry.meta,
                meta_hash_stored=entry.meta_hash,
                parent_hash=entry.parent_hash,
                entry_hash_stored=entry.entry_hash,
                chunks=chunks,
                expected_parent=expected_parent,
                chunk_bytes=journal.chunk_bytes,
            )
            problems += figures_check(entry)
            if entry.artifact_id is not None and not problems:
                problems += artifact_check(entry.artifact)
            report.entries += 1
            report.chunks += len(chunks)
            report.bytes += entry.byte_length
            if problems:
                report.first_failure = {
                    "scope": journal.scope_label,
                    "seq": entry.seq,
                    "entry_hash": entry.entry_hash,
                    "problems": problems,
                }
                return report
            expected_parent = entry.entry_hash
            expected_seq += 1
            if progress:
                progress(report.entries, total)
        if journal.head_seq != expected_seq - 1 or journal.head_hash != expected_parent:
            report.first_failure = {
                "scope": journal.scope_label,
                "seq": journal.head_seq,
                "entry_hash": journal.head_hash,
                "problems": [
                    f"head: journal says seq {journal.head_seq} sha256:{journal.head_hash}, "
                    f"entries end at seq {expected_seq - 1} sha256:{expected_parent}"
                ],
            }
            return report
    return report


def journals_for_scope(scope: str | None) -> list[Journal]:
    """Resolve ``tenant[/session[/lane[/branch]]]`` (or ``None`` for all) to journals.

    Raises:
        JournalError: the scope names nothing.
    """
    qs = Journal.objects.select_related("session__tenant").order_by(
        "session__tenant__slug", "session__key", "lane", "branch"
    )
    if scope:
        parts = scope.strip("/").split("/")
        if len(parts) > 4:
            raise JournalError(
                f"scope {scope!r} has more than 4 parts (tenant/session/lane/branch)"
            )
        names = ["session__tenant__slug", "session__key", "lane", "branch"]
        qs = qs.filter(**dict(zip(names, parts, strict=False)))
    journals = list(qs)
    if scope and not journals:
        raise JournalError(f"no journal matches scope {scope!r}")
    return journals
