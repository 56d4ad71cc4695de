"""Transcript importers, one module per source format (DESIGN.md section 4).

Pure package. Each format module defines ``NAME``, ``detect(source) -> bool`` and
``parse(source) -> ParsedSession`` (see :mod:`journal_app.formats.base` for the contract).
:func:`parse_path` reads a path once, detects its format (or uses the one given) and
returns the parsed session after checking tool-call pairing.
"""

from __future__ import annotations

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
from journal_app.formats.base import FormatError, ParsedEntry, ParsedSession, check_pairing
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
]


def detect_format(source: Source) -> str:
    """Return the ``NAME`` of the first importer whose ``detect`` accepts ``source``.

    Raises:
        FormatError: no importer recognises it (the message lists the known formats).
    """
    for module in _MODULES:
        if module.detect(source):
            return module.NAME
    raise FormatError(
        source.path,
        "",
        "",
        "unknown transcript format; name one with --format (known: " + ", ".join(FORMATS) + ")",
    )


def parse_path(path: str | Path, fmt: str | None = None) -> ParsedSession:
    """Read, detect and parse one source.

    Args:
        path: a transcript file, or an OpenCode export folder.
        fmt: a name from :data:`FORMATS`, or ``None`` to detect.

    Returns:
        The parsed session, with every tool result paired to an earlier call.

    Raises:
        FormatError: unreadable input, unknown format, a malformed record, a tool result
            without its call. Nothing is returned in part.
    """
    if fmt is not None and fmt not in FORMATS:
        raise FormatError(
            path, "", "format", f"unknown format {fmt!r} (known: {', '.join(FORMATS)})"
        )
    source = read_source(path)
    name = fmt or detect_format(source)
    try:
        session = FORMATS[name].parse(source)
    except RecursionError:
        raise FormatError(path, "", "", "nested too deeply for the importer to follow") from None
    if not any(e.kind in ("message", "tool_call") for e in session.entries):
        hint = ""
        if fmt is not None:
            try:
                hint = f"; it looks like {detect_format(source)}, not {fmt}"
            except FormatError:
                hint = f"; is it really {fmt}?"
        raise FormatError(path, "", "", "the transcript holds no messages or tool calls" + hint)
    check_pairing(path, session.entries)
    return session
