"""Live follow of growing agent logs: Claude Code and Codex JSONL files.

:func:`follow_file` reads a file's **complete** lines (a half-written last line waits for its
newline), parses them with the journal's own importer (format detected or given), and places
the items in the journal with :func:`proxy_app.services.conversation_record`, the proxy's
matching: only entries not yet journaled are appended, so running it again, or after a
restart, appends nothing twice and needs no state of its own. A file that was rewritten (an
earlier record changed or removed, not appended to) diverges from the journal: it is imported
as a new branch at the divergence point and reported, never a rewrite. Folds follow the same
threshold as every append (the automatic fold scheduled by ``ledger_app.receivers``). A
malformed complete line (not JSON, or a record the importer refuses) does not block the file:
it is reported once (file, line number, why), recorded in the journal as a derived
``unreadable_record`` event at its place so a restart does not report it again, and the later
lines carry on.

:func:`follow_paths` watches files and folders (a Claude Code projects folder, a Codex
sessions folder) with ``watchfiles`` and calls :func:`follow_file` for each ``.jsonl`` file
that appears or grows.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from journal_app.formats import FORMATS, FormatError, codex, detect_format
from journal_app.formats.base import ParsedEntry, ParsedSession, check_pairing
from journal_app.formats.codex import _DUPLICATE_EVENTS as CODEX_DUPLICATE_EVENTS
from journal_app.formats.codex import _digest as codex_digest
from journal_app.formats.codex import _response_texts as codex_response_texts
from journal_app.formats.source import Source, loads
from journal_app.models import Session, Tenant
from journal_app.services import default_session_key, tenant_ensure
from proxy_app.services import ProxyScope, conversation_record

SUFFIX = ".jsonl"


#: the ``content["type"]`` of the event that records a complete line ``follow`` could not read
SKIPPED_TYPE = "unreadable_record"
_LINE = re.compile(r"^line (\d+)")


@dataclass
class SkippedLine:
    """A complete line that was not journaled: its 1-based number and why (one sentence)."""

    line: int
    reason: str

    def event(self, text: str) -> ParsedEntry:
        """The journal's record of the skip: a derived ``event`` at the line's place.

        Its content (line number, reason, sha256 of the line) is the same on every pass, so
        matching finds it already journaled and a restart neither re-appends nor re-reports
        it; the line itself is never journaled.
        """
        return ParsedEntry(
            kind="event",
            role="runtime",
            content={
                "type": SKIPPED_TYPE,
                "line": self.line,
                "reason": self.reason,
                "line_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            },
            derived=True,
            source_ref=f"line {self.line}",
        )


@dataclass
class FollowResult:
    """What one pass over a file did.

    Attributes:
        path: the file.
        session / branch: where its entries are (``branch`` changes when it was rewritten).
        appended: entries written by this pass.
        waiting: bytes of a half-written last line left for the next pass.
        branched_from: ``"<branch>@<seq>"`` when the file was rewritten.
        skipped: why nothing was read (no complete record yet, no messages yet), or ``""``.
        bad_lines: malformed complete lines first recorded by this pass (reported once;
            lines recorded by an earlier pass are not repeated).
    """

    path: Path
    session: str
    branch: str = ""
    appended: int = 0
    waiting: int = 0
    branched_from: str | None = None
    skipped: str = ""
    bad_lines: list[SkippedLine] = field(default_factory=list)

    def line(self) -> str:
        """One line for the operator."""
        where = f"{self.session}/{self.branch}" if self.branch else self.session
        if self.skipped:
            return f"{self.path}: {self.skipped}"
        text = f"{self.path} -> {where}: +{self.appended} entries"
        if self.branched_from:
            text += f" (the file was rewritten: new branch from {self.branched_from})"
        if self.waiting:
            text += f", {self.waiting} bytes of an unfinished line waiting"
        return text

    def warnings(self) -> list[str]:
        """One loud line per malformed line skipped by this pass: file, line number, why."""
        return [
            f"WARNING {self.path}, line {b.line}: skipped, not journaled: {b.reason} "
            f"(recorded as an {SKIPPED_TYPE!r} event; later lines carry on)"
            for b in self.bad_lines
        ]


@dataclass
class FollowState:
    """What :func:`follow_file` keeps of a file between passes, so a pass reads only the
    bytes written since the last one (README "Follow live agent logs").

    Attributes:
        ident: ``(device, inode)`` of the file read.
        end: the offset just after its last complete line.
        head, tail: the first and the last bytes before ``end`` (up to :data:`TAIL_CHECK`
            each), checked again on the next pass: a file that shrank, was replaced or
            changed there is read whole again (and its rewrite found as usual). A change
            between them alone is seen by the next whole read (a restart).
        lines: its complete lines so far; ``rows`` / ``skipped`` their JSON records and the
            lines that are not JSON (:func:`_rows`).
    """

    ident: tuple[int, int] = (0, 0)
    end: int = 0
    head: bytes = b""
    tail: bytes = b""
    lines: list[str] = field(default_factory=list)
    rows: list[tuple[int, Any]] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)

    def reset(self) -> None:
        """Forget everything read: the next pass reads the file whole."""
        self.__dict__.update(FollowState().__dict__)


#: bytes before the last offset compared on each pass (a changed file is read whole again)
TAIL_CHECK = 4096


def _read_new(path: Path, state: FollowState) -> tuple[int, int] | None:
    """Bring ``state`` up to the file's last complete line, reading from ``state.end``.

    Returns:
        ``(new lines, bytes of a half-written last line)``, or ``None`` when the file was
        replaced, shrank or changed before ``state.end`` (``state`` is then reset and the
        caller reads it whole).
    """
    info = path.stat()
    with path.open("rb") as fh:
        if state.end:
            if (info.st_dev, info.st_ino) != state.ident or info.st_size < state.end:
                return None
            if fh.read(len(state.head)) != state.head:
                return None
            fh.seek(state.end - len(state.tail))
            if fh.read(len(state.tail)) != state.tail:
                return None
        else:
            state.ident = (info.st_dev, info.st_ino)
        fh.seek(state.end)
        more = fh.read()
    cut = more.rfind(b"\n") + 1
    if not cut:
        return 0, len(more)
    chunk = more[:cut].decode("utf-8", errors="strict")
    if not state.end:
        chunk = chunk.removeprefix("\ufeff")
    new_lines = chunk.splitlines()
    rows, skipped, _ = _rows(path, chunk, first=len(state.lines) + 1)
    state.lines += new_lines
    state.rows += rows
    state.skipped += skipped
    state.end += cut
    state.tail = (state.tail + more[:cut])[-TAIL_CHECK:]
    if len(state.head) < TAIL_CHECK:
        state.head = (state.head + more[:cut])[:TAIL_CHECK]
    return len(new_lines), len(more) - cut


def _rows(
    path: Path, text: str, first: int = 1
) -> tuple[list[tuple[int, Any]], list[SkippedLine], list[str]]:
    """``(rows, skipped, lines)``: the JSON records of the complete lines, numbered as
    :func:`journal_app.formats.source.parse_jsonl` numbers them, and the lines that are not
    JSON (instead of refusing the whole file at the first)."""
    rows: list[tuple[int, Any]] = []
    skipped: list[SkippedLine] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=first):
        if not line.strip():
            continue
        try:
            rows.append((number, loads(line)))
        except ValueError as exc:
            skipped.append(SkippedLine(number, f"not valid JSON ({exc})"))
    return rows, skipped, lines


def _parse(
    path: Path, fmt: str | None, rows: list[tuple[int, Any]], skipped: list[SkippedLine]
) -> ParsedSession | None:
    """The importer's reading of ``rows``; a record it refuses by line number is left out
    and added to ``skipped`` (at most once per record), anything else is raised.
    ``None`` when no record is left."""
    while rows:
        source = Source(path=path, kind="jsonl", data=rows)
        name = fmt or detect_format(source)
        if name not in FORMATS:
            raise FormatError(path, "", "format", f"unknown format {name!r}")
        try:
            return FORMATS[name].parse(source)
        except FormatError as exc:
            m = _LINE.match(exc.location)
            number = int(m.group(1)) if m else None
            if number is None or all(n != number for n, _ in rows):
                raise
            field_part = f"field {exc.field!r}: " if exc.field else ""
            skipped.append(SkippedLine(number, f"{name} importer: {field_part}{exc.reason}"))
            rows = [r for r in rows if r[0] != number]
    return None


#: rows a Codex ``event_msg`` line may wait for the ``response_item`` that repeats it; an
#: older one without its repeat is journaled as the importer keeps it (an event only)
HOLD_ROWS = 50


def _settled(rows: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """The rows of a Codex rollout whose reading a later line cannot change.

    Codex writes ``event_msg`` ``agent_reasoning`` / ``user_message`` / ``agent_message``
    lines and, a few lines later, the ``response_item`` lines that repeat them; the importer
    (:mod:`journal_app.formats.codex`) keeps one of each pair, the response item. An event
    among the last :data:`HOLD_ROWS` rows whose repeat has not been written yet would be
    journaled as an entry of its own and then stop matching once the repeat arrives (a false
    rewrite): the rows from the first such event on wait for the next pass.
    """
    while True:  # a cut can take away the repeat of an earlier event: cut again
        cut = _first_unrepeated(rows, len(rows) - HOLD_ROWS)
        if cut is None:
            return rows
        rows = rows[:cut]


def _first_unrepeated(rows: list[tuple[int, Any]], tail: int) -> int | None:
    """The index of the first duplicating event at or after ``tail`` without its repeat."""
    counts = codex_response_texts(rows)
    for index, (_, obj) in enumerate(rows):
        if not isinstance(obj, dict) or obj.get("type") != "event_msg":
            continue
        payload = obj.get("payload")
        etype = payload.get("type") if isinstance(payload, dict) else None
        if etype not in CODEX_DUPLICATE_EVENTS:
            continue
        text = payload.get(CODEX_DUPLICATE_EVENTS[etype])
        if not isinstance(text, str):
            continue
        key = (etype, codex_digest(text))
        if counts[key] > 0:
            counts[key] -= 1
        elif index >= tail:
            return index
    return None


def _with_skips(
    entries: list[ParsedEntry], skipped: list[SkippedLine], lines: list[str]
) -> list[ParsedEntry]:
    """``entries`` with each skip's event at its line's place (after the entries of earlier
    lines): the same order on every pass, so a restart matches what is journaled."""
    pending = sorted(skipped, key=lambda b: b.line)
    out: list[ParsedEntry] = []
    for entry in entries:
        m = _LINE.match(entry.source_ref)
        while m and pending and pending[0].line < int(m.group(1)):
            b = pending.pop(0)
            out.append(b.event(lines[b.line - 1]))
        out.append(entry)
    out.extend(b.event(lines[b.line - 1]) for b in pending)
    return out


def follow_file(
    *,
    path: str | Path,
    tenant: str = "default",
    session: str | None = None,
    lane: str = "main",
    fmt: str | None = None,
    state: FollowState | None = None,
) -> FollowResult:
    """Journal the complete records of ``path`` that are not journaled yet.

    A complete line that is not JSON, or a record the importer refuses naming its line, is
    skipped and recorded in the journal as a derived ``unreadable_record`` event at its
    place (line number, reason, sha256 of the line); later lines carry on. The pass that
    first records it lists it in :attr:`FollowResult.bad_lines`; later passes and restarts
    find the event journaled and do not report it again. A half-written last line (no
    newline yet) is not a malformed line: it waits for its end.

    Args:
        path: a Claude Code session or Codex rollout JSONL file (any JSONL importer's format).
        tenant: the tenant slug (created on first use).
        session: the session key (default: the file name without ``.jsonl``, as
            ``import_journal`` names it).
        lane: the lane.
        fmt: a format name, or ``None`` to detect it.
        state: kept by the caller between passes over one file (:class:`FollowState`):
            only the bytes written since the last pass are read and decoded, and a pass
            that finds no new complete line ends there (nothing parsed or placed).
            ``None``: the whole file is read.

    Returns:
        :class:`FollowResult`. Idempotent: a second pass over an unchanged file appends 0.

    Raises:
        FormatError: a file whose records no importer can read (unknown format, or a
            refusal that names no line, such as a tool result without its call); nothing of
            this pass is written.
    """
    path = Path(path)
    key = session or default_session_key(path)
    state = state if state is not None else FollowState()
    seen = bool(state.end)
    read = _read_new(path, state)
    if read is None:  # replaced, shrunk or changed: read whole again
        state.reset()
        seen, read = False, _read_new(path, state)
        assert read is not None
    new_lines, waiting = read
    result = FollowResult(path=path, session=key, waiting=waiting)
    if seen and not new_lines:
        result.skipped = "nothing new"
        return result
    if not any(line.strip() for line in state.lines):
        result.skipped = "no complete record yet"
        return result
    rows, skipped, lines = list(state.rows), list(state.skipped), state.lines
    name = fmt or (detect_format(Source(path=path, kind="jsonl", data=rows)) if rows else None)
    if name == codex.NAME:
        settled = _settled(rows)
        if len(settled) < len(rows):
            last = settled[-1][0] if settled else 0
            rows = settled
            skipped = [b for b in skipped if b.line <= last]
            held = "".join(f"{x}\n" for x in lines[last:]).encode()
            result.waiting = waiting + len(held)
    parsed = _parse(path, fmt, rows, skipped)
    entries = parsed.entries if parsed is not None else []
    if not skipped and not any(e.kind in ("message", "tool_call") for e in entries):
        result.skipped = "no messages yet"
        return result
    check_pairing(path, entries)
    items = _with_skips(entries, skipped, lines)
    owner = tenant_ensure(slug=tenant)
    source = str(path.resolve())
    key = unclaimed_key(owner, key, source)
    result.session = key
    scope = ProxyScope(owner, key, lane, None)
    recorded = conversation_record(
        scope=scope,
        items=items,
        title=parsed.title if parsed is not None else "",
        source_format=parsed.format if parsed is not None else "",
        every=True,
        source_name=source,
    )
    result.branch = recorded.journal.branch
    result.appended = recorded.appended
    result.branched_from = recorded.branched_from
    fresh = items[len(items) - recorded.appended :] if recorded.appended else []
    lines_new = {e.content["line"] for e in fresh if e.content.get("type") == SKIPPED_TYPE}
    result.bad_lines = sorted((b for b in skipped if b.line in lines_new), key=lambda b: b.line)
    return result


def unclaimed_key(tenant: Tenant, key: str, source: str) -> str:
    """The session key a followed file journals to: ``key``, unless its session was made by
    following another file (its ``source_name``, an absolute path, differs from ``source``):
    then ``key`` with ``-`` and 8 hex digits of the sha256 of ``source``, so two files whose
    readable keys coincide (``x.y/live.jsonl`` and ``x/y/live.jsonl``, ``my proj`` and
    ``my-proj``, one name under two followed folders) never share a session. The first file
    keeps the plain key, across restarts (the claim is the session row). A session made by an
    import (a bare file name) or by the proxy is not a claim: following continues it.

    Args:
        tenant: the tenant.
        key: the readable key (:func:`follow_session_key`).
        source: the file's absolute path.
    """
    owner = (
        Session.objects.filter(tenant=tenant, key=key).values_list("source_name", flat=True).first()
    )
    if owner is None or owner == source or not Path(owner).is_absolute():
        return key
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{key[:91]}-{digest}"


def jsonl_files(paths: Iterable[str | Path]) -> list[Path]:
    """The ``.jsonl`` files named by ``paths`` (folders searched recursively), sorted."""
    out: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            out.update(f for f in p.rglob("*" + SUFFIX) if f.is_file())
        elif p.suffix == SUFFIX and p.exists():
            out.add(p)
    return sorted(out)


def follow_session_key(path: Path, roots: Iterable[Path]) -> str:
    """The session a followed file journals to (README "Follow live agent logs").

    A file under a followed folder: its path under the folder that holds it, the folders
    joined by ``.`` (``projects/-work-repo/live.jsonl`` followed as ``projects`` ->
    ``work-repo.live``, so same-named files in different folders are different sessions);
    a file at the top of a followed folder, its name (``live``). A file named directly:
    its key from :func:`direct_file_keys` over ``roots``: its name, or with its parent
    folders when another file named directly has the same name. Characters a session key
    cannot hold become ``-``; a key over 100 characters keeps its end and a hash of the
    whole path.

    Args:
        path: the file (relative or absolute).
        roots: every path given to ``follow`` (files and folders), in the order given.

    Returns:
        A valid session key, the same for the same file and arguments on every pass.
    """
    roots = list(roots)
    relative = None
    absolute = Path(path).resolve()
    for root in roots:
        try:  # both made absolute: a folder named relatively, files reported absolutely
            relative = absolute.relative_to(Path(root).resolve())
            break
        except ValueError:
            continue
    if relative is not None and not relative.parts:  # the file itself was named
        return direct_file_keys(roots).get(absolute, default_session_key(path))
    if relative is None or len(relative.parts) < 2:
        return default_session_key(path)
    return _joined_key([*relative.parts[:-1], default_session_key(path)], str(relative))


def direct_file_keys(roots: Iterable[str | Path]) -> dict[Path, str]:
    """The session keys of the files named directly among ``roots`` (not through a folder).

    Each file keeps its name (``live.jsonl`` -> ``live``) unless another file named directly
    has the same one: then each of those is named with as many of its parent folders as
    tell them apart, joined by ``.`` as a folder's files are (``a/live.jsonl b/live.jsonl``
    -> ``a.live``, ``b.live``; ``x/a/live.jsonl y/a/live.jsonl`` -> ``x.a.live``,
    ``y.a.live``). The folders are those of the absolute path, so a file named relatively
    and absolutely gets one key, and the keys depend only on the arguments and the working
    folder, never on the order or on what else appears later.

    Args:
        roots: the paths given to ``follow``; folders and files not ending in ``.jsonl``
            (which are not followed) are skipped.

    Returns:
        ``{absolute path: session key}`` for each file named directly.
    """
    groups: dict[str, set[Path]] = {}
    for root in map(Path, roots):
        if root.suffix == SUFFIX and not root.is_dir():
            groups.setdefault(default_session_key(root), set()).add(root.resolve())
    keys: dict[Path, str] = {}
    for name, files in groups.items():
        if len(files) == 1:
            keys[next(iter(files))] = name
            continue
        folders = {f: f.parts[1:-1] for f in files}  # without the anchor ("/")
        depth, longest = 1, max(map(len, folders.values()))
        while depth < longest and len({d[-depth:] for d in folders.values()}) < len(files):
            depth += 1
        named = {f: _joined_key([*d[-depth:], name], str(f)) for f, d in folders.items()}
        taken = Counter(named.values())
        for f, key in named.items():  # names that read alike in one folder (Live, live)
            keys[f] = key if taken[key] == 1 else _joined_key([_digest(str(f)), key], str(f))
    return keys


def _joined_key(parts: list[str], whole: str) -> str:
    """``parts`` joined by ``.`` as a session key: characters a key cannot hold become
    ``-``; over 100 characters, the end is kept behind 12 hex digits of the sha256 of
    ``whole`` (the path it names)."""
    key = re.sub(r"[^A-Za-z0-9._-]", "-", ".".join(parts)).lstrip("._-") or "session"
    if len(key) > 100:
        key = f"{_digest(whole)}-{key[-87:]}"
    return key


def _digest(whole: str) -> str:
    """12 hex digits of the sha256 of a path (keeps long or alike keys apart)."""
    return hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def follow_paths(
    *,
    paths: Iterable[str | Path],
    tenant: str = "default",
    fmt: str | None = None,
    report: Callable[[str], None] = print,
    once: bool = False,
    stop: threading.Event | None = None,
) -> None:
    """Follow every ``.jsonl`` file under ``paths``: one pass now, then on each change.

    Each file is its own session, named by its path under the followed folder, or by its
    name (with its parent folders when files named directly share a name)
    (:func:`follow_session_key`). Each pass over a file reads only what was written since
    the last one (:class:`FollowState`). A malformed complete line is reported once (file, line number, why) and
    skipped (:func:`follow_file`); a file that cannot be read at all is reported and retried
    on its next change; the others carry on.

    Args:
        once: one pass, no watching (a cron job, a test).
        stop: set it to end the watch (tests); Ctrl-C ends it too.
    """
    paths = [Path(p) for p in paths]
    states: dict[Path, FollowState] = {}

    def run(files: Iterable[Path]) -> None:
        for f in files:
            try:
                result = follow_file(
                    path=f,
                    tenant=tenant,
                    fmt=fmt,
                    session=follow_session_key(f, paths),
                    state=states.setdefault(f, FollowState()),
                )
            except (FormatError, UnicodeDecodeError, OSError) as exc:
                report(f"{f}: not followed this time: {exc}")
                continue
            for warning in result.warnings():
                report(warning)
            if result.appended or result.branched_from:
                report(result.line())

    if once:
        run(jsonl_files(paths))
        return
    from watchfiles import watch

    # the first pass runs once the watcher is up (its first yield), so nothing written
    # between the pass and the start of the watch is missed
    scanned = False
    for changes in watch(
        *paths, stop_event=stop, debounce=200, step=50, yield_on_timeout=True, rust_timeout=500
    ):
        if not scanned:
            scanned = True
            run(jsonl_files(paths))
            continue
        changed = sorted({Path(p) for _, p in changes if p.endswith(SUFFIX)})
        run(f for f in changed if f.is_file())
