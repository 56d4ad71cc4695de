"""Importing a transcript file: streamed, then appended in bounded batches inside one
transaction (docs/design.md section 4; memory does not grow with the file)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import reset_queries
from django.utils import timezone
from django.utils.text import slugify

from journal_app.entry_validation import EntryInvalid
from journal_app.formats import FormatError, ParsedEntry, ParsedSession, stream_path
from journal_app.hashing import CanonicalisationError, canonical_body
from journal_app.models import Journal, Session
from journal_app.services.append import AppendResult, appended_notify, journal_append
from journal_app.services.errors import CommittedConnectionLost, JournalError, _write_transaction
from journal_app.services.scope import journal_ensure, session_ensure, tenant_ensure

#: ``progress(bytes_read, file_bytes)`` after each batch is written
Progress = Callable[[int, int], None]

#: entries per ``journal_append`` batch, and the body bytes at which a batch is written
#: early: what the import holds in memory at once
BATCH_ENTRIES = 1_000
BATCH_BYTES = 8 * 1024 * 1024


@dataclass
class ImportResult:
    """What an import did: the journal, the session's fields, and the append outcome.

    ``parsed`` is the parsed session without its entries (``entries=[]``: they were written
    as they were read); ``entries`` is how many were read. ``counts`` holds entries per kind
    (``derived`` apart), ``failed_tool_results`` and ``duplicates``: source records repeated
    byte for byte that were read once (listed in ``parsed.metadata["duplicates"]``).
    ``append.entries`` is empty; ``artifacts`` counts the oversized tool results the new
    entries reference as artifacts.
    """

    journal: Journal
    parsed: ParsedSession
    append: AppendResult
    counts: dict[str, int]
    #: every journal written: one, or one per lane when the source holds several (OpenCode)
    journals: list[Journal] = field(default_factory=list)
    entries: int = 0
    artifacts: int = 0


def import_committed_lost(
    *, result: ImportResult, name: str, scope: str, exc: BaseException
) -> CommittedConnectionLost:
    """The error for a connection lost after an import committed, saying what it committed.

    Built from what the import returned (no query: the connection is gone), for the upload
    API and the ``import_journal`` command alike (README "REST API").

    Args:
        result: what :func:`journal_import` returned (its transaction committed).
        name: the source file's name.
        scope: ``tenant/session/lane/branch`` the import named.
        exc: the database error raised after the commit.

    Returns:
        :class:`~journal_app.services.errors.CommittedConnectionLost` (503,
        ``committed_then_lost``), never "nothing was written".
    """
    journals = len(result.journals) or 1
    return CommittedConnectionLost(
        f"the import of {name} committed: {result.append.appended} entries appended, "
        f"{result.append.unchanged} already present, in {scope}"
        + (f" and {journals - 1} other journal(s)" if journals > 1 else "")
        + f" (head seq {result.journal.head_seq}); the database connection was lost after "
        f"the commit ({type(exc).__name__}), so the rest of the answer (folds, summary) is "
        "missing: nothing needs to be sent again"
    )


def _count(counts: dict[str, int], e: ParsedEntry) -> None:
    key = "derived" if e.derived else e.kind
    counts[key] = counts.get(key, 0) + 1
    if e.kind == "tool_result" and e.content.get("is_error"):
        counts["failed_tool_results"] = counts.get("failed_tool_results", 0) + 1


def _size(e: ParsedEntry) -> int:
    """A cheap upper-bound guess of an entry's text bytes (for the batch byte bound)."""
    content = e.content
    return sum(len(v) for v in content.values() if isinstance(v, str)) + 256


