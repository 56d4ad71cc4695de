"""Tool-call arguments laid out for reading (pure: no Django; README, "The timeline").

A call's arguments are stored as the source gave them (often one JSON string with escaped
newlines). :func:`call_parts` turns them into labelled parts: shell commands as code,
patches and diffs as diffs (each line marked added, removed or hunk), other values as
pretty-printed JSON or text, and a value longer than :data:`FOLD_CHARS` characters or
:data:`FOLD_LINES` lines marked ``folded`` (shown collapsed, expandable). Display only: the
stored bytes and their hashes are never touched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: a value over this many characters, or lines, is folded (expand to read)
FOLD_CHARS = 400
FOLD_LINES = 8
#: at most this many characters of one value are laid out; the rest is on the entry page
SHOWN_CHARS = 20_000

_SHELL_KEYS = {"command", "cmd", "script", "shell", "bash"}
_SHELL_TOOLS = {"shell", "bash", "exec", "exec_command", "run", "terminal", "local_shell"}
_PATCH_KEYS = {"patch", "diff", "input"}


@dataclass
class Part:
    """One argument as shown: ``label`` (the key, ``""`` for the whole), ``kind`` (``shell``,
    ``diff``, ``json`` or ``text``), ``text``, ``lines`` (diffs: ``(mark, line)`` with mark
    ``add``, ``del``, ``hunk``, ``meta`` or ``""``), ``folded`` and ``more`` (characters
    beyond :data:`SHOWN_CHARS`)."""

    label: str
    kind: str
    text: str
    lines: list[tuple[str, str]] = field(default_factory=list)
    folded: bool = False
    more: int = 0


def is_diff(text: str) -> bool:
    """A unified diff or an ``apply_patch`` envelope."""
    head = text.lstrip()[:200]
    if head.startswith(("*** Begin Patch", "diff --git", "Index: ")):
        return True
    return ("\n+++ " in text and ("\n--- " in text or text.startswith("--- "))) or (
        "\n@@ " in text and text.count("\n+") + text.count("\n-") > 0
    )


def _diff_lines(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.split("\n"):
        if line.startswith(("+++", "---", "***", "diff ", "index ")):
            mark = "meta"
        elif line.startswith("@@"):
            mark = "hunk"
        elif line.startswith("+"):
            mark = "add"
        elif line.startswith("-"):
            mark = "del"
        else:
            mark = ""
        out.append((mark, line))
    return out


def _part(label: str, kind: str, text: str) -> Part:
    more = max(0, len(text) - SHOWN_CHARS)
    text = text[:SHOWN_CHARS]
    folded = len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES
    lines = _diff_lines(text) if kind == "diff" else []
    return Part(label, kind, text, lines, folded, more)


def _shell_text(value: Any) -> str | None:
    """A shell command as one string: a string, or an argv list (``["bash", "-lc", S]``
    gives ``S``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        if len(value) == 3 and value[1] in ("-c", "-lc") and value[0].endswith("sh"):
            return str(value[2])
        return " ".join(value)
    return None


def _value_part(tool: str, key: str, value: Any) -> Part:
    if key.lower() in _SHELL_KEYS or (not key and tool.lower() in _SHELL_TOOLS):
        shell = _shell_text(value)
        if shell is not None:
            return _part(key, "shell", shell)
    if isinstance(value, str):
        if (key.lower() in _PATCH_KEYS or not key or "\n" in value) and is_diff(value):
            return _part(key, "diff", value)
        return _part(key, "text", value)
    return _part(key, "json", json.dumps(value, ensure_ascii=False, indent=2))


def call_parts(content: dict[str, Any]) -> list[Part]:
    """The parts of a tool call's content (``{"name", "arguments"}``, arguments a dict or a
    JSON string or plain text), in the arguments' order; ``[]`` for no arguments."""
    tool = str(content.get("name") or "")
    args = content.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return [_value_part(tool, "", args)] if args else []
    if isinstance(args, dict):
        return [_value_part(tool, str(k), v) for k, v in args.items()]
    if args in (None, "", [], {}):
        return []
    return [_value_part(tool, "", args)]


def with_text(part: Part, text: str) -> Part:
    """``part`` with its text replaced (e.g. filtered for secrets), its diff lines redone."""
    lines = _diff_lines(text) if part.kind == "diff" else []
    return Part(part.label, part.kind, text, lines, part.folded, part.more)
