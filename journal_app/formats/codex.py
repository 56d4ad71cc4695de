"""Importer for OpenAI Codex rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Pure module. Rules follow ``tests/fixtures/corpus/FORMATS.md`` section 2. Every line is
``{timestamp, type, payload}``; one entry per response item, in source order:

* ``response_item`` ``message`` -> ``message`` with the item's role (text blocks joined
  with newlines; non-text blocks kept in ``content["blocks"]``). A user message that is
  only an ``<environment_context>`` or ``<user_instructions>`` block is injected system
  context: it becomes ``role="developer"`` with ``metadata["injected"] = True``. The
  ``# Context from my IDE setup`` prefix is part of the human's own message and stays.
* ``reasoning`` -> ``reasoning`` with the summary texts in ``content["text"]`` and
  ``encrypted_content`` in ``content["encrypted"]`` (raw reasoning content, if any, in
  ``content["raw_content"]``, never in metadata, because reasoning is hidden).
* ``function_call`` / ``custom_tool_call`` -> ``tool_call`` (JSON-string arguments parsed
  when they parse); ``function_call_output`` / ``custom_tool_call_output`` ->
  ``tool_result``. The output JSON string ``{"output", "metadata": {"exit_code",
  "duration_seconds"}}`` is unwrapped: the text goes to ``content["output"]``, the exit
  code to ``content["exit_code"]`` and the metadata to ``metadata["output_metadata"]``.
  Plain-text outputs such as ``failed in sandbox ...`` or ``patch rejected by user`` are
  errors (the exit code in the sandbox text is kept when present).
* ``session_meta`` -> ``ParsedSession.metadata["session_meta"]`` and
  ``source_session_id``; non-empty ``instructions`` -> a first injected developer message.
* ``turn_context`` -> ``metadata["turn_context"]`` of the next entry (trailing ones in
  ``ParsedSession.metadata["trailing_turn_context"]``).
* ``event_msg`` ``user_message`` / ``agent_message`` / ``agent_reasoning`` duplicate
  response items and are counted in ``ParsedSession.metadata["deduplicated"]``. They are
  matched by text; one with no matching response item (a turn aborted before its items were
  written) is kept as a message/reasoning entry with ``metadata["event_only"] = True``.
* ``event_msg`` ``token_count`` -> ``usage`` (``last_token_usage``) and
  ``metadata["token_count"]`` of an assistant-side entry. Codex 0.40 writes the count of a
  model call *before* that call's response items, newer CLIs after them, and a
  ``turn_context`` precedes every model call; so the count goes to the next assistant-side
  entry before the next ``turn_context``, else to the most recent one.
* ``event_msg`` ``turn_aborted`` -> ``event`` ``{"type": "turn_aborted", "reason"}``;
  other event types -> ``event`` ``{"type": <type>, ...payload}``; ``compacted`` records
  and ``context_compacted`` events -> derived events.
* A line repeated byte for byte (the same JSON record again) is read once and counted in
  ``metadata["duplicates"]``; a second call under a ``call_id`` already used is refused
  (never two calls, or a fabricated one, for one id).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from journal_app.formats.base import (
    EntryStream,
    FormatError,
    ParsedEntry,
    ParsedSession,
    Repeats,
    collect,
    message,
    record_repeats,
    tool_call,
)
from journal_app.formats.base import tool_result as tool_result_entry
from journal_app.formats.fields import object_arguments
from journal_app.formats.source import Source
from journal_app.formats.titles import request_title

NAME = "codex-rollout-jsonl"

_RECORD_TYPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
_INJECTED_PREFIXES = ("<environment_context>", "<user_instructions>")
_TEXT_BLOCKS = ("input_text", "output_text", "text")
_FAILURE_PREFIXES = ("failed in sandbox", "sandbox denied", "patch rejected", "execution error")
_EXIT_CODE_IN_TEXT = re.compile(r"exit code:? (-?\d+)")
_DUPLICATE_EVENTS = {
    "user_message": "message",
    "agent_message": "message",
    "agent_reasoning": "text",
}
_IDE_REQUEST_MARK = "## My request for Codex:"


def detect(source: Source) -> bool:
    """Return True when ``source`` looks like a Codex rollout.

    Looks at the first 5 records of a JSONL source: each must be ``{timestamp, type,
    payload}`` with a known Codex record type and an object payload, and one must be
    ``session_meta`` or ``response_item``. Never raises.
    """
    if source.kind != "jsonl":
        return False
    seen = False
    for _, obj in source.head(5):
        if not isinstance(obj, dict) or obj.get("type") not in _RECORD_TYPES:
            return False
        if not isinstance(obj.get("payload"), dict):
            return False
        seen = seen or obj["type"] in ("session_meta", "response_item")
    return seen


def parse(source: Source) -> ParsedSession:
    """Parse a Codex rollout into a :class:`ParsedSession` (:func:`stream`, collected).

    Args:
        source: a ``kind="jsonl"`` source (``data = [(line_number, record), ...]``).

    Returns:
        The session: entries in source order; ``source_session_id`` = ``session_meta.id``;
        ``title`` = the first human request (80 chars at most); ``metadata`` holds
        ``session_meta``, ``deduplicated`` (count per event type) and, when present,
        ``deduplicated_extras``, ``trailing_turn_context`` and ``unattached_token_counts``.

    Raises:
        FormatError: the source is not JSONL; a record is not an object, has no string
            ``type`` or no object ``payload``; a message has no ``role`` or a null/mistyped
            ``content``; a tool call/output lacks ``call_id`` (or ``name``/``arguments``,
            ``output``); a field has the wrong type.
    """
    return collect(stream(source))


def stream(source: Source) -> EntryStream:
    """The entries of :func:`parse` one at a time, reading the file line by line.

    Two passes: the first keeps only digests of the response texts that
    ``event_msg`` records repeat; the second yields each entry once nothing later can attach
    to it (a token count attaches to the latest assistant entry, so entries from it on
    wait for the next one). Returns the session fields (``entries=[]``).
    """
    path = source.path
    if source.kind != "jsonl":
        raise FormatError(path, "", "", "a Codex rollout must be a JSONL file")
    state = _State(path, _response_texts(source.rows(first_pass=True)))
    repeats = Repeats(path, "line", "")
    for number, obj in source.rows():
        where = f"line {number}"
        if not isinstance(obj, dict):
            raise FormatError(path, where, "", f"record is not a JSON object ({_tname(obj)})")
        if not repeats.new(_digest(json.dumps(obj, sort_keys=True, default=repr)), where, obj):
            continue  # the same line again: one record, counted in metadata["duplicates"]
        rtype = obj.get("type")
        if not isinstance(rtype, str):
            raise FormatError(path, where, "type", "record has no string 'type'")
        payload = obj.get("payload")
        if payload is None:
            raise FormatError(path, where, "payload", f"{rtype} record has no 'payload'")
        if not isinstance(payload, dict):
            raise FormatError(path, where, "payload", f"expected an object, got {_tname(payload)}")
        base = {k: v for k, v in obj.items() if k not in ("type", "payload")}
        if rtype == "session_meta":
            state.session_meta(where, payload, base)
        elif rtype == "turn_context":
            state.turn_context(where, payload, base)
        elif rtype == "response_item":
            state.add(_response_item(path, where, payload, base))
        elif rtype == "event_msg":
            state.event_msg(where, payload, base)
        elif rtype == "compacted":
            state.add(_event(where, {"type": "compacted", **payload}, base, derived=True))
        else:
            state.add(_event(where, {"type": rtype, **payload}, base))
        yield from state.drain()
    session = state.finish()
    yield from state.drain()
    record_repeats(session.metadata, repeats)
    return session


def _tname(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _digest(text: str) -> bytes:
    """SHA-256 of ``text`` (what a streamed import keeps of a text it must recognise)."""
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).digest()


def _response_texts(rows: Iterable[tuple[int, Any]]) -> Counter[tuple[str, bytes]]:
    """Digests of the response item texts that ``event_msg`` duplicates, keyed by event type."""
    texts: Counter[tuple[str, bytes]] = Counter()
    for _, obj in rows:
        if not isinstance(obj, dict) or obj.get("type") != "response_item":
            continue
        p = obj.get("payload")
        if not isinstance(p, dict):
            continue
        if p.get("type") == "reasoning" and isinstance(p.get("summary"), list):
            for s in p["summary"]:
                if isinstance(s, dict) and isinstance(s.get("text"), str):
                    texts["agent_reasoning", _digest(s["text"])] += 1
        elif p.get("type") == "message" and isinstance(p.get("content"), list):
            role = p.get("role")
            kind = {"user": "user_message", "assistant": "agent_message"}.get(
                role if isinstance(role, str) else ""
            )
            if kind:
                text = _join_text(p["content"])
                texts[kind, _digest(text)] += 1
    return texts


def _join_text(blocks: list[Any]) -> str:
    return "\n".join(
        b["text"]
        for b in blocks
        if isinstance(b, dict) and b.get("type") in _TEXT_BLOCKS and isinstance(b.get("text"), str)
    )


class _State:
    """Accumulates entries and the records that attach to neighbouring entries."""

    def __init__(self, path: Any, response_texts: Counter[tuple[str, bytes]]) -> None:
        self.path = path
        #: entries from the latest assistant entry on (a token count may still attach)
        self.entries: list[ParsedEntry] = []
        #: entries nothing can change any more, waiting to be yielded
        self.ready: list[ParsedEntry] = []
        self.title = ""
        self.metadata: dict[str, Any] = {"deduplicated": {}}
        self.session_id = ""
        self.have_meta = False
        self.response_texts = response_texts
        self.pending_context: list[dict[str, Any]] = []
        self.pending_counts: list[dict[str, Any]] = []
        self.last_assistant: ParsedEntry | None = None
        self.call_names: dict[str, str] = {}

    def add(self, entry: ParsedEntry) -> None:
        if self.pending_context:
            entry.metadata["turn_context"] = self.pending_context[-1]
            if len(self.pending_context) > 1:
                entry.metadata["earlier_turn_contexts"] = self.pending_context[:-1]
            self.pending_context = []
        if entry.kind == "tool_call":
            self.call_names[entry.tool_call_id] = entry.tool_name
        elif entry.kind == "tool_result":
            entry.tool_name = self.call_names.get(entry.tool_call_id, "")
        if entry.kind == "message" and entry.role in ("user", "developer"):
            self._flush_counts()
        if entry.role == "assistant" or self.last_assistant is None:
            self.ready.extend(self.entries)
            self.entries = []
        if entry.role == "assistant":
            self.last_assistant = entry
            for count in self.pending_counts:
                _attach_token_count(entry, count)
            self.pending_counts = []
        self.entries.append(entry)

    def session_meta(self, where: str, payload: dict[str, Any], base: dict[str, Any]) -> None:
        if self.have_meta:
            self.add(_event(where, {"type": "session_meta", **payload}, base))
            return
        self.have_meta = True
        self.metadata["session_meta"] = {**payload, "record": base}
        if isinstance(payload.get("id"), str):
            self.session_id = payload["id"]
        instructions = payload.get("instructions")
        if instructions:
            text = instructions if isinstance(instructions, str) else json.dumps(instructions)
            meta = {**base, "injected": True, "from": "session_meta.instructions"}
            self.add(message("developer", text, source_ref=where, metadata=meta))

    def turn_context(self, where: str, payload: dict[str, Any], base: dict[str, Any]) -> None:
        self._flush_counts()
        self.pending_context.append({**payload, **base, "source_ref": where})

    def event_msg(self, where: str, payload: dict[str, Any], base: dict[str, Any]) -> None:
        etype = payload.get("type")
        if not isinstance(etype, str):
            raise FormatError(self.path, where, "payload.type", "event_msg has no string 'type'")
        rest = {k: v for k, v in payload.items() if k != "type"}
        if etype in _DUPLICATE_EVENTS:
            self._duplicate(where, etype, rest, base)
        elif etype == "token_count":
            count = {**rest, **base, "source_ref": where}
            self.pending_counts.append(count)
        elif etype == "context_compacted":
            self.add(_event(where, {"type": etype, **rest}, base, derived=True))
        else:
            self.add(_event(where, {"type": etype, **rest}, base))

    def _duplicate(
        self, where: str, etype: str, rest: dict[str, Any], base: dict[str, Any]
    ) -> None:
        key = _DUPLICATE_EVENTS[etype]
        text = rest.get(key)
        if not isinstance(text, str):
            raise FormatError(
                self.path, where, f"payload.{key}", f"expected a string, got {_tname(text)}"
            )
        digest = _digest(text)
        if self.response_texts[etype, digest] > 0:
            self.response_texts[etype, digest] -= 1
            dedup = self.metadata["deduplicated"]
            dedup[etype] = dedup.get(etype, 0) + 1
            extras = {k: v for k, v in rest.items() if k != key}
            if extras:
                self.metadata.setdefault("deduplicated_extras", []).append(
                    {"source_ref": where, "type": etype, **extras}
                )
            return
        meta = {**base, **{k: v for k, v in rest.items() if k != key}, "event_only": True}
        if etype == "agent_reasoning":
            self.add(
                ParsedEntry(
                    kind="reasoning",
                    role="assistant",
                    content={"text": text},
                    metadata=meta,
                    source_ref=where,
                )
            )
        else:
            role = "user" if etype == "user_message" else "assistant"
            self.add(message(role, text, source_ref=where, metadata=meta))

    def _flush_counts(self) -> None:
        """Token counts with no assistant entry after them go to the most recent one."""
        if not self.pending_counts:
            return
        if self.last_assistant is None:
            self.metadata.setdefault("unattached_token_counts", []).extend(self.pending_counts)
        else:
            for count in self.pending_counts:
                _attach_token_count(self.last_assistant, count)
        self.pending_counts = []

    def drain(self) -> list[ParsedEntry]:
        """Take the entries that are ready (final) for yielding, in order."""
        out, self.ready = self.ready, []
        self.title = self.title or request_title(out, marker=_IDE_REQUEST_MARK)
        return out

    def finish(self) -> ParsedSession:
        """The session fields; every entry left becomes ready (``entries=[]``)."""
        self._flush_counts()
        if self.pending_context:
            self.metadata["trailing_turn_context"] = self.pending_context
        self.ready.extend(self.entries)
        self.entries = []
        # self.ready is drained by the caller after this
        self.title = self.title or request_title(self.ready, marker=_IDE_REQUEST_MARK)
        return ParsedSession(
            format=NAME,
            entries=[],
            title=self.title,
            source_session_id=self.session_id,
            metadata=self.metadata,
        )


def _attach_token_count(entry: ParsedEntry, count: dict[str, Any]) -> None:
    """Put a token_count on ``entry``: ``usage`` from ``info.last_token_usage``."""
    if "token_count" in entry.metadata:
        entry.metadata.setdefault("more_token_counts", []).append(count)
    else:
        entry.metadata["token_count"] = count
    info = count.get("info")
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    if isinstance(last, dict):
        entry.usage = _add_usage(entry.usage, last)


def _add_usage(current: dict[str, Any] | None, more: dict[str, Any]) -> dict[str, Any]:
    if current is None:
        return dict(more)
    total = dict(current)
    for k, v in more.items():
        if isinstance(v, int) and isinstance(total.get(k, 0), int):
            total[k] = total.get(k, 0) + v
        else:
            total.setdefault(k, v)
    return total


def _response_item(path: Any, where: str, p: dict[str, Any], base: dict[str, Any]) -> ParsedEntry:
    """One ``response_item`` payload -> one entry."""
    ptype = p.get("type")
    if not isinstance(ptype, str):
        raise FormatError(path, where, "payload.type", "response_item has no string 'type'")

    def meta(*known: str) -> dict[str, Any]:
        return {**base, **{k: v for k, v in p.items() if k not in ("type", *known)}}

    if ptype == "message":
        return _message_item(path, where, p, meta("role", "content"))
    if ptype == "reasoning":
        return _reasoning_item(path, where, p, meta("summary", "content", "encrypted_content"))
    if ptype in ("function_call", "custom_tool_call"):
        args_key = "arguments" if ptype == "function_call" else "input"
        call_id = _str_field(path, where, p, "call_id")
        name = _str_field(path, where, p, "name")
        if args_key not in p:
            raise FormatError(path, where, f"payload.{args_key}", f"{ptype} has no {args_key!r}")
        metadata = meta("call_id", "name", args_key)
        if ptype != "function_call":
            metadata["item_type"] = ptype
        return tool_call(
            call_id, name, object_arguments(p[args_key]), source_ref=where, metadata=metadata
        )
    if ptype in ("function_call_output", "custom_tool_call_output"):
        call_id = _str_field(path, where, p, "call_id")
        metadata = meta("call_id", "output")
        if ptype != "function_call_output":
            metadata["item_type"] = ptype
        return _output_item(path, where, call_id, p, metadata)
    return _event(where, {"type": ptype, **{k: v for k, v in p.items() if k != "type"}}, base)


def _str_field(path: Any, where: str, p: dict[str, Any], key: str) -> str:
    value = p.get(key)
    if not isinstance(value, str) or not value:
        raise FormatError(
            path, where, f"payload.{key}", f"missing or not a string ({_tname(value)})"
        )
    return value


def _message_item(
    path: Any, where: str, p: dict[str, Any], metadata: dict[str, Any]
) -> ParsedEntry:
    role = p.get("role")
    if not isinstance(role, str):
        raise FormatError(path, where, "payload.role", f"missing or not a string ({_tname(role)})")
    content = p.get("content")
    if content is None:
        raise FormatError(path, where, "payload.content", "content is null")
    if not isinstance(content, list):
        raise FormatError(path, where, "payload.content", f"expected a list, got {_tname(content)}")
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            raise FormatError(
                path, where, f"payload.content[{i}]", f"block is not an object ({_tname(block)})"
            )
        if block.get("type") in _TEXT_BLOCKS and not isinstance(block.get("text"), str):
            raise FormatError(path, where, f"payload.content[{i}].text", "expected a string")
    text = _join_text(content)
    if role == "user" and text.lstrip().startswith(_INJECTED_PREFIXES):
        role = "developer"
        metadata = {**metadata, "injected": True, "original_role": "user"}
    entry = message(role, text, source_ref=where, metadata=metadata)
    if any(b.get("type") not in _TEXT_BLOCKS for b in content):
        entry.content["blocks"] = content
    return entry


def _reasoning_item(
    path: Any, where: str, p: dict[str, Any], metadata: dict[str, Any]
) -> ParsedEntry:
    summary = p.get("summary") or []
    if not isinstance(summary, list):
        raise FormatError(path, where, "payload.summary", f"expected a list, got {_tname(summary)}")
    texts = []
    for i, s in enumerate(summary):
        if not isinstance(s, dict) or not isinstance(s.get("text"), str):
            raise FormatError(path, where, f"payload.summary[{i}].text", "expected a string")
        texts.append(s["text"])
    content: dict[str, Any] = {"text": "\n\n".join(texts)}
    if p.get("encrypted_content"):
        content["encrypted"] = p["encrypted_content"]
    if p.get("content") is not None:
        content["raw_content"] = p["content"]
    if len(summary) > 1 or any(set(s) - {"type", "text"} for s in summary):
        content["summary"] = summary
    return ParsedEntry(
        kind="reasoning", role="assistant", content=content, metadata=metadata, source_ref=where
    )


def _output_item(
    path: Any, where: str, call_id: str, p: dict[str, Any], metadata: dict[str, Any]
) -> ParsedEntry:
    """Unwrap ``{"output", "metadata"}`` JSON strings; classify plain-text failures."""
    if "output" not in p:
        raise FormatError(path, where, "payload.output", "tool output has no 'output'")
    raw = p["output"]
    wrapped: Any = raw
    if isinstance(raw, str):
        try:
            wrapped = json.loads(raw)
        except ValueError:
            wrapped = None
    if isinstance(wrapped, dict) and isinstance(wrapped.get("output"), str):
        out_meta = wrapped.get("metadata")
        exit_code = out_meta.get("exit_code") if isinstance(out_meta, dict) else None
        if not isinstance(exit_code, int) or isinstance(exit_code, bool):
            exit_code = None
        metadata["output_metadata"] = out_meta
        extra = {k: v for k, v in wrapped.items() if k not in ("output", "metadata")}
        if extra:
            metadata["output_extra"] = extra
        return tool_result_entry(
            call_id,
            wrapped["output"],
            is_error=exit_code not in (None, 0),
            exit_code=exit_code,
            source_ref=where,
            metadata=metadata,
        )
    if isinstance(raw, dict) and isinstance(raw.get("content"), str):
        # Newer CLIs: {"content": str, "success": bool}.
        extra = {k: v for k, v in raw.items() if k != "content"}
        if extra:
            metadata["output_extra"] = extra
        return tool_result_entry(
            call_id,
            raw["content"],
            is_error=raw.get("success") is False,
            source_ref=where,
            metadata=metadata,
        )
    if not isinstance(raw, str):
        raise FormatError(path, where, "payload.output", f"expected a string, got {_tname(raw)}")
    failed = raw.lstrip().lower().startswith(_FAILURE_PREFIXES)
    exit_code = None
    if failed:
        found = _EXIT_CODE_IN_TEXT.search(raw)
        exit_code = int(found.group(1)) if found else None
    return tool_result_entry(
        call_id, raw, is_error=failed, exit_code=exit_code, source_ref=where, metadata=metadata
    )


def _event(
    where: str, content: dict[str, Any], metadata: dict[str, Any], *, derived: bool = False
) -> ParsedEntry:
    return ParsedEntry(
        kind="event",
        role="runtime",
        content=content,
        metadata=dict(metadata),
        derived=derived,
        source_ref=where,
    )