def default_session_key(path: str | Path) -> str:
    """A session key from a file or folder name: slugified, at most 80 characters."""
    stem = Path(path).name
    for suffix in (".traj.json", ".jsonl", ".json", ".traj"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return (slugify(stem) or "session")[:80]


@dataclass
class _Lane:
    journal: Journal
    next_seq: int = 1
    batch: list[ParsedEntry] = field(default_factory=list)
    batch_bytes: int = 0
    appended: int = 0


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

    The source is streamed (:func:`journal_app.formats.stream_path`): entries are hashed,
    chunked and written by :func:`journal_append` in batches of at most
    :data:`BATCH_ENTRIES` entries / about :data:`BATCH_BYTES` bytes, each continuing the
    chain at the lane's next seq, all inside the one transaction; so memory stays flat
    however large the file and the hashes are those of one append.

    Args:
        path: a transcript file, or an OpenCode export folder.
        fmt: a format name (``journal_app.formats.FORMATS``) or ``None`` to detect.
        tenant, session, lane, branch: the scope; ``session`` defaults to the file name.
        progress: ``progress(bytes_read, file_bytes)`` after each batch is written (a
            small file is read whole first, so its figure is the whole file at once).
        on_parsed: called once the format is known, before anything is written, with the
            session's fields so far (``format``; no entries: they are streamed).

    Returns:
        :class:`ImportResult`. Importing the same file into the same scope again is a no-op
        (every entry hashes identically). A source holding several lines of work (an
        OpenCode export of several sessions) becomes one journal per lane of the session; a
        source that records forks (a Claude Code rewind) one journal per branch, the live
        branch first (``journal``) and each abandoned one on its own (``journals``).

    Raises:
        FormatError: unreadable or malformed source (names file, line/index, field).
        EntryInvalid: an entry that cannot be stored (names the entry and field).
        ConflictError: the scope already holds different entries at the same seqs.
        DatabaseUnavailable: the database connection dropped mid-import.
        ArtifactWriteError: an artifact's bytes could not be stored with their hash.
        In every case zero rows are written (tenant, session and journal included).
    """
    read = [0]
    source, name, stream = stream_path(path, fmt, progress=lambda n: read.__setitem__(0, n))
    if on_parsed:
        on_parsed(ParsedSession(format=name, entries=[]))
    file_bytes = source.size
    key = session or default_session_key(path)
    counts: dict[str, int] = {}
    total = AppendResult(appended=0, unchanged=0, head_seq=0)
    lanes: dict[tuple[str, str], _Lane] = {}
    artifacts = 0
    entries = 0

    def flush(state: _Lane) -> None:
        nonlocal artifacts
        if not state.batch:
            return
        try:
            result = journal_append(
                journal=state.journal,
                items=state.batch,
                start_seq=state.next_seq,
                notify=False,
            )
        except EntryInvalid as exc:
            where = exc.source_ref or f"entry {state.next_seq - 1 + exc.index}"
            raise FormatError(path, where, exc.field, exc.reason) from None
        state.next_seq += len(state.batch)
        state.appended += result.appended
        state.batch, state.batch_bytes = [], 0
        # with DEBUG on (a checkout's default) Django keeps each query's SQL with its
        # parameters, 9,000 queries deep: an import's inserts spelled out with their bodies
        # (38 MB after a 10 MB file, gigabytes for a large one); a batch's log is dropped
        if settings.DEBUG:
            reset_queries()
        total.appended += result.appended
        total.unchanged += result.unchanged
        artifacts += len({e.artifact_id for e in result.entries if e.artifact_id})
        if progress:
            progress(source.size if source.data is not None else read[0], file_bytes)

    with _write_transaction(f"the import of {Path(path).name}"):
        t = tenant_ensure(slug=tenant)
        created = not Session.objects.filter(tenant=t, key=key).exists()
        s = session_ensure(
            tenant=t, key=key, source_format=name, source_name=Path(path).name, meta={}
        )
        while True:
            try:
                item = next(stream)
            except StopIteration as done:
                parsed: ParsedSession = done.value
                break
            entries += 1
            _count(counts, item)
            lane_name = item.lane or lane
            branch_name = item.branch or branch
            state = lanes.get((lane_name, branch_name))
            if state is None:
                try:
                    j = journal_ensure(session=s, lane=lane_name, branch=branch_name)
                except JournalError as exc:
                    if lane_name == lane and branch_name == branch:
                        raise
                    field_name = "lane" if lane_name != lane else "branch"
                    raise FormatError(path, item.source_ref, field_name, str(exc)) from None
                state = lanes[(lane_name, branch_name)] = _Lane(journal=j)
            state.batch.append(item)
            state.batch_bytes += _size(item)
            if len(state.batch) >= BATCH_ENTRIES or state.batch_bytes >= BATCH_BYTES:
                flush(state)
        for state in lanes.values():
            flush(state)
        # A lone surrogate in the title would only fail at the database; the entry it came
        # from is refused with its line, so the title just must not stop the import.
        parsed.format = name
        parsed.title = (
            parsed.title.encode("utf-8", errors="replace").decode("utf-8").replace("\x00", "")
        )
        session_meta = {"source_session_id": parsed.source_session_id, **parsed.metadata}
        try:
            meta_text = canonical_body(session_meta).decode("utf-8")
        except CanonicalisationError as exc:
            raise FormatError(
                path, "", "metadata", f"source-level fields cannot be canonical JSON: {exc}"
            ) from None
        if created:  # the session's descriptors are known once the whole source is read
            Session.objects.filter(pk=s.pk).update(title=parsed.title[:300], meta=meta_text)
        journals: list[Journal] = []
        named = lanes.get((lane, branch))  # the scope the import names comes first
        ordered = [named] if named else []
        for state in [*ordered, *(x for x in lanes.values() if x is not named)]:
            j = state.journal
            if j.ended_at is None:
                # a transcript file is the record of a run that stopped
                j.ended_at = timezone.now()
                j.save(update_fields=["ended_at"])
            if state.appended:
                appended_notify(j, state.appended)
            journals.append(j)
    for j in journals:
        j.refresh_from_db()
    total.head_seq = journals[0].head_seq
    counts["duplicates"] = int((parsed.metadata.get("duplicates") or {}).get("count", 0))
    return ImportResult(
        journal=journals[0],
        parsed=parsed,
        append=total,
        counts=counts,
        journals=journals,
        entries=entries,
        artifacts=artifacts,
    )
