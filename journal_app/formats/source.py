"""Reading a transcript source from disk with errors that name file, line and field.

Pure module. :func:`read_source` opens a path into a :class:`Source` that every importer's
``detect`` and ``parse`` receive. Small files (below :data:`STREAM_FROM_BYTES`) are decoded
once into memory, exactly as before, so every error message names the file, line and
field. Larger files are never held whole: a JSON Lines file is read line
by line (:meth:`Source.rows`), a JSON document is streamed with ``ijson``
(:meth:`Source.items`, :meth:`Source.fields`), and detection sees a bounded preview of it
(:meth:`Source.detection_view`). The streaming and the in-memory readers yield the same
Python values, so the entries hash the same either way.
"""

from __future__ import annotations

import codecs
import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import ijson

from journal_app.formats.base import FormatError

#: files of at least this many bytes are streamed, never held in memory whole (tests lower
#: it to 0 to run the streaming readers on small corpus files)
STREAM_FROM_BYTES = 4 * 1024 * 1024
#: items kept per list in the preview a large JSON document is detected from
PREVIEW_ITEMS = 20
_READ = 1024 * 1024  # bytes per read while streaming
# ``yajl2_c`` (the fast ijson backend) turns a lone surrogate escape into "?" and refuses
# integers beyond 64 bits; ``json.loads`` keeps both. Files holding either are streamed with
# ijson's pure-Python backend, which matches ``json.loads`` (slower, same values, same hashes).
# A surrogate *pair* (``\ud83d\ude00``: any non-BMP character, e.g. an emoji, as Python's
# ``json.dumps`` writes it by default) decodes alike in both, and so does text that only
# looks like an escape (``\\ud83d``: a backslash, escaped, then the letters): only a lone
# surrogate escape, or a doubtful one, needs the exact backend (:func:`needs_exact`).
_NEEDS_EXACT = re.compile(rb"\\u[dD][89a-fA-F]|\d{19}")
_BIG_INTEGER = re.compile(rb"\d{19}")
_SURROGATE = re.compile(rb"(\\+)u([dD][89a-fA-F])[0-9a-fA-F]{2}")
_LOW_ESCAPE = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def needs_exact(data: bytes) -> bool:
    """Whether JSON text ``data`` must be parsed by ijson's exact (pure-Python) backend: it
    holds a run of 19 digits (an integer ``yajl2_c`` may refuse) or a surrogate escape that is
    not half of a pair. An escape is real when an odd number of backslashes precede its
    ``u`` (an even number is escaped backslashes, then plain text); a real high surrogate
    must be followed at once by a real low one. Conservative: a run of backslashes at the
    very start of ``data`` (it may continue before it) counts as doubtful, so ``True``."""
    if not _NEEDS_EXACT.search(data):
        return False
    if _BIG_INTEGER.search(data):
        return True
    paired_low = -1  # where the low half of the last pair starts
    for m in _SURROGATE.finditer(data):
        if m.start() == paired_low:
            continue
        if m.start() == 0:
            return True
        if len(m.group(1)) % 2 == 0:
            continue  # escaped backslashes, then the letters: plain text
        if m.group(2)[1:2].lower() in b"89ab" and _LOW_ESCAPE.match(data, m.end()):
            paired_low = m.end()
            continue
        return True
    return False


Progress = Callable[[int], None]


class _CountingReader(io.RawIOBase):
    """A binary file that reports the bytes read so far to ``progress`` (skips a UTF-8 BOM)."""

    def __init__(self, fh: BinaryIO, progress: Progress | None) -> None:
        self.fh = fh
        self.done = 0
        self.progress = progress
        if fh.read(3) != codecs.BOM_UTF8:
            fh.seek(0)
        else:
            self.done = 3

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.fh.read(size)
        self.done += len(data)
        if self.progress is not None and data:
            self.progress(self.done)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


