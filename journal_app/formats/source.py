"""Reading a transcript source from disk with errors that name file, line and field.

Pure module. :func:`read_source` decodes a path once into a :class:`Source` that every
importer's ``detect`` and ``parse`` receive, so a large file is parsed a single time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from journal_app.formats.base import FormatError


@dataclass
class Source:
    """A decoded source.

    * ``kind="json"``: ``data`` is the parsed JSON value of the whole file.
    * ``kind="jsonl"``: ``data`` is ``[(line_number, value), ...]`` (1-based, blank lines skipped).
    * ``kind="dir"``: ``data`` is ``None``; the importer reads the folder's files itself.
    """

    path: Path
    kind: Literal["json", "jsonl", "dir"]
    data: Any


def _decode(path: Path, raw: bytes) -> str:
    if not raw.strip():
        raise FormatError(path, "", "", "file is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise FormatError(
            path, f"line {line}", "", f"not valid UTF-8 (byte offset {exc.start})"
        ) from None
    return text.removeprefix("\ufeff")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str) -> Any:
    """``json.loads`` that refuses NaN/Infinity (they have no RFC 8785 form) and nesting
    deeper than Python's recursion limit (raised as ``ValueError``, not ``RecursionError``)."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply (more levels than the parser can follow)") from None


def parse_jsonl(path: Path, text: str) -> list[tuple[int, Any]]:
    """Parse JSON Lines text; raise :class:`FormatError` naming the first bad line."""
    rows: list[tuple[int, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, loads(line)))
        except ValueError as exc:
            raise FormatError(path, f"line {number}", "", f"not valid JSON ({exc})") from None
    if not rows:
        raise FormatError(path, "", "", "file is empty")
    return rows


def read_json_file(path: Path) -> Any:
    """Read one JSON file (used by folder importers); errors name the file and line."""
    text = _decode(path, path.read_bytes())
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(
            path, f"line {exc.lineno}", "", f"not valid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    except ValueError as exc:
        raise FormatError(path, "", "", f"not valid JSON ({exc})") from None


def read_source(path: str | Path) -> Source:
    """Decode ``path`` into a :class:`Source`.

    ``.jsonl`` files are read as JSON Lines; other files as one JSON document, falling back
    to JSON Lines when the text holds several JSON values one per line.

    Raises:
        FormatError: missing path, empty file, non-UTF-8 bytes, truncated or invalid JSON,
            a line of a JSONL file that is not JSON.
    """
    path = Path(path)
    if path.is_dir():
        return Source(path=path, kind="dir", data=None)
    if not path.exists():
        raise FormatError(path, "", "", "no such file or folder")
    text = _decode(path, path.read_bytes())
    if path.suffix == ".jsonl":
        return Source(path=path, kind="jsonl", data=parse_jsonl(path, text))
    try:
        return Source(path=path, kind="json", data=loads(text))
    except json.JSONDecodeError as exc:
        first = text.lstrip().splitlines()[0] if text.strip() else ""
        if exc.msg == "Extra data" and first.startswith("{"):
            return Source(path=path, kind="jsonl", data=parse_jsonl(path, text))
        where = f"line {exc.lineno}"
        if exc.pos >= len(text.rstrip()):
            raise FormatError(
                path, where, "", "truncated JSON (ends before the value is closed)"
            ) from None
        raise FormatError(path, where, "", f"not valid JSON ({exc.msg})") from None
    except ValueError as exc:
        raise FormatError(path, "", "", f"not valid JSON ({exc})") from None
