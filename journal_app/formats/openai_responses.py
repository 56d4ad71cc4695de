"""Importer for OpenAI Responses API items (docs/design.md section 4, "Importers").

Pure module. The Responses API (and Codex, which speaks it) carries a conversation as a list
of typed items. Accepted shapes:

* a bare JSON list of items;
* a request ``{"input": [...], "instructions"?: str, "model"?, ...}``;
* a response ``{"object": "response", "output": [...], "usage"?, ...}``;
* a logged exchange holding both ``input`` and ``output`` (read in that order).

Mapping, item by item:

* ``message`` (``{"type": "message", "role", "content"}``, or the short form
  ``{"role", "content"}`` without ``type``) -> a ``message`` entry; ``content`` is a string
  or a list of parts whose ``input_text`` / ``output_text`` / ``text`` / ``refusal`` texts
  are joined with newlines (the verbatim list kept in ``content["blocks"]`` unless it was
  one plain text part). System, developer and user messages are authoritative and not
  marked ``injected`` (the format has no marker for injected context).
* ``instructions`` (request field) -> the first entry, a ``system`` message.
* ``function_call`` / ``custom_tool_call`` -> ``tool_call`` (``call_id`` is the id;
  ``arguments`` parsed when it is a JSON string, the raw string kept in
  ``metadata["raw_arguments"]`` when re-serialising would not give it back).
* ``function_call_output`` / ``custom_tool_call_output`` -> ``tool_result`` (``output`` a
  string or a list of text parts). There is no error flag in the format; a JSON output with a
  non-zero ``exit_code`` sets ``is_error``, as for Chat Completions.
* ``reasoning`` -> ``reasoning``: ``{"text"}`` from the summary texts and/or
  ``{"encrypted"}`` from ``encrypted_content`` (hidden reasoning, never shown to clients).
* any other item type -> an ``event`` ``{"type": "responses_item", "item_type"}`` with the
  item in metadata: nothing in a source is dropped.

Item fields the entry does not model (``id``, ``status``...) go to the entry's metadata; a
response's ``usage`` goes to the first entry made from its ``output``. Reused call ids get
``#2``, ``#3``... as in :mod:`journal_app.formats.openai_chat`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from journal_app.formats.base import FormatError, ParsedEntry, ParsedSession, message, tool_result
from journal_app.formats.fields import parts_text
from journal_app.formats.openai_chat import (
    json_exit_code,
    numbered_call,
    parse_arguments,
    result_call_id,
)
from journal_app.formats.source import Source
from journal_app.formats.titles import short_title

NAME = "openai-responses"

ROLES = ("system", "developer", "user", "assistant")
CALLS = ("function_call", "custom_tool_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")
TYPED = ("message", "reasoning", *CALLS, *OUTPUTS)
TEXT_PARTS = ("input_text", "output_text", "text", "summary_text")


def _lists(source: Source) -> list[tuple[str, list[Any]]] | None:
    """``[(location prefix, items), ...]`` in reading order, or ``None``."""
    data = source.data
    if isinstance(data, list):
        return [("index", data)]
    if not isinstance(data, dict):
        return None
    found = [(key, data[key]) for key in ("input", "output") if isinstance(data.get(key), list)]
    return found or None


def detect(source: Source) -> bool:
    """True for Responses items: some item has a Responses ``type`` (message, function_call,
    function_call_output, reasoning...) and none carries Chat Completions' ``tool_calls`` or
    ``tool_call_id`` or Anthropic's block types."""
    source = source.detection_view()  # a large file: its bounded preview
    if source.kind != "json":
        return False
    found = _lists(source)
    if not found:
        return False
    items = [i for _, lst in found for i in lst]
    if not items or not all(isinstance(i, dict) for i in items):
        return False
    if any("tool_calls" in i or "tool_call_id" in i for i in items):
        return False
    return any(i.get("type") in TYPED for i in items)


def _text(path: Path, where: str, field: str, value: Any) -> tuple[str, list[Any] | None]:
    if isinstance(value, str):
        return value, None
    if not isinstance(value, list):
        raise FormatError(
            path, where, field, f"expected a string or a list of parts, got {type(value).__name__}"
        )
    text = parts_text(path, where, field, value, TEXT_PARTS)
    plain = len(value) == 1 and set(value[0]) == {"type", "text"}
    return text, None if plain else value


