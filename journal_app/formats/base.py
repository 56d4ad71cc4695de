"""The contract every transcript importer fulfils (docs/design.md section 4, "Importers").

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

The readers several importers share are :mod:`journal_app.formats.fields` (a string field,
content parts, usage counts, a message's role and text) and :mod:`journal_app.formats.titles`
(a session's title).
"""

from __future__ import annotations

import hashlib
import json
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
    #: ``token_count`` / ``token_source`` instead of counting with tiktoken (docs/design.md
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
