"""Importer for Anthropic Messages API conversations (docs/design.md section 4, "Importers").

Pure module. There is no corpus file for this format: API clients send it. Accepted shapes:

* a bare JSON list of messages ``[{role: "user"|"assistant", content}, ...]``;
* a request-like object ``{"system": str | [text blocks], "messages": [...], ...}``.

``content`` is a string or a list of typed blocks. Blocks are read in order:

* ``text``, ``image``, ``document`` and any other non-tool block -> gathered, with their
  neighbours, into one ``message`` entry: ``content["text"]`` joins the text blocks with
  newlines; ``content["blocks"]`` keeps the verbatim blocks unless the group was one plain
  text block. A base64 image is not text: its ``media_type`` and decoded byte size go to
  ``metadata["images"]`` while the data itself stays verbatim in ``content["blocks"]``.
* ``tool_use`` (assistant only) -> ``tool_call`` (``input`` is the arguments).
* ``tool_result`` (user only) -> ``tool_result`` (``is_error`` from the block; a list
  content is joined like text and kept in ``content["blocks"]``).
* ``thinking`` -> ``reasoning`` ``{"text"}`` (``signature`` in metadata);
  ``redacted_thinking`` -> ``reasoning`` ``{"encrypted"}``.

User messages are authoritative and not marked ``injected`` (the format has no marker for
injected context). The top-level ``system`` becomes the first entry, a system message.
Fields not modelled (message ids, model, stop_reason, cache_control...) go to metadata;
a message-level ``usage`` object goes to the first entry's ``usage``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from journal_app.formats.base import (
    FormatError,
    ParsedEntry,
    ParsedSession,
    message,
    tool_call,
    tool_result,
)
from journal_app.formats.fields import role_of
from journal_app.formats.source import Source
from journal_app.formats.titles import short_title

NAME = "anthropic-messages"

ROLES = ("user", "assistant")
# Block types that only Anthropic uses (OpenAI content parts are text/image_url/...).
_ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking", "image")
_OPENAI_MARKERS = ("tool_calls", "tool_call_id", "function_call")
_OPENAI_ROLES = ("system", "developer", "tool", "function")


def _messages(source: Source) -> tuple[list[Any], str, dict[str, Any]] | None:
    data = source.data
    if isinstance(data, list):
        return data, "index", {}
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return data["messages"], "messages", {k: v for k, v in data.items() if k != "messages"}
    return None


def _where(prefix: str, index: int) -> str:
    return f"index {index}" if prefix == "index" else f"{prefix}[{index}]"


def detect(source: Source) -> bool:
    """Return True for an Anthropic Messages conversation.

    True when no message carries an OpenAI marker (``tool_calls``, ``tool_call_id``, roles
    system/developer/tool) and either some message has list content with an Anthropic
    block (``tool_use``, ``tool_result``, ``thinking``, ``redacted_thinking``, ``image``,
    or ``text`` blocks with no OpenAI-only part beside them) or the object has a top-level
    ``system`` string next to ``messages``. Plain string-only lists are left to openai-chat.
    """
    source = source.detection_view()  # a large file: its bounded preview
    if source.kind != "json":
        return False
    found = _messages(source)
    if found is None or not found[0]:
        return False
    items, _, wrapper = found
    typed = False
    for m in items:
        if not isinstance(m, dict) or "role" not in m:
            return False
        if m.get("role") in _OPENAI_ROLES or any(k in m for k in _OPENAI_MARKERS):
            return False
        content = m.get("content")
        if isinstance(content, list):
            for block in content:
                kind = block.get("type") if isinstance(block, dict) else None
                if kind in _ANTHROPIC_BLOCKS or kind == "text":
                    typed = True
                elif kind in ("image_url", "input_audio", "file", "refusal"):
                    return False
    return typed or isinstance(wrapper.get("system"), str | list)


def _image_info(block: dict[str, Any]) -> dict[str, Any]:
    """``{"media_type", "bytes"}`` of a base64 image block (size computed, not decoded)."""
    source = block.get("source")
    src: dict[str, Any] = source if isinstance(source, dict) else {}
    info: dict[str, Any] = {"source_type": src.get("type")}
    if "media_type" in src:
        info["media_type"] = src["media_type"]
    data = src.get("data")
    if src.get("type") == "base64" and isinstance(data, str):
        data = "".join(data.split())
        info["bytes"] = len(data) * 3 // 4 - len(data) + len(data.rstrip("="))
    elif "url" in src:
        info["url"] = src["url"]
    return info


def _message_entry(role: str, where: str, blocks: list[dict[str, Any]]) -> ParsedEntry:
    texts = [b["text"] for b in blocks if b.get("type") == "text"]
    entry = message(role, "\n".join(texts), source_ref=where)
    plain = len(blocks) == 1 and set(blocks[0]) == {"type", "text"}
    if not plain:
        entry.content["blocks"] = blocks
    images = [_image_info(b) for b in blocks if b.get("type") == "image"]
    if images:
        entry.metadata["images"] = images
    return entry


def _result_output(path: Path, where: str, field: str, value: Any) -> tuple[str, list[Any] | None]:
    if value is None:
        return "", None
    if isinstance(value, str):
        return value, None
    if not isinstance(value, list):
        raise FormatError(
            path, where, field, f"expected a string or a list, got {type(value).__name__}"
        )
    texts = []
    for j, b in enumerate(value):
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise FormatError(path, where, f"{field}[{j}].type", "block has no type")
        if b["type"] == "text":
            if not isinstance(b.get("text"), str):
                raise FormatError(path, where, f"{field}[{j}].text", "expected a string")
            texts.append(b["text"])
    plain = len(value) == 1 and set(value[0]) == {"type", "text"}
    return "\n".join(texts), None if plain else value


def _require_id(path: Path, where: str, field: str, value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise FormatError(path, where, field, f"{what} is missing or not a string")
    return value


def _blocks(path: Path, where: str, role: str, content: list[Any]) -> list[ParsedEntry]:
    """Entries for one message's block list, in block order."""
    entries: list[ParsedEntry] = []
    group: list[dict[str, Any]] = []

    def flush() -> None:
        if group:
            entries.append(_message_entry(role, where, list(group)))
            group.clear()

    for i, b in enumerate(content):
        field = f"content[{i}]"
        ref = f"{where}.{field}"
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise FormatError(path, where, f"{field}.type", "block has no type")
        kind = b["type"]
        if kind == "text":
            if not isinstance(b.get("text"), str):
                raise FormatError(path, where, f"{field}.text", "expected a string")
            group.append(b)
        elif kind == "tool_use":
            if role != "assistant":
                raise FormatError(path, where, f"{field}.type", "tool_use in a user message")
            call_id = _require_id(path, where, f"{field}.id", b.get("id"), "tool_use id")
            name = _require_id(path, where, f"{field}.name", b.get("name"), "tool name")
            if "input" not in b:
                raise FormatError(path, where, f"{field}.input", "field is missing")
            meta = {k: v for k, v in b.items() if k not in ("type", "id", "name", "input")}
            flush()
            entries.append(tool_call(call_id, name, b["input"], source_ref=ref, metadata=meta))
        elif kind == "tool_result":
            if role != "user":
                raise FormatError(
                    path, where, f"{field}.type", "tool_result in an assistant message"
                )
            call_id = _require_id(
                path, where, f"{field}.tool_use_id", b.get("tool_use_id"), "tool_use_id"
            )
            is_error = b.get("is_error", False)
            if not isinstance(is_error, bool):
                raise FormatError(path, where, f"{field}.is_error", "expected a boolean")
            output, extra_blocks = _result_output(path, where, f"{field}.content", b.get("content"))
            meta = {
                k: v
                for k, v in b.items()
                if k not in ("type", "tool_use_id", "content", "is_error")
            }
            if b.get("content", "") is None:
                meta["content"] = None
            flush()
            entry = tool_result(call_id, output, is_error=is_error, source_ref=ref, metadata=meta)
            if extra_blocks is not None:
                entry.content["blocks"] = extra_blocks
            entries.append(entry)
        elif kind in ("thinking", "redacted_thinking"):
            key, out = ("thinking", "text") if kind == "thinking" else ("data", "encrypted")
            if not isinstance(b.get(key), str):
                raise FormatError(path, where, f"{field}.{key}", "expected a string")
            meta = {k: v for k, v in b.items() if k not in ("type", key)}
            flush()
            entries.append(
                ParsedEntry(
                    kind="reasoning",
                    role="assistant",
                    content={out: b[key]},
                    source_ref=ref,
                    metadata=meta,
                )
            )
        else:
            group.append(b)
    flush()
    return entries


