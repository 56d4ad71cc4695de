"""Importer for opencode-export (stub: not written yet)."""

from __future__ import annotations

from journal_app.formats.base import FormatError, ParsedSession
from journal_app.formats.source import Source

NAME = "opencode-export"


def detect(source: Source) -> bool:
    """Return True when ``source`` looks like opencode-export."""
    return False


def parse(source: Source) -> ParsedSession:
    """Parse ``source`` into a ParsedSession."""
    raise FormatError(source.path, "", "", "importer opencode-export is not written yet")
