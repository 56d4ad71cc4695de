"""Importing a transcript file: parse, then append in one transaction (DESIGN.md section 4)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.utils import timezone
from django.utils.text import slugify

from journal_app.chain import (
    EntryInvalid,
)
from journal_app.formats import FormatError, ParsedEntry, ParsedSession, parse_path
from journal_app.hashing import CanonicalisationError, canonical_body
from journal_app.models import (
    Journal,
)
from journal_app.services.append import AppendResult, journal_append
from journal_app.services.errors import JournalError, _write_transaction
from journal_app.services.scope import journal_ensure, session_ensure, tenant_ensure

Progress = Callable[[int, int], None]


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
