"""Importer for openhands-events (stub: not written yet)."""

from __future__ import annotations

from journal_app.formats.base import FormatError, ParsedSession
from journal_app.formats.source import Source

NAME = "openhands-events"


def detect(source: Source) -> bool:
    """Return True when ``source`` looks like openhands-events."""
    return False


def parse(source: Source) -> ParsedSession:
    """Parse ``source`` into a ParsedSession."""
    raise FormatError(source.path, "", "", "importer openhands-events is not written yet")
