"""Live follow of growing agent logs: Claude Code and Codex JSONL files (issue 14).

:func:`follow_file` reads a file's **complete** lines (a half-written last line waits for its
newline), parses them with the journal's own importer (format detected or given), and places
the items in the journal with :func:`proxy_app.services.conversation_record`, the proxy's
matching: only entries not yet journaled are appended, so running it again, or after a
restart, appends nothing twice and needs no state of its own. A file that was rewritten (an
earlier record changed or removed, not appended to) diverges from the journal: it is imported
as a new branch at the divergence point and reported, never a rewrite. Folds follow the same
threshold as every append (the automatic fold scheduled by ``ledger_app.receivers``).

:func:`follow_paths` watches files and folders (a Claude Code projects folder, a Codex
sessions folder) with ``watchfiles`` and calls :func:`follow_file` for each ``.jsonl`` file
that appears or grows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from journal_app.formats import FORMATS, FormatError, detect_format
from journal_app.formats.base import check_pairing
from journal_app.formats.source import Source, parse_jsonl
from journal_app.services import default_session_key, tenant_ensure
from proxy_app.services import ProxyScope, conversation_record

SUFFIX = ".jsonl"


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
    """

    path: Path
    session: str
    branch: str = ""
    appended: int = 0
    waiting: int = 0
    branched_from: str | None = None
    skipped: str = ""

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


def follow_file(
    *,
    path: str | Path,
    tenant: str = "default",
    session: str | None = None,
    lane: str = "main",
    fmt: str | None = None,
) -> FollowResult:
    """Journal the complete records of ``path`` that are not journaled yet.

    Args:
        path: a Claude Code session or Codex rollout JSONL file (any JSONL importer's format).
        tenant: the tenant slug (created on first use).
        session: the session key (default: from the file name, as ``import_journal``).
        lane: the lane.
        fmt: a format name, or ``None`` to detect it.

    Returns:
        :class:`FollowResult`. Idempotent: a second pass over an unchanged file appends 0.

    Raises:
        FormatError: a complete line that is not JSON, or a record the importer refuses
            (names the file, line and field); nothing of this pass is written.
    """
    path = Path(path)
    key = session or default_session_key(path)
    raw = path.read_bytes()
    end = raw.rfind(b"\n") + 1
    result = FollowResult(path=path, session=key, waiting=len(raw) - end)
    text = raw[:end].decode("utf-8", errors="strict").removeprefix("\ufeff")
    if not text.strip():
        result.skipped = "no complete record yet"
        return result
    source = Source(path=path, kind="jsonl", data=parse_jsonl(path, text))
    name = fmt or detect_format(source)
    if name not in FORMATS:
        raise FormatError(path, "", "format", f"unknown format {name!r}")
    parsed = FORMATS[name].parse(source)
    if not any(e.kind in ("message", "tool_call") for e in parsed.entries):
        result.skipped = "no messages yet"
        return result
    check_pairing(path, parsed.entries)
    scope = ProxyScope(tenant_ensure(slug=tenant), key, lane, None)
    recorded = conversation_record(
        scope=scope, items=parsed.entries, title=parsed.title, source_format=parsed.format
    )
    result.branch = recorded.journal.branch
    result.appended = recorded.appended
    result.branched_from = recorded.branched_from
    return result


def jsonl_files(paths: Iterable[str | Path]) -> list[Path]:
    """The ``.jsonl`` files named by ``paths`` (folders searched recursively), sorted."""
    out: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            out.update(f for f in p.rglob("*" + SUFFIX) if f.is_file())
        elif p.suffix == SUFFIX and p.exists():
            out.add(p)
    return sorted(out)


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

    Each file is its own session (named from the file). A file that fails to parse is
    reported and retried on its next change; the others carry on.

    Args:
        once: one pass, no watching (a cron job, a test).
        stop: set it to end the watch (tests); Ctrl-C ends it too.
    """
    paths = [Path(p) for p in paths]

    def run(files: Iterable[Path]) -> None:
        for f in files:
            try:
                result = follow_file(path=f, tenant=tenant, fmt=fmt)
            except (FormatError, UnicodeDecodeError, OSError) as exc:
                report(f"{f}: not followed this time: {exc}")
                continue
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
