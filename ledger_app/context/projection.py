"""Projection and shrinking of tool results (docs/design.md section 6, steps 2 and 3; seed 001).

Pure module: no Django, no database. An oversized tool result is shown as its artifact
receipt (:func:`receipt_text`; a second result with the same content points back to the
first, :func:`receipt_again`); an old, already-consumed result is shrunk to a deterministic
excerpt that says how much was cut and names the entry holding the whole output
(:func:`shrink_text`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from journal_app.artifacts import (
    PREVIEW_HEAD_LINES,
    PREVIEW_MAX_CHARS,
    PREVIEW_TAIL_LINES,
    media_type_of,
)
from ledger_app.context.entry_text import short
from ledger_app.entry_view import EntryView
from ledger_app.validation import RECEIPT_MARK


def receipt_text(receipt: Mapping[str, Any], seq: int) -> str:
    """The text standing for a tool result (at ``seq``) that was moved to the artifact store:
    the receipt's reference, media type, original size, content hash, source tool, preview."""
    size = receipt.get("original_size") or {}
    return "\n".join(
        [
            f"{RECEIPT_MARK}: the result of this call (seq {seq}) is stored outside the context; "
            "ask for the reference to read it in full]",
            f"reference: {receipt.get('reference', '')}",
            f"media_type: {receipt.get('media_type', '')}",
            f"original_size: {size.get('tokens', '?')} tokens, {size.get('bytes', '?')} bytes",
            f"content_hash: {receipt.get('content_hash', '')}",
            f"source_tool: {receipt.get('source_tool', '')}",
            "preview:",
            str(receipt.get("preview", "")),
        ]
    )


def receipt_again(receipt: Mapping[str, Any], seq: int, first_seq: int) -> str:
    """A short receipt for a result whose content was already shown as a receipt at
    ``first_seq`` (seed 001: no artifact A -> B -> C loop)."""
    return "\n".join(
        [
            f"{RECEIPT_MARK}: the result of this call (seq {seq}) is the same content as the "
            f"result at seq {first_seq}, whose receipt is above]",
            f"reference: {receipt.get('reference', '')}",
            f"content_hash: {receipt.get('content_hash', '')}",
        ]
    )


_ERROR_WORD = re.compile(
    r"(?i)\b(error|exception|traceback|failed|failure|fatal|panic|denied|not found|FAIL)\b"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _cut(line: str, width: int = 200) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def excerpt(text: str) -> str:
    """The sections of :func:`journal_app.artifacts.make_preview` (JSON keys, 8 head lines,
    up to 8 error lines from the middle, 6 tail lines, a size footer), found with a few
    scans of the whole text instead of a pass per line, so shrinking a long output is cheap.
    Bounded to ``PREVIEW_MAX_CHARS`` characters."""
    parts: list[str] = []
    mtype = media_type_of(text)
    if mtype == "application/json":
        value = json.loads(text)
        if isinstance(value, dict):
            parts.append("keys: " + ", ".join(list(value)[:40]))
        elif isinstance(value, list):
            parts.append(f"array of {len(value)} items")
    clean = _ANSI.sub("", text) if "\x1b" in text else text
    lines = clean.count("\n") + 1 - (1 if clean.endswith("\n") else 0)
    head_lines = clean.split("\n", PREVIEW_HEAD_LINES)[:PREVIEW_HEAD_LINES]
    head_end = sum(len(x) + 1 for x in head_lines)
    tail_lines = (
        clean.rstrip("\n").rsplit("\n", PREVIEW_TAIL_LINES)[-PREVIEW_TAIL_LINES:]
        if lines > PREVIEW_HEAD_LINES
        else []
    )
    tail_start = len(clean) - sum(len(x) + 1 for x in tail_lines) if tail_lines else len(clean)
    errors: list[str] = []
    pos = head_end
    while len(errors) < PREVIEW_HEAD_LINES and pos < tail_start:
        m = _ERROR_WORD.search(clean, pos, tail_start)
        if m is None:
            break
        start = clean.rfind("\n", 0, m.start()) + 1
        end = clean.find("\n", m.end())
        end = len(clean) if end < 0 else end
        errors.append(clean[start:end])
        pos = end + 1
    parts.append("head:\n" + "\n".join(_cut(x) for x in head_lines))
    if errors:
        parts.append("errors:\n" + "\n".join(_cut(x) for x in errors))
    if tail_lines:
        parts.append("tail:\n" + "\n".join(_cut(x) for x in tail_lines))
    parts.append(f"[{lines} lines, {len(text)} characters]")
    out = "\n".join(parts)
    return out if len(out) <= PREVIEW_MAX_CHARS else out[: PREVIEW_MAX_CHARS - 1] + "…"


def shrink_text(text: str, entry: EntryView, original_tokens: int) -> str:
    """A deterministic excerpt of a tool output (head, error lines, tail; JSON keys) that
    states how much was cut and names the journal entry holding the whole output."""
    preview = excerpt(text)
    cut = max(0, len(text) - len(preview))
    return (
        f"[shrunk by the context builder: about {cut} of {len(text)} characters cut "
        f"({original_tokens} tokens originally); the full output is journal entry "
        f"{short(entry.entry_hash)} (seq {entry.seq})]\n{preview}"
    )