def _item(
    path: Path, where: str, item: Any, used: dict[str, int], pending: dict[str, str]
) -> ParsedEntry:
    if not isinstance(item, dict):
        raise FormatError(path, where, "", f"expected an object, got {type(item).__name__}")
    kind = item.get("type", "message" if "role" in item else None)
    if kind is None:
        raise FormatError(path, where, "type", "field is missing")
    if kind == "message":
        role = item.get("role")
        if role not in ROLES:
            raise FormatError(path, where, "role", f"unknown role {role!r}")
        if "content" not in item or item["content"] is None:
            raise FormatError(path, where, "content", "content is missing or null")
        text, blocks = _text(path, where, "content", item["content"])
        entry = message(role, text, source_ref=where)
        if blocks is not None:
            entry.content["blocks"] = blocks
        entry.metadata = {k: v for k, v in item.items() if k not in ("type", "role", "content")}
        return entry
    if kind in CALLS:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise FormatError(path, where, "call_id", "a call needs its call_id")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise FormatError(path, where, "name", "a call needs its tool name")
        key = "input" if kind == "custom_tool_call" else "arguments"
        if key not in item:
            raise FormatError(path, where, key, "field is missing")
        arguments, raw = parse_arguments(item[key])
        meta = {k: v for k, v in item.items() if k not in ("call_id", "name", key)}
        return numbered_call(
            call_id, name, arguments, raw, meta, used=used, pending=pending, source_ref=where
        )
    if kind in OUTPUTS:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise FormatError(path, where, "call_id", "an output needs the call_id of its call")
        if "output" not in item:
            raise FormatError(path, where, "output", "field is missing")
        output, blocks = _text(path, where, "output", item["output"])
        code = json_exit_code(output)
        meta = {k: v for k, v in item.items() if k not in ("call_id", "output")}
        entry = tool_result(
            result_call_id(call_id, pending, meta),
            output,
            is_error=bool(code),
            exit_code=code,
            source_ref=where,
            metadata=meta,
        )
        if blocks is not None:
            entry.content["blocks"] = blocks
        return entry
    if kind == "reasoning":
        summary = item.get("summary") or []
        text, _ = _text(path, where, "summary", summary)
        content: dict[str, Any] = {}
        if text:
            content["text"] = text
        if isinstance(item.get("encrypted_content"), str):
            content["encrypted"] = item["encrypted_content"]
        if not content:
            content["text"] = ""
        meta = {k: v for k, v in item.items() if k not in ("type", "summary", "encrypted_content")}
        return ParsedEntry(
            kind="reasoning", role="assistant", content=content, source_ref=where, metadata=meta
        )
    return ParsedEntry(
        kind="event",
        role="runtime",
        content={"type": "responses_item", "item_type": str(kind)},
        source_ref=where,
        metadata={"item": item},
    )


def parse(source: Source) -> ParsedSession:
    """Parse Responses items into a :class:`ParsedSession`.

    Raises:
        FormatError: naming the file, ``index N`` / ``input[N]`` / ``output[N]`` and the
            field: an item that is not an object, without ``type`` (and not a short-form
            message), a message with an unknown role or null content, a call without
            ``call_id`` or ``name``, an output without ``call_id`` or ``output``.
    """
    path = source.path
    found = _lists(source) if source.kind == "json" else None
    if found is None:
        raise FormatError(path, "", "", "not a list of OpenAI Responses items")
    data = source.data if isinstance(source.data, dict) else {}
    entries: list[ParsedEntry] = []
    instructions = data.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise FormatError(path, "", "instructions", "expected a string")
        entries.append(message("system", instructions, source_ref="instructions"))
    used: dict[str, int] = {}
    pending: dict[str, str] = {}
    for prefix, items in found:
        first = len(entries)
        for i, item in enumerate(items):
            where = f"index {i}" if prefix == "index" else f"{prefix}[{i}]"
            entries.append(_item(path, where, item, used, pending))
        if prefix == "output" and isinstance(data.get("usage"), dict) and len(entries) > first:
            entries[first].usage = data["usage"]
    title = next(
        (
            short_title(e.content["text"])
            for e in entries
            if e.kind == "message" and e.role == "user"
        ),
        "",
    )
    metadata = {
        k: v for k, v in data.items() if k not in ("input", "output", "instructions", "usage")
    }
    return ParsedSession(format=NAME, entries=entries, title=title, metadata=metadata)
