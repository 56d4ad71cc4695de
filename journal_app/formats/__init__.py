"""Transcript importers, one module per source format (docs/design.md section 4).

Pure package. Each format module defines ``NAME``, ``detect(source) -> bool`` and
``parse(source) -> ParsedSession`` (see :mod:`journal_app.formats.base` for the contract);
importers that can read a large source at constant memory also define ``stream(source)``
(an :data:`~journal_app.formats.base.EntryStream`), and their ``parse`` collects it, so
both paths yield the same entries. :func:`stream_path` opens a path, detects its format (or
uses the one given) and streams the entries, checking tool-call pairing as they pass;
:func:`parse_path` collects that stream into a whole session.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from journal_app.formats import (
    anthropic,
    atif,
    claude_code,
    codex,
    ledgerkeep_export,
    mini_swe_agent,
    openai_chat,
    openai_responses,
    opencode,
    openhands,
    swe_agent,
)
from journal_app.formats.base import (
    EntryStream,
    FormatError,
    PairingCheck,
    ParsedEntry,
    ParsedSession,
    collect,
)
from journal_app.formats.source import Source, read_source

# Detection order matters: the more specific shapes first, the generic message lists last.
_MODULES: tuple[ModuleType, ...] = (
    ledgerkeep_export,
    opencode,
    claude_code,
    codex,
    openhands,
    swe_agent,
    mini_swe_agent,
    atif,
    openai_responses,
    anthropic,
    openai_chat,
)
FORMATS: dict[str, ModuleType] = {m.NAME: m for m in _MODULES}

__all__ = [
    "FORMATS",
    "FormatError",
    "ParsedEntry",
    "ParsedSession",
    "Source",
    "detect_format",
    "parse_path",
    "stream_path",
]


def detect_format(source: Source) -> str:
    """Return the ``NAME`` of the first importer whose ``detect`` accepts ``source``.

    A streamed source is detected from its bounded preview (:meth:`Source.detection_view`).

    Raises:
        FormatError: no importer recognises it (the message lists the known formats).
    """
    view = source.detection_view()
    for module in _MODULES:
        if module.detect(view):
            return str(module.NAME)
    raise FormatError(
        source.path,
        "",
        "",
        "unknown transcript format; name one with --format (known: " + ", ".join(FORMATS) + ")",
    )


def _whole(module: ModuleType, source: Source) -> EntryStream:
    """The stream of an importer that only parses whole sources (``parse``)."""
    session: ParsedSession = module.parse(source.load())
    entries, session.entries = session.entries, []
    yield from entries
    return session


def stream_path(
    path: str | Path, fmt: str | None = None, progress: Callable[[int], None] | None = None
) -> tuple[Source, str, EntryStream]:
    """Open, detect and stream one source (constant memory).

    Args:
        path: a transcript file, or an OpenCode export folder.
        fmt: a name from :data:`FORMATS`, or ``None`` to detect.
        progress: ``progress(bytes_read)`` while a large file is read.

    Returns:
        ``(source, format name, stream)``: ``stream`` yields the entries in order, each
        tool result checked against the calls before it, and returns the session's other
        fields (``ParsedSession`` with ``entries=[]``) when exhausted. Importers with a
        ``stream(source)`` function read the file as they go; the others parse it whole.

    Raises:
        FormatError: unreadable input, unknown format (at once); a malformed record, a tool
            result without its call, a source with no messages or tool calls (while or
            after streaming: the caller's transaction must undo what it wrote).
    """
    if fmt is not None and fmt not in FORMATS:
        raise FormatError(
            path, "", "format", f"unknown format {fmt!r} (known: {', '.join(FORMATS)})"
        )
    source = read_source(path, progress)
    name = fmt or detect_format(source)
    return source, name, _checked(source, name, fmt)


def _checked(source: Source, name: str, fmt: str | None) -> EntryStream:
    module = FORMATS[name]
    stream = module.stream(source) if hasattr(module, "stream") else _whole(module, source)
    pairing = PairingCheck(source.path)
    spoken = False
    try:
        while True:
            try:
                entry = next(stream)
            except StopIteration as done:
                session: ParsedSession = done.value
                break
            spoken = spoken or entry.kind in ("message", "tool_call")
            pairing.see(entry)
            yield entry
    except RecursionError:
        raise FormatError(
            source.path, "", "", "nested too deeply for the importer to follow"
        ) from None
    if not spoken:
        hint = ""
        if fmt is not None:
            try:
                hint = f"; it looks like {detect_format(source)}, not {fmt}"
            except FormatError:
                hint = f"; is it really {fmt}?"
        raise FormatError(
            source.path, "", "", "the transcript holds no messages or tool calls" + hint
        )
    return session


def parse_path(path: str | Path, fmt: str | None = None) -> ParsedSession:
    """Read, detect and parse one source whole (:func:`stream_path`, collected).

    Args:
        path: a transcript file, or an OpenCode export folder.
        fmt: a name from :data:`FORMATS`, or ``None`` to detect.

    Returns:
        The parsed session, with every tool result paired to an earlier call.

    Raises:
        FormatError: unreadable input, unknown format, a malformed record, a tool result
            without its call. Nothing is returned in part.
    """
    _, _, stream = stream_path(path, fmt)
    return collect(stream)
