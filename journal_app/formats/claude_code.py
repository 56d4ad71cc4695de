"""Importer for claude-code-jsonl (stub: not written yet)."""

from __future__ import annotations

from journal_app.formats.base import FormatError, ParsedSession
from journal_app.formats.source import Source

NAME = "claude-code-jsonl"


def detect(source: Source) -> bool:
    """Return True when ``source`` looks like claude-code-jsonl."""
    return False


def parse(source: Source) -> ParsedSession:
    """Parse ``source`` into a ParsedSession."""
    raise FormatError(source.path, "", "", "importer claude-code-jsonl is not written yet")
