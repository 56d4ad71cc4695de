"""Reading a source's fields: the checks and readers several importers share. Pure.

Each reader returns the value it reads or raises :class:`~journal_app.formats.base.FormatError`
naming the file, the place and the field, as the importers' contract asks
(:mod:`journal_app.formats.base`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from journal_app.formats.base import FormatError


def require_str(path: str | Path, location: str, field_name: str, value: Any) -> str:
    """Return ``value`` if it is a string, else raise :class:`FormatError` for that field."""
    if value is None:
        raise FormatError(path, location, field_name, "content is null")
    if not isinstance(value, str):
        raise FormatError(
            path, location, field_name, f"expected a string, got {type(value).__name__}"
        )
    return value


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
