"""Importer for swe-agent-traj (stub: not written yet)."""

from __future__ import annotations

from journal_app.formats.base import FormatError, ParsedSession
from journal_app.formats.source import Source

NAME = "swe-agent-traj"


def detect(source: Source) -> bool:
    """Return True when ``source`` looks like swe-agent-traj."""
    return False


def parse(source: Source) -> ParsedSession:
    """Parse ``source`` into a ParsedSession."""
    raise FormatError(source.path, "", "", "importer swe-agent-traj is not written yet")
