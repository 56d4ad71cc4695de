"""The API's JSON request bodies: the parser and the field paths its errors name.

:class:`ApiParser` is the ``NinjaAPI`` parser (``config/api.py``): UTF-8 JSON only, no
NaN/Infinity, no lone UTF-16 surrogates, each refusal a :class:`BodyError` (HTTP 400) naming
the place. :func:`field_path` and :func:`entry_of` write the ``field`` and ``entry`` of the
one error shape (docs/architecture.md).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest
from ninja.parser import Parser

from journal_app.errors import MalformedBody


def field_path(parts: Sequence[str | int]) -> str:
    """``entries[0].content.text`` for ``["entries", 0, "content", "text"]``.

    Args:
        parts: keys (``str``) and list indexes (``int``) from the outside in.

    Returns:
        The dotted path, an index as ``[i]``; ``""`` for no parts.
    """
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def entry_of(field: str | None) -> str | None:
    """``entries[3]`` for a field path inside an append batch, else ``None``."""
    if field and field.startswith("entries[") and "]" in field:
        return field[: field.index("]") + 1]
    return None


class BodyError(MalformedBody):
    """A JSON body that cannot become request data (HTTP 400 ``malformed_json``)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message, field=field, entry=entry_of(field))


class InvalidUnicode(BodyError):
    """A JSON string (or object key) holding a lone UTF-16 surrogate (HTTP 400)."""

    code = "invalid_unicode"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def lone_surrogate_path(value: Any) -> str | None:
    """The path (``entries[0].content.text``) of the first string holding a lone surrogate.

    ``json.loads`` turns ``"\\ud800"`` into a Python string with an unpaired surrogate (a
    valid pair such as ``"\\ud83d\\ude00"`` becomes one character and passes). Such a string
    has no UTF-8 form and no RFC 8785 form, so it can be neither hashed nor stored
    (docs/design.md section 4). Walks iteratively (no recursion limit on deep input).

    Returns:
        The path, ``"(key)"``-suffixed for an object key, ``""`` for a top-level string, or
        ``None`` when every string is clean.
    """
    stack: deque[tuple[list[str | int], Any]] = deque([([], value)])
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if _has_surrogate(item):
                return field_path(path)
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if _has_surrogate(key):
                    return field_path([*path, "(key)"])
                stack.append(([*path, key], child))
        elif isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                stack.append(([*path, index], item[index]))
    return None


class ApiParser(Parser):
    """JSON bodies: UTF-8 only, no NaN/Infinity, no lone surrogates; errors name the place."""

    def parse_body(self, request: HttpRequest) -> Any:
        raw = request.body
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BodyError(f"the body is not valid UTF-8 (byte offset {exc.start})") from None
        try:
            data = json.loads(text, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            raise BodyError(
                f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
        except RecursionError:
            raise BodyError("malformed JSON: nested too deeply") from None
        except ValueError as exc:
            raise BodyError(f"malformed JSON: {exc}") from None
        where = lone_surrogate_path(data)
        if where is not None:
            raise InvalidUnicode(
                "a JSON string holds a lone UTF-16 surrogate escape (e.g. \\ud800 without its "
                "pair): it has no UTF-8 form and cannot be stored or hashed; nothing written",
                field=where or None,
            )
        return data
