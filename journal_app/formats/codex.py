"""Importer for codex-rollout-jsonl (stub: not written yet)."""

from __future__ import annotations

from journal_app.formats.base import FormatError, ParsedSession
from journal_app.formats.source import Source

NAME = "codex-rollout-jsonl"


def detect(source: Source) -> bool:
    """Return True when ``source`` looks like codex-rollout-jsonl."""
    return False


def parse(source: Source) -> ParsedSession:
    """Parse ``source`` into a ParsedSession."""
    raise FormatError(source.path, "", "", "importer codex-rollout-jsonl is not written yet")
