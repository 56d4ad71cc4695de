"""Session titles read off a parsed source: a chat's first user text, a benchmark task's
issue line, an agent log's first human request. Pure; the importers call these.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from journal_app.formats.base import ParsedEntry

_TASK_MARKERS = ("<issue_description>", "<pr_description>", "<issue>", "ISSUE:")
TITLE_CHARS = 80


def _clipped(line: str) -> str:
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


def short_title(text: str, limit: int = TITLE_CHARS) -> str:
    """Return ``text`` with whitespace collapsed, cut to ``limit`` characters (``…`` if cut,
    trailing spaces before it dropped): the title of a chat-shaped log's first user text."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def task_title(text: str) -> str:
    """A short form of a benchmark task prompt: the first real line after an issue marker.

    SWE-agent, mini-swe-agent and OpenHands wrap the issue in ``<issue>`` /
    ``<pr_description>`` / ``<issue_description>`` blocks (or follow ``ISSUE:``); lines that
    are only a tag or end with ``:`` are skipped. At most 80 characters (``…`` when cut).
    """
    for marker in _TASK_MARKERS:
        pos = text.find(marker)
        if pos >= 0:
            text = text[pos + len(marker) :]
            break
    for line in text.splitlines():
        line = " ".join(line.split())
        if not line or re.fullmatch(r"</?[\w-]+>", line) or line.endswith(":"):
            continue
        return _clipped(line)
    return ""


def request_title(
    entries: Iterable[ParsedEntry], *, marker: str = "", skip: tuple[str, ...] = ()
) -> str:
    """The first human request of an agent log, as a session title (``""`` when none).

    The first user message that is neither derived nor injected (``metadata["injected"]``)
    whose text, taken after ``marker`` when it holds it and whitespace-collapsed, is not
    empty and starts with none of ``skip``. At most 80 characters (``…`` when cut).
    Codex passes its IDE marker (``## My request for Codex:``), Claude Code the prefixes
    of its command and interrupt records.
    """
    for e in entries:
        if e.kind != "message" or e.role != "user" or e.derived or e.metadata.get("injected"):
            continue
        text = e.content.get("text", "")
        if marker and marker in text:
            text = text.split(marker, 1)[1]
        text = " ".join(text.split())
        if text and not text.startswith(skip):
            return _clipped(text)
    return ""
