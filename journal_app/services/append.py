"""The append path: prepared entries hashed, chained and written in one transaction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from journal_app.chain import (
    ArtifactFigures,
    EntryInvalid,
    PreparedEntry,
    check_figures,
    figures_hash,
    prepare_entries,
)
from journal_app.formats import ParsedEntry
from journal_app.identifiers import RULES_VERSION, identifiers_dump, identifiers_of
from journal_app.models import (
    Artifact,
    Chunk,
    Entry,
    EntryIdentifiers,
    Journal,
)
from journal_app.services.errors import ConflictError, GapError
from journal_app.services.scope import BATCH, artifact_store
from journal_app.signals import entries_appended

Progress = Callable[[int, int], None]


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
