"""Importer for atif-trajectory (stub: not written yet)."""

from __future__ import annotations

from journal_app.formats.base import FormatError, ParsedSession
from journal_app.formats.source import Source

NAME = "atif-trajectory"


def detect(source: Source) -> bool:
    """Return True when ``source`` looks like atif-trajectory."""
    return False


def parse(source: Source) -> ParsedSession:
    """Parse ``source`` into a ParsedSession."""
    raise FormatError(source.path, "", "", "importer atif-trajectory is not written yet")
