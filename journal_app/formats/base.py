"""The contract every transcript importer fulfils (DESIGN.md section 4, "Importers").

Pure module. An importer turns one source (a file, or a folder for OpenCode exports) into a
:class:`ParsedSession`: an ordered list of :class:`ParsedEntry` items that the journal
service appends in one transaction. Importers never touch the database.

Entry kinds and roles
---------------------
``kind`` is one of :data:`KINDS`:

* ``message``: a system, developer, user or assistant message. ``content = {"text": str}``
  (plus ``"blocks"`` when the source had non-text blocks worth keeping, e.g. images).
* ``tool_call``: ``role="assistant"``, ``tool_call_id`` and ``tool_name`` set,
  ``content = {"name": str, "arguments": <JSON value or raw string>}``.
* ``tool_result``: ``role="tool"``, ``tool_call_id`` of its call,
  ``content = {"output": str, "is_error": bool}`` (``"exit_code": int`` when known).
* ``reasoning``: ``role="assistant"``, ``content = {"text": str}`` (summary text) and/or
  ``{"encrypted": str}``. Hidden reasoning: never shown in client-visible views.
* ``event``: ``role="runtime"``, ``content = {"type": str, ...}`` for runtime events
  (turn aborted, interrupts, state changes). Summaries and compaction markers are events
  with ``derived=True``.

Messages are authoritative (pinned as P0 facts) when their role is system, developer or
user and they are not ``derived`` and not ``injected`` (IDE context blocks, meta caveats
are kept but marked ``metadata["injected"] = True`` and still pinned, because they did
govern the model; importers decide per format and say why in their docstring).

Everything the journal does not model (usage, model name, timestamps, cwd, exit codes,
side-channel results, ids) goes into ``metadata``; nothing in a source is dropped.
Provider-reported token usage, when the source has it, goes into ``usage`` as
``{"input_tokens": int, "output_tokens": int, ...}``.

Errors
------
Malformed input raises :class:`FormatError` naming the file, the line or index, and the
field. ``parse`` raises before returning a partial session. Importers that stream
(``stream(source)``, an :data:`EntryStream`) may raise after yielding some entries: the
import runs in one transaction, so nothing is half-written either way.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("message", "tool_call", "tool_result", "reasoning", "event")
ROLES = ("system", "developer", "user", "assistant", "tool", "runtime")
AUTHORITATIVE_ROLES = ("system", "developer", "user")


class FormatError(ValueError):
    """Malformed or unrecognised input.

    Attributes:
        path: the file (or folder) being read.
        location: ``"line 12"``, ``"index 3"``, ``"history[7]"``; ``""`` for the whole file.
        field: the offending field path, e.g. ``"message.content"``; ``""`` if none.
        reason: what is wrong, in one sentence.
    """

    def __init__(self, path: str | Path, location: str, field: str, reason: str) -> None:
        self.path = str(path)
        self.location = location
        self.field = field
        self.reason = reason
        parts = [self.path]
        if location:
            parts.append(location)
        if field:
            parts.append(f"field {field!r}")
        super().__init__(": ".join([", ".join(parts), reason]))


@dataclass
class ParsedEntry:
    """One journal entry as read from a source, before hashing.

    ``source_ref`` says where it came from (``"line 5"``, ``"history[3]"``) so errors and
    the UI can point back to the source file.
    """

    kind: str
    role: str
    content: dict[str, Any]
    tool_call_id: str = ""
    tool_name: str = ""
    derived: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    source_ref: str = ""
    #: the lane this entry belongs to when one source holds several lines of work (an
    #: OpenCode export of several sessions); ``""`` = the lane the import names
    lane: str = ""
    #: the branch this entry belongs to when the source records a fork (a Claude Code
    #: rewind: records off the live ``parentUuid`` path); ``""`` = the branch the import names
    branch: str = ""
    #: a provider-reported token figure of this entry, ``(tokens, source label)`` such as
    #: ``(42, "provider:completion_tokens")``: ``journal_append`` stores it as the entry's
    #: ``token_count`` / ``token_source`` instead of counting with tiktoken (DESIGN.md
    #: section 4, "Token figures": provider figures first, record which); ``None`` = count
    token_figure: tuple[int, str] | None = None


@dataclass
class ParsedSession:
    """A whole source, parsed. ``format`` is the importer name (see ``formats.FORMATS``)."""

    format: str
    entries: list[ParsedEntry]
    title: str = ""
    source_session_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


def message(role: str, text: str, *, source_ref: str = "", **kw: Any) -> ParsedEntry:
    """Shorthand for a ``message`` entry with ``content={"text": text}``."""
    return ParsedEntry(
        kind="message", role=role, content={"text": text}, source_ref=source_ref, **kw
    )


def tool_call(
    call_id: str, name: str, arguments: Any, *, source_ref: str = "", **kw: Any
) -> ParsedEntry:
    """Shorthand for a ``tool_call`` entry."""
    return ParsedEntry(
        kind="tool_call",
        role="assistant",
        content={"name": name, "arguments": arguments},
        tool_call_id=call_id,
        tool_name=name,
        source_ref=source_ref,
        **kw,
    )


def tool_result(
    call_id: str,
    output: str,
    *,
    is_error: bool = False,
    exit_code: int | None = None,
    name: str = "",
    source_ref: str = "",
    **kw: Any,
) -> ParsedEntry:
    """Shorthand for a ``tool_result`` entry (``exit_code`` only stored when known)."""
    content: dict[str, Any] = {"output": output, "is_error": bool(is_error)}
    if exit_code is not None:
        content["exit_code"] = exit_code
    return ParsedEntry(
        kind="tool_result",
        role="tool",
        content=content,
        tool_call_id=call_id,
        tool_name=name,
        source_ref=source_ref,
        **kw,
    )


def check_pairing(path: str | Path, entries: Iterable[ParsedEntry]) -> None:
    """Refuse a tool result whose call never appeared before it, a duplicate result, or a
    second call under an id already used (importers that meet a reused source id on a new
    call name it ``id#N`` themselves; a repeated record must not become a second call).

    A call with no result is allowed (an interrupted call); :mod:`journal_app.rounds`
    marks it. Raises :class:`FormatError` naming the entry's ``source_ref``.
    """
    check = PairingCheck(path)
    for e in entries:
        check.see(e)


class PairingCheck:
    """:func:`check_pairing` one entry at a time, for a streamed import.

    Holds the ids of the calls and results seen so far (a few dozen bytes per call), never
    the entries themselves.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.calls: dict[str, str] = {}
        self.answered: set[str] = set()

    def see(self, e: ParsedEntry) -> None:
        """Check ``e`` against the entries seen before it.

        Raises:
            FormatError: the rules of :func:`check_pairing`, naming ``e.source_ref``.
        """
        path, calls, answered = self.path, self.calls, self.answered
        if e.kind == "tool_call":
            if not e.tool_call_id:
                raise FormatError(path, e.source_ref, "tool_call_id", "tool call has no id")
            if e.tool_call_id in calls:
                raise FormatError(
                    path,
                    e.source_ref,
                    "tool_call_id",
                    f"second tool call with id {e.tool_call_id!r} (the first is at "
                    f"{calls[e.tool_call_id] or 'an earlier entry'}): a repeated source record",
                )
            calls[e.tool_call_id] = e.source_ref
        elif e.kind == "tool_result":
            if e.tool_call_id not in calls:
                raise FormatError(
                    path,
                    e.source_ref,
                    "tool_call_id",
                    f"tool result for {e.tool_call_id!r} has no matching tool call before it",
                )
            if e.tool_call_id in answered:
                raise FormatError(
                    path,
                    e.source_ref,
                    "tool_call_id",
                    f"second tool result for {e.tool_call_id!r}",
                )
            answered.add(e.tool_call_id)


#: what a streaming importer's ``stream(source)`` is: a generator of the entries in order
#: whose return value is the session's other fields (``entries=[]``), known at the end
EntryStream = Generator[ParsedEntry, None, ParsedSession]


def collect(stream: EntryStream) -> ParsedSession:
    """Drain ``stream`` into a whole :class:`ParsedSession` (the in-memory ``parse``)."""
    entries: list[ParsedEntry] = []
    while True:
        try:
            entries.append(next(stream))
        except StopIteration as done:
            session: ParsedSession = done.value
            session.entries = entries
            return session


class Repeats:
    """Repeated source records: never a second entry, never a fabricated call.

    A record repeated byte for byte (the same JSON) under the same key (a Claude Code
    ``uuid``, a Codex line, an OpenCode part id) is dropped and listed; a *different*
    record under a key already used is refused, naming both places. :meth:`summary` goes
    into ``ParsedSession.metadata["duplicates"]`` and the import summary counts it.

    Each record is kept as the SHA-256 of its sorted JSON (32 bytes), not its text, so a
    streamed import holds a few dozen bytes per record.
    """

    def __init__(self, path: str | Path, what: str, field_name: str) -> None:
        self.path = path
        self.what = what
        self.field = field_name
        self.first: dict[Any, tuple[str, bytes]] = {}
        self.dropped: list[str] = []

    def new(self, key: Any, where: str, record: Any) -> bool:
        """True the first time ``key`` is seen; False for an identical repeat (dropped).

        Raises:
            FormatError: ``key`` was used before by a different record.
        """
        text = hashlib.sha256(
            json.dumps(record, sort_keys=True, ensure_ascii=True, default=repr).encode("ascii")
        ).digest()
        if key not in self.first:
            self.first[key] = (where, text)
            return True
        first_where, first_text = self.first[key]
        if text != first_text:
            raise FormatError(
                self.path,
                where,
                self.field,
                f"{self.what} {key!r:.80} was already used by {first_where} with different "
                "content: a repeated source record",
            )
        self.dropped.append(f"{where} repeats {first_where}")
        return False

    def summary(self) -> dict[str, Any]:
        """``{"count": n, "records": ["line 9 repeats line 4", ...]}`` (the first 100)."""
        return {"count": len(self.dropped), "what": self.what, "records": self.dropped[:100]}


def record_repeats(metadata: dict[str, Any], *repeats: Repeats) -> None:
    """Put the dropped repeats of ``repeats`` into ``metadata["duplicates"]`` (when any)."""
    dropped = [r for r in repeats if r.dropped]
    if not dropped:
        return
    metadata["duplicates"] = {
        "count": sum(len(r.dropped) for r in dropped),
        "records": [x for r in dropped for x in r.dropped][:100],
    }


def require_str(path: str | Path, location: str, field_name: str, value: Any) -> str:
    """Return ``value`` if it is a string, else raise :class:`FormatError` for that field."""
    if value is None:
        raise FormatError(path, location, field_name, "content is null")
    if not isinstance(value, str):
        raise FormatError(
            path, location, field_name, f"expected a string, got {type(value).__name__}"
        )
    return value


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


def parts_text(
    path: str | Path, where: str, field_name: str, parts: list[Any], text_types: tuple[str, ...]
) -> str:
    """The text of a list of OpenAI content parts: the ``text`` of each part whose type is
    in ``text_types`` and each ``refusal``, joined with newlines; other parts (images,
    files, audio) give none.

    Raises:
        FormatError: a part that is not an object with a string ``type`` (``field[i].type``),
            or a text part whose ``text`` is not a string (``field[i].text``).
    """
    texts: list[str] = []
    for i, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise FormatError(path, where, f"{field_name}[{i}].type", "content part has no type")
        if part["type"] in text_types:
            if not isinstance(part.get("text"), str):
                raise FormatError(path, where, f"{field_name}[{i}].text", "expected a string")
            texts.append(part["text"])
        elif part["type"] == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
    return "\n".join(texts)


#: OpenAI usage counts and the names an entry's usage gives them
OPENAI_USAGE = (
    ("prompt_tokens", "input_tokens"),
    ("completion_tokens", "output_tokens"),
    ("total_tokens", "total_tokens"),
)


def usage_counts(
    usage: dict[str, Any], names: tuple[tuple[str, str], ...] = OPENAI_USAGE
) -> dict[str, Any]:
    """The integer counts of a provider's ``usage`` under an entry's names: ``names`` is
    ``(provider's field, entry's field)`` pairs; a field absent or not an integer is left
    out."""
    return {dst: usage[src] for src, dst in names if isinstance(usage.get(src), int)}


def top_list(path: str | Path, data: Any, key: str, *, what: str, missing: str) -> list[Any]:
    """The list under ``key`` of a JSON object file (a trajectory's ``messages[]``).

    Raises:
        FormatError: ``data`` is not an object (``expected a JSON object with {what}``),
            ``key`` is missing or null (``missing``), or not a list.
    """
    if not isinstance(data, dict):
        raise FormatError(path, "", "", f"expected a JSON object with {what}")
    value = data.get(key)
    if value is None:
        raise FormatError(path, "", key, missing)
    if not isinstance(value, list):
        raise FormatError(path, "", key, f"expected a list, got {type(value).__name__}")
    return value


def object_arguments(value: Any) -> Any:
    """Tool arguments as a JSON value: a JSON string holding an object is parsed; any other
    value, other strings included, is kept as sent (wrong types are refused when the entry
    is prepared). Codex, Claude Code and OpenHands call it."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return value


def role_of(path: str | Path, where: str, item: Any, roles: tuple[str, ...]) -> str:
    """The role of one chat message ``item`` (Chat Completions, Anthropic Messages).

    Raises:
        FormatError: the item is not an object, has no ``role`` (or a null one), or one
            not in ``roles``.
    """
    if not isinstance(item, dict):
        raise FormatError(path, where, "", f"expected an object, got {type(item).__name__}")
    role = item.get("role")
    if role is None:
        raise FormatError(path, where, "role", "field is missing")
    if role not in roles:
        raise FormatError(path, where, "role", f"unknown role {role!r}")
    return str(role)


def message_fields(
    path: str | Path, where: str, item: Any, roles: tuple[str, ...]
) -> tuple[str, str, dict[str, Any]]:
    """Role, text and leftover fields of one ``{role, content, ...}`` history item.

    Shared by the SWE-agent and mini-swe-agent importers (FORMATS.md sections 4 and 5).
    ``content`` is a string or a list of ``{"text": ...}`` blocks (kept in
    ``meta["content_blocks"]``); it may be null only on an assistant message.

    Returns:
        ``(role, text, meta)``, ``meta`` holding every field but ``role`` and ``content``.

    Raises:
        FormatError: the item is not an object, its role is missing or not in ``roles``, or
            its content is null (non-assistant) or of the wrong type.
    """
    if not isinstance(item, dict):
        raise FormatError(path, where, "", f"expected an object, got {type(item).__name__}")
    if "role" not in item:
        raise FormatError(path, where, "role", "missing")
    role = item["role"]
    if not isinstance(role, str) or role not in roles:
        raise FormatError(path, where, "role", f"unknown role {role!r}")
    value = item.get("content")
    blocks = None
    if value is None:
        if role != "assistant":
            raise FormatError(path, where, "content", "content is null")
        text = ""
    elif isinstance(value, str):
        text = value
    elif isinstance(value, list) and all(
        isinstance(b, dict) and isinstance(b.get("text"), str) for b in value
    ):
        text, blocks = "".join(b["text"] for b in value), value
    else:
        raise FormatError(path, where, "content", f"expected a string, got {type(value).__name__}")
    meta = {k: v for k, v in item.items() if k not in ("role", "content")}
    if blocks is not None:
        meta["content_blocks"] = blocks
    return role, text, meta