@dataclass
class Source:
    """An opened source.

    * ``kind="json"``: one JSON document; ``data`` is its value.
    * ``kind="jsonl"``: JSON Lines; ``data`` is ``[(line_number, value), ...]`` (1-based,
      blank lines skipped); :meth:`rows` yields the same pairs one at a time.
    * ``kind="dir"``: ``data`` is ``None``; the importer reads the folder's files itself.

    ``streamed`` sources (files of :data:`STREAM_FROM_BYTES` or more) have ``data=None``
    until :meth:`load` (for an importer that cannot stream); importers that stream use :meth:`rows`,
    :meth:`items` and :meth:`fields`, which read the file again on each call (constant memory).
    ``progress(bytes_read)`` is called while a streamed file is read.
    """

    path: Path
    kind: Literal["json", "jsonl", "dir"]
    data: Any = None
    streamed: bool = False
    size: int = 0
    progress: Progress | None = field(default=None, repr=False)
    exact: bool = False  # the file needs ijson's exact (pure-Python) backend

    @property
    def in_memory(self) -> bool:
        """True when ``data`` holds the whole value (a small file, or after :meth:`load`)."""
        return not self.streamed or self.data is not None

    def load(self) -> Source:
        """Fill ``data`` with the whole value of a streamed source (for an importer that
        cannot stream; memory then grows with the file). Returns ``self``."""
        if self.streamed and self.data is None and self.kind != "dir":
            self.data = _read_whole(self.path, self.kind)
        return self

    def rows(self, first_pass: bool = False) -> Iterator[tuple[int, Any]]:
        """``(line_number, value)`` of each non-blank line of a JSONL source, in order.

        ``first_pass=True``: a pass that only collects small keys (progress not reported).

        Raises:
            FormatError: a line that is not UTF-8 or not JSON (naming the line).
        """
        if self.in_memory:
            yield from self.data
            return
        with self.path.open("rb") as fh:
            reader = _CountingReader(fh, None if first_pass else self.progress)
            for number, raw in enumerate(io.BufferedReader(reader, _READ), start=1):
                if not raw.strip():
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise FormatError(
                        self.path, f"line {number}", "", f"not valid UTF-8 (byte {exc.start})"
                    ) from None
                try:
                    yield number, loads(text)
                except ValueError as exc:
                    raise FormatError(
                        self.path, f"line {number}", "", f"not valid JSON ({exc})"
                    ) from None

    def head(self, n: int) -> list[tuple[int, Any]]:
        """The first ``n`` rows of a JSONL source (``[]`` for another kind); never raises."""
        if self.kind != "jsonl":
            return []
        if self.in_memory:
            return list(self.data[:n])
        out: list[tuple[int, Any]] = []
        try:
            for row in self.rows():
                out.append(row)
                if len(out) >= n:
                    break
        except FormatError:
            pass
        return out

    def items(self, key: str | None) -> Iterator[Any]:
        """The items of the document's top-level list (``key=None``) or of the list under
        top-level ``key``, one at a time.

        Raises:
            FormatError: the document is not valid JSON (streamed sources: the parser's
                reason and byte offset).
        """
        if self.in_memory:
            value = self.data if key is None else self.data[key]
            yield from value
            return
        prefix = "item" if key is None else f"{key}.item"
        with self.path.open("rb") as fh:
            reader = _CountingReader(fh, self.progress)
            try:
                yield from self._backend().items(reader, prefix, use_float=True)
            except ijson.JSONError as exc:
                raise _stream_error(self.path, exc, reader.done) from None

    def fields(self, skip: str) -> dict[str, Any]:
        """The top-level object's fields except ``skip`` (whose value is never built).

        Used to keep a document's wrapper fields while its big list is streamed.
        """
        if self.in_memory:
            return {k: v for k, v in self.data.items() if k != skip}
        out: dict[str, Any] = {}
        with self.path.open("rb") as fh:
            reader = _CountingReader(fh, None)
            try:
                for key, value in _top_fields(self._backend(), reader, skip):
                    out[key] = value
            except ijson.JSONError as exc:
                raise _stream_error(self.path, exc, reader.done) from None
        return out

    def detection_view(self) -> Source:
        """What ``detect`` functions look at: ``self``, or for a streamed JSON document an
        in-memory preview whose lists are cut to their first :data:`PREVIEW_ITEMS` items
        (docs/design.md section 4: detection looks at the first records; never the whole file)."""
        if self.in_memory or self.kind == "dir":
            return self
        if self.kind == "jsonl":
            return Source(self.path, "jsonl", self.head(PREVIEW_ITEMS))
        with self.path.open("rb") as fh:
            reader = _CountingReader(fh, None)
            try:
                preview = _preview(self._backend(), reader)
            except ijson.JSONError as exc:
                raise _stream_error(self.path, exc, reader.done) from None
        return Source(self.path, "json", preview)

    def _backend(self) -> Any:
        return ijson.get_backend("python" if self.exact else "yajl2_c")


def _stream_error(path: Path, exc: Exception, offset: int) -> FormatError:
    reason = (str(exc).strip().splitlines() or ["invalid"])[0]
    return FormatError(path, "", "", f"not valid JSON ({reason}, near byte {offset})")


def _top_fields(backend: Any, reader: Any, skip: str) -> Iterator[tuple[str, Any]]:
    """Top-level ``(key, value)`` pairs of an object document, skipping ``skip``'s value."""
    events = backend.parse(reader, use_float=True)
    prefix, event, value = next(events)
    if event != "start_map":
        return
    key = ""
    for prefix, event, value in events:
        if prefix == "" and event == "map_key":
            key = value
            if key == skip:
                _skip_value(events)
            else:
                yield key, _build(events)
        elif prefix == "" and event == "end_map":
            return


def _skip_value(events: Iterator[tuple[str, str, Any]]) -> None:
    """Consume the next value's events without building it."""
    _, event, _ = next(events)
    if event in ("start_map", "start_array"):
        _skip_rest(events)


def _build(events: Iterator[tuple[str, str, Any]], limit: int | None = None) -> Any:
    """Build the next value from ``events``; lists keep at most ``limit`` items."""
    _, event, value = next(events)
    return _build_from(event, value, events, limit)


