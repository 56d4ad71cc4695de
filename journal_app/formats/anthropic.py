"""Importer for anthropic-messages (stub: not written yet)."""

from __future__ import annotations

from journal_app.formats.base import FormatError, ParsedSession
from journal_app.formats.source import Source

NAME = "anthropic-messages"


def detect(source: Source) -> bool:
    """Return True when ``source`` looks like anthropic-messages."""
    return False


def parse(source: Source) -> ParsedSession:
    """Parse ``source`` into a ParsedSession."""
    raise FormatError(source.path, "", "", "importer anthropic-messages is not written yet")