def _system_entry(path: Path, system: Any) -> ParsedEntry:
    if isinstance(system, str):
        return message("system", system, source_ref="system")
    if isinstance(system, list) and all(
        isinstance(b, dict) and isinstance(b.get("text"), str) for b in system
    ):
        return _message_entry("system", "system", system)
    raise FormatError(path, "", "system", "expected a string or a list of text blocks")


def parse(source: Source) -> ParsedSession:
    """Parse an Anthropic Messages conversation into a :class:`ParsedSession`.

    Args:
        source: a ``kind="json"`` source: a list of messages, or an object with
            ``messages`` (and optional ``system``, ``model``, ``tools``... kept as
            session metadata).

    Returns:
        The session; ``title`` is the first user text, short.

    Raises:
        FormatError: naming the file, ``index N`` / ``messages[N]`` and the field, for a
            message that is not an object, a missing or unknown role, null or mistyped
            content, a block without type, a ``tool_use`` without id or name, a
            ``tool_result`` without ``tool_use_id``. (A result whose id matches no call
            is refused by :func:`journal_app.formats.base.check_pairing`.)
    """
    path = source.path
    found = _messages(source) if source.kind == "json" else None
    if found is None:
        raise FormatError(path, "", "", "not an Anthropic Messages conversation")
    items, prefix, wrapper = found
    entries: list[ParsedEntry] = []
    if "system" in wrapper:
        entries.append(_system_entry(path, wrapper.pop("system")))
    title = ""
    for i, m in enumerate(items):
        where = _where(prefix, i)
        role = role_of(path, where, m, ROLES)
        if "content" not in m:
            raise FormatError(path, where, "content", "field is missing")
        content = m["content"]
        if content is None:
            raise FormatError(path, where, "content", "content is null")
        if isinstance(content, str):
            made = [message(role, content, source_ref=where)]
        elif isinstance(content, list):
            made = _blocks(path, where, role, content)
            if not made:
                made = [message(role, "", source_ref=where)]
                made[0].content["blocks"] = []
        else:
            raise FormatError(
                path, where, "content", f"expected a string or a list, got {type(content).__name__}"
            )
        meta = {k: v for k, v in m.items() if k not in ("role", "content", "usage")}
        made[0].metadata = {**meta, **made[0].metadata}
        if isinstance(m.get("usage"), dict):
            made[0].usage = m["usage"]
        elif "usage" in m:
            made[0].metadata["usage"] = m["usage"]
        if role == "user" and not title:
            first = next((e for e in made if e.kind == "message" and e.content["text"]), None)
            if first is not None:
                title = short_title(first.content["text"])
        entries.extend(made)
    return ParsedSession(format=NAME, entries=entries, title=title, metadata=wrapper)