def _build_from(
    event: str, value: Any, events: Iterator[tuple[str, str, Any]], limit: int | None
) -> Any:
    if event == "start_map":
        obj: dict[str, Any] = {}
        for _, ev, val in events:
            if ev == "end_map":
                return obj
            obj[val] = _build(events, limit)  # ev == "map_key"
        return obj
    if event == "start_array":
        arr: list[Any] = []
        for _, ev, val in events:
            if ev == "end_array":
                return arr
            if limit is not None and len(arr) >= limit:
                if ev in ("start_map", "start_array"):
                    _skip_rest(events)
                continue
            arr.append(_build_from(ev, val, events, limit))
        return arr
    return value


def _skip_rest(events: Iterator[tuple[str, str, Any]]) -> None:
    """Consume the events up to the end of the container just opened."""
    depth = 1
    for _, event, _ in events:
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                return


def _preview(backend: Any, reader: Any) -> Any:
    events = backend.parse(reader, use_float=True)
    value = _build(events, PREVIEW_ITEMS)
    for _ in events:  # the rest must still be JSON (trailing garbage is an error)
        pass
    return value


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


def _read_whole(path: Path, kind: str) -> Any:
    """The whole value of a file of ``kind`` (the in-memory reader)."""
    text = _decode(path, path.read_bytes())
    if kind == "jsonl":
        return parse_jsonl(path, text)
    return _parse_text(path, text)[1]


def _parse_text(path: Path, text: str) -> tuple[Literal["json", "jsonl"], Any]:
    try:
        return "json", loads(text)
    except json.JSONDecodeError as exc:
        first = text.lstrip().splitlines()[0] if text.strip() else ""
        if exc.msg == "Extra data" and first.startswith("{"):
            return "jsonl", parse_jsonl(path, text)
        where = f"line {exc.lineno}"
        if exc.pos >= len(text.rstrip()):
            raise FormatError(
                path, where, "", "truncated JSON (ends before the value is closed)"
            ) from None
        near = text[max(0, exc.pos - 40) : exc.pos + 40].replace("\n", " ")
        raise FormatError(
            path,
            where,
            "",
            f"not valid JSON ({exc.msg} at column {exc.colno}, character {exc.pos:,}; "
            f"near {near!r})",
        ) from None
    except ValueError as exc:
        raise FormatError(path, "", "", f"not valid JSON ({exc})") from None


def _scan(path: Path) -> tuple[bool, bool]:
    """One pass over a large file at C speed, holding one block: ``(is_blank, exact)``.

    Raises:
        FormatError: bytes that are not UTF-8 (naming the line and byte offset).
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    blank, exact, offset, lines, tail = True, False, 0, 0, b""
    with path.open("rb") as fh:
        while block := fh.read(_READ):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                line = lines + block[: exc.start].count(b"\n") + 1
                raise FormatError(
                    path, f"line {line}", "", f"not valid UTF-8 (byte offset {offset + exc.start})"
                ) from None
            blank = blank and not block.strip()
            exact = exact or needs_exact(tail + block)
            tail = block[-24:]
            offset += len(block)
            lines += block.count(b"\n")
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise FormatError(
            path, f"line {lines + 1}", "", f"not valid UTF-8 (byte offset {offset})"
        ) from None
    return blank, exact


def _large_kind(path: Path) -> Literal["json", "jsonl"]:
    """JSONL when the first line is a whole JSON object followed by more lines (the rule of
    the in-memory reader: several JSON values one per line), else one JSON document."""
    if path.suffix == ".jsonl":
        return "jsonl"
    with path.open("rb") as fh:
        first = fh.readline(_READ).removeprefix(codecs.BOM_UTF8)
        more = fh.read(_READ).strip()
    if not first.lstrip().startswith(b"{") or not more or not first.endswith(b"\n"):
        return "json"
    try:
        json.loads(first)
    except ValueError:
        return "json"
    return "jsonl"


def read_source(path: str | Path, progress: Progress | None = None) -> Source:
    """Open ``path`` as a :class:`Source`.

    ``.jsonl`` files are read as JSON Lines; other files as one JSON document, falling back
    to JSON Lines when the text holds several JSON values one per line. Files of
    :data:`STREAM_FROM_BYTES` or more are checked (UTF-8, not empty) in one pass and then
    streamed by the importer; smaller ones are parsed here.

    Args:
        path: a file or an OpenCode export folder.
        progress: ``progress(bytes_read)`` while a streamed file is read.

    Raises:
        FormatError: missing path, empty file, non-UTF-8 bytes, truncated or invalid JSON,
            a line of a JSONL file that is not JSON.
    """
    path = Path(path)
    if path.is_dir():
        return Source(path=path, kind="dir", data=None)
    if not path.exists():
        raise FormatError(path, "", "", "no such file or folder")
    size = path.stat().st_size
    if size >= STREAM_FROM_BYTES:
        blank, exact = _scan(path)
        if blank:
            raise FormatError(path, "", "", "file is empty")
        return Source(
            path, _large_kind(path), streamed=True, size=size, progress=progress, exact=exact
        )
    text = _decode(path, path.read_bytes())
    if path.suffix == ".jsonl":
        return Source(path=path, kind="jsonl", data=parse_jsonl(path, text), size=size)
    kind, data = _parse_text(path, text)
    return Source(path=path, kind=kind, data=data, size=size)
