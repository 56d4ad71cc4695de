"""Checks of a proxied request body before and right after parsing. Pure.

A body is refused before ``json.loads`` when its arrays and objects nest deeper than
``PROXY_MAX_JSON_DEPTH`` (so no parser recursion and no deep walk), and after it when a
string or key holds a lone UTF-16 surrogate (``"\\ud800"``: no UTF-8 form, it can be neither
hashed nor stored) or a NUL character (PostgreSQL text cannot hold it). README
"Proxy errors" lists the answers (422 naming the field).
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Any

#: bytes that are neither structure nor quotes (deleted first: the rest is a few per cent)
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'"[]{}')
#: the brackets as steps of +1 / -1 (signed bytes); quotes deleted
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_QUOTE = b'"'


def json_depth(raw: bytes) -> int:
    """How deep the arrays and objects of JSON text ``raw`` nest (0 for a scalar, 1 for
    ``[]``); string contents are skipped. Malformed text gives some number (the parser
    refuses it afterwards).

    Every step runs in C (no Python step per bracket): the escaped backslashes and quotes
    are taken out, so every remaining quote opens or closes a string; what is not a quote
    or a bracket goes, and the text outside strings is every other piece between quotes;
    its brackets become +1 / -1 and the depth is the highest running sum.
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    pieces = raw.translate(None, _NOT_STRUCTURE).split(_QUOTE)
    structure = b"".join(pieces[::2]).translate(_STEP, _QUOTE)
    return max(accumulate(memoryview(structure).cast("b"), initial=0))


#: a NUL or a UTF-16 surrogate in a parsed string (a surrogate there is always a lone one)
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")
#: the JSON escapes that can produce one: ``\u0000`` and ``\ud800``-``\udfff`` (UTF-8 text
#: holds neither raw, and a raw NUL in a string is refused by the parser)
_BAD_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89abcdefABCDEF])")


def _bad_char(text: str) -> str | None:
    found = _BAD_CHAR.search(text)
    if found is None:
        return None
    return "a NUL character" if found.group() == "\x00" else "a lone UTF-16 surrogate"


def may_hold_bad_text(raw: bytes) -> bool:
    """Whether JSON text ``raw`` holds an escape that could decode to a NUL or a surrogate:
    when it does not, :func:`bad_text` of its parsed value is ``None`` and need not walk it
    (one scan of the bytes instead of a walk of every string)."""
    return _BAD_ESCAPE.search(raw) is not None


def bad_text(value: Any) -> tuple[str, str] | None:
    """A string (or object key) of parsed JSON that cannot be journaled, if any.

    Returns:
        ``(path, what)``, e.g. ``("messages[1].content", "a NUL character")``, or ``None``
        when every string is clean. Walks iteratively (no recursion on deep input).
    """
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            what = _bad_char(item)
            if what:
                return path, what
        elif isinstance(item, dict):
            for key, child in item.items():
                what = _bad_char(key)
                if what:
                    return f"{path}(key)", what
                pending.append((f"{path}.{key}" if path else key, child))
        elif isinstance(item, list):
            pending.extend((f"{path}[{n}]", child) for n, child in enumerate(item))
    return None
