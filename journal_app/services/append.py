"""The append path: prepared entries hashed, chained and written in one transaction."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Model
from django.utils import timezone

from journal_app.chain import (
    ArtifactFigures,
    PreparedEntry,
    check_figures,
    figures_hash,
    prepare_entries,
)
from journal_app.content import content_text
from journal_app.entry_validation import EntryInvalid
from journal_app.formats import ParsedEntry
from journal_app.identifiers import RULES_VERSION, Identifier, identifiers_dump, identifiers_of
from journal_app.models import (
    Artifact,
    Chunk,
    Entry,
    EntryIdentifiers,
    Journal,
)
from journal_app.privacy import Finder
from journal_app.services.errors import ConflictError, GapError
from journal_app.services.scope import BATCH, ArtifactItem, artifacts_store
from journal_app.services.unfolded import unfolded_add
from journal_app.signals import entries_appended
from journal_app.times import entry_time
from journal_app.tokens import source_label

Progress = Callable[[int, int], None]

#: entries per COPY on PostgreSQL: bounded memory for the rows of one batch
COPY_BATCH = 5000


@dataclass
class AppendResult:
    """Outcome of one append batch: entries written, entries already present (no-ops), head."""

    appended: int
    unchanged: int
    head_seq: int
    entries: list[Entry] = field(default_factory=list)


def _newest_time(fresh: Sequence[PreparedEntry], look: int = 50) -> datetime | None:
    """The source's time (:func:`journal_app.times.entry_time`) of the newest of the last
    ``look`` entries of a batch that has one; ``None`` when none of them does."""
    for p in reversed(fresh[-look:]):
        at = entry_time(json.loads(p.meta or "{}"))
        if at is not None:
            return at
    return None


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


def _entry_row(
    journal: Journal, p: PreparedEntry, artifact: Artifact | None, now: datetime
) -> Entry:
    """The (unsaved) :class:`Entry` of prepared entry ``p`` with its figures hash."""
    return Entry(
        journal=journal,
        seq=p.seq,
        kind=p.kind,
        role=p.role,
        tool_call_id=p.tool_call_id,
        tool_name=p.tool_name,
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
        created_at=now,
    )


def copy_rows(model: type[Model], objs: Sequence[Model]) -> None:
    """Write ``objs`` (unsaved instances) with one PostgreSQL ``COPY ... FROM STDIN``.

    Every concrete column of ``model`` is sent, from the instances' attribute values (so a
    column added to the model is covered); the primary key only when the first instance has
    one (else the database's default numbers the rows). See :func:`copy_values`.
    """
    if not objs:
        return
    pk = model._meta.pk
    fields = [f for f in model._meta.concrete_fields if f is not pk or objs[0].pk is not None]
    json_fields = {f.attname for f in fields if f.get_internal_type() == "JSONField"}
    copy_values(
        model,
        [f.column for f in fields],
        (
            [
                json.dumps(getattr(obj, f.attname))
                if f.attname in json_fields
                else getattr(obj, f.attname)
                for f in fields
            ]
            for obj in objs
        ),
    )


def copy_values(model: type[Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """``COPY <model's table> (columns) FROM STDIN`` of ``rows`` (values in column order).

    Runs on the caller's connection and transaction (psycopg 3); INSERT triggers and
    constraints apply as for an ``INSERT``, and a refused row fails the statement, so the
    caller's ``atomic`` block rolls everything back. The statement is added to Django's
    query log when queries are logged (tests count it like any other query).

    Returns:
        The number of rows sent.
    """
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    sql = f"COPY {connection.ops.quote_name(model._meta.db_table)} ({names}) FROM STDIN"
    started = time.monotonic()
    sent = 0
    with connection.cursor() as cur, cur.cursor.copy(sql) as cp:
        for row in rows:
            cp.write_row(row)
            sent += 1
    if connection.queries_logged:  # the driver's COPY bypasses Django's query log: count it
        connection.queries_log.append(
            {"sql": f"{sql} -- {sent} rows", "time": f"{time.monotonic() - started:.3f}"}
        )
    return sent


def _next_ids(model: type[Model], n: int) -> list[int]:
    """``n`` fresh primary keys of ``model`` from its PostgreSQL sequence, ascending."""
    table = model._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
            [table, n],
        )
        return sorted(row[0] for row in cur.fetchall())


def _insert(
    journal: Journal,
    prepared: Sequence[PreparedEntry],
    progress: Progress | None,
    total: int,
    done0: int,
) -> list[Entry]:
    """Write the entries and chunks of ``prepared`` (docs/design.md section 4).

    PostgreSQL: primary keys drawn from the sequence in one query, then one ``COPY`` for the
    entries and one for the chunks per batch. Elsewhere (SQLite):
    ``bulk_create``. The same rows either way; derived rows (identifiers, the search index)
    are written after commit by the ``entries_appended`` receivers.
    """
    tenant = journal.session.tenant
    threshold = settings.ARTIFACT_THRESHOLD_TOKENS
    ours = source_label(settings.TOKEN_ENCODING)
    bulk = connection.vendor == "postgresql"
    now = timezone.now()
    rows: list[Entry] = []
    done = done0
    for start in range(0, len(prepared), COPY_BATCH if bulk else BATCH):
        batch = prepared[start : start + (COPY_BATCH if bulk else BATCH)]
        large = [p for p in batch if p.kind == "tool_result" and p.token_count > threshold]
        stored = artifacts_store(
            tenant=tenant,
            items=[
                ArtifactItem(
                    p.text,
                    p.tool_name,
                    # the entry's own count is of the same text: reused when it is ours
                    token_count=p.token_count if p.token_source == ours else None,
                )
                for p in large
            ],
        )
        artifact_of = {id(p): a for p, (a, _) in zip(large, stored, strict=True)}
        entries = [_entry_row(journal, p, artifact_of.get(id(p)), now) for p in batch]
        if bulk:
            for e, pk in zip(entries, _next_ids(Entry, len(entries)), strict=True):
                e.pk = pk
                e._state.adding = False
            copy_rows(Entry, entries)
            copy_values(
                Chunk,
                ("entry_id", "position", "offset", "length", "hash"),
                (
                    (e.pk, c.position, c.offset, c.length, c.hash)
                    for e, p in zip(entries, batch, strict=True)
                    for c in p.chunks
                ),
            )
        else:
            entries = Entry.objects.bulk_create(entries)
            Chunk.objects.bulk_create(
                [
                    Chunk(
                        entry=e, position=c.position, offset=c.offset, length=c.length, hash=c.hash
                    )
                    for e, p in zip(entries, batch, strict=True)
                    for c in p.chunks
                ],
                batch_size=BATCH,
            )
        rows.extend(entries)
        done += len(batch)
        if progress:
            progress(done, total)
    return rows


def entry_identifiers_row(
    entry: Entry, text: str | None = None, *, findings: Finder | None = None
) -> EntryIdentifiers:
    """The (unsaved) :class:`EntryIdentifiers` row of ``entry``: its identifiers extracted
    once from its immutable bytes. ``text`` is the entry's readable text when the
    caller has it already (else it is derived from the body, parsed once); ``findings`` a
    privacy memo shared with the search index's filter
    (:func:`journal_app.privacy.memo_findings`), or ``None`` to scan here."""
    if entry.derived or entry.kind == "reasoning":
        found: list[
            Identifier
        ] = []  # never read: no identifiers (identifiers_of), so the body is not parsed
    else:
        body = entry.content if text is None or entry.kind == "tool_call" else {}
        found = identifiers_of(
            kind=entry.kind,
            text=content_text(entry.kind, body) if text is None else text,
            content=body if entry.kind == "tool_call" else {},
            tool_call_id=entry.tool_call_id,
            derived=entry.derived,
            findings=findings,
        )
    return EntryIdentifiers(entry=entry, rules=RULES_VERSION, values=identifiers_dump(found))


def identifiers_fill(
    *, journal: Journal, first_seq: int, last_seq: int, findings: Finder | None = None
) -> int:
    """Write the missing :class:`EntryIdentifiers` rows of ``journal``'s entries in
    ``first_seq..last_seq`` (derived once from their immutable bytes).

    Called after an append commits (a queued task, :mod:`recovery_app.tasks`), so the
    extraction is not in the append transaction; a fold that reads an
    entry whose row is still missing writes it itself. Idempotent (conflicts ignored).
    ``findings``: a privacy memo (:func:`journal_app.privacy.memo_findings`) the caller
    shares with the search index of the same entries, or ``None``.

    Returns:
        The number of rows written.
    """
    written = 0
    for low in range(first_seq, last_seq + 1, BATCH):  # BATCH entries at a time: flat memory
        entries = Entry.objects.filter(
            journal=journal,
            seq__gte=low,
            seq__lte=min(last_seq, low + BATCH - 1),
            identifier_row__isnull=True,
        ).only("id", "kind", "body", "tool_call_id", "derived")
        rows = [entry_identifiers_row(e, findings=findings) for e in entries]
        EntryIdentifiers.objects.bulk_create(rows, batch_size=BATCH, ignore_conflicts=True)
        written += len(rows)
    return written


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


def appended_notify(journal: Journal, appended: int) -> None:
    """Send ``entries_appended`` for the last ``appended`` entries of ``journal`` once the
    transaction commits (the fold trigger and the search index follow it)."""
    transaction.on_commit(
        lambda: entries_appended.send(
            sender=Journal, journal=journal, appended=appended, head_seq=journal.head_seq
        )
    )


def journal_append(
    *,
    journal: Journal,
    items: Sequence[ParsedEntry],
    start_seq: int | None = None,
    progress: Progress | None = None,
    notify: bool = True,
) -> AppendResult:
    """Append ``items`` to ``journal`` in one transaction, idempotently.

    Args:
        journal: the scope to append to.
        items: parsed entries in order.
        start_seq: the ``seq`` of the first item; ``None`` means head + 1. Items at seqs the
            journal already holds must hash identically (no-op) or the batch is refused.
        progress: called as ``progress(done, total)`` while rows are written.
        notify: send ``entries_appended`` after commit (:func:`appended_notify`); an import
            appending in batches passes ``False`` and notifies once per journal at its end.

    The journal row is locked for the transaction; entries and chunks are written with
    ``COPY`` on PostgreSQL (``bulk_create`` elsewhere); ``Journal.unfolded_tokens`` grows by
    the new entries' ``token_count`` in the same transaction
    (:func:`journal_app.services.unfolded.unfolded_add`). Identifiers
    and the search index are derived after commit (``entries_appended`` receivers).

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
            unfolded_add(journal, sum(p.token_count for p in fresh))
            journal.last_source_at = _newest_time(fresh) or journal.last_source_at
            journal.save(
                update_fields=["head_seq", "head_hash", "unfolded_tokens", "last_source_at"]
            )
            if notify:
                appended_notify(journal, len(fresh))
    caller.head_seq, caller.head_hash = journal.head_seq, journal.head_hash
    caller.unfolded_tokens = journal.unfolded_tokens
    return AppendResult(
        appended=len(fresh), unchanged=len(overlap), head_seq=journal.head_seq, entries=rows
    )
