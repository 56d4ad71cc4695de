"""Importer for openai-chat (stub: not written yet)."""

from __future__ import annotations

from journal_app.formats.base import FormatError, ParsedSession
from journal_app.formats.source import Source

NAME = "openai-chat"


def detect(source: Source) -> bool:
    """Return True when ``source`` looks like openai-chat."""
    return False


def parse(source: Source) -> ParsedSession:
    """Parse ``source`` into a ParsedSession."""
    raise FormatError(source.path, "", "", "importer openai-chat is not written yet")
