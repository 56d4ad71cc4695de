"""Artifact receipts: media type and preview of an oversized tool result (pure).

docs/design.md section 4 ("Artifacts") and seed 001: the receipt carries a *high-signal* preview,
not a summary: the head and tail of the text, the lines that look like errors, and for JSON
the top-level keys. Storage and deduplication are in :mod:`journal_app.services`.
"""

from __future__ import annotations

import json
import re

PREVIEW_HEAD_LINES = 8
PREVIEW_TAIL_LINES = 6
PREVIEW_ERROR_LINES = 8
PREVIEW_MAX_CHARS = 1600

# (?=[eftpdn]): every word starts with one of these letters (any case); the guard lets the
# scan skip other positions without trying ten alternatives (about twice as fast, the same
# matches; tests/journal_app/test_artifact_storage.py compares the two)
_ERROR_LINE = re.compile(
    r"(?i)\b(?=[eftpdn])"
    r"(error|exception|traceback|failed|failure|fatal|panic|denied|not found|FAIL)\b"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def media_type_of(text: str) -> str:
    """``application/json`` when ``text`` parses as a JSON object or array, else ``text/plain``."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            json.loads(text)
            return "application/json"
        except ValueError:
            pass
    return "text/plain"


def _clip(line: str, width: int = 200) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def _error_lines(lines: list[str], limit: int) -> list[str]:
    """The first ``limit`` of ``lines`` that look like errors (:data:`_ERROR_LINE`), found
    with one scan of the joined text rather than one search per line (the same lines: a
    match never spans a line break, and each matching line is taken once, in order)."""
    if not lines or limit <= 0:
        return []
    text = "\n".join(lines)
    starts: list[int] = []
    found: list[str] = []
    for m in _ERROR_LINE.finditer(text):
        begin = text.rfind("\n", 0, m.start()) + 1
        if starts and starts[-1] == begin:
            continue
        end = text.find("\n", m.end())
        starts.append(begin)
        found.append(text[begin : end if end >= 0 else len(text)])
        if len(found) == limit:
            break
    return found


def make_preview(text: str, media_type: str) -> str:
    """A bounded excerpt (at most ``PREVIEW_MAX_CHARS`` characters) of ``text``.

    Sections, each only when it adds something: ``keys:`` (JSON top-level keys or the
    length of a top-level array), ``head:``, ``errors:`` (up to 8 error-looking lines from
    the middle), ``tail:``, and a ``[N lines, M characters]`` footer.
    """
    parts: list[str] = []
    if media_type == "application/json":
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            parts.append("keys: " + ", ".join(list(value)[:40]))
        elif isinstance(value, list):
            parts.append(f"array of {len(value)} items")
    lines = _ANSI.sub("", text).splitlines()
    head = lines[:PREVIEW_HEAD_LINES]
    tail = lines[-PREVIEW_TAIL_LINES:] if len(lines) > PREVIEW_HEAD_LINES else []
    middle = lines[PREVIEW_HEAD_LINES : max(PREVIEW_HEAD_LINES, len(lines) - PREVIEW_TAIL_LINES)]
    errors = _error_lines(middle, PREVIEW_ERROR_LINES)
    parts.append("head:\n" + "\n".join(_clip(x) for x in head))
    if errors:
        parts.append("errors:\n" + "\n".join(_clip(x) for x in errors))
    if tail:
        parts.append("tail:\n" + "\n".join(_clip(x) for x in tail))
    parts.append(f"[{len(lines)} lines, {len(text)} characters]")
    preview = "\n".join(parts)
    if len(preview) > PREVIEW_MAX_CHARS:
        preview = preview[: PREVIEW_MAX_CHARS - 1] + "…"
    return preview
