"""Readable text of an entry's content, by kind (pure).

Used for token counts, search, previews and display, so all of them agree on what an
entry "says". Content shapes are those of :mod:`journal_app.formats.base`.
"""

from __future__ import annotations

import json
from typing import Any


def content_text(kind: str, content: dict[str, Any]) -> str:
    """Return the text of ``content`` for an entry of ``kind``.

    * message, reasoning: ``content["text"]`` (encrypted reasoning gives ``""``);
    * tool_call: ``name(arguments)`` with arguments as compact JSON;
    * tool_result: ``content["output"]``;
    * event and anything else: the content as JSON.
    """
    if kind == "tool_call":
        args = content.get("arguments")
        rendered = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        return f"{content.get('name', '')}({rendered})"
    if kind == "tool_result":
        return str(content.get("output", ""))
    if kind in ("message", "reasoning"):
        return str(content.get("text", "") or "")
    return json.dumps(content, ensure_ascii=False)
