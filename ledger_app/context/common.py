"""What every part of the context builder shares: formats, input errors, entry text helpers.

Pure module: no Django, no database (DESIGN.md section 6).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ledger_app.budget import SUPPORT_PREFIX
from ledger_app.entry_view import EntryView
from ledger_app.validation import ArtifactInfo

#: Target format -> the ``format`` label of the model view.
TARGETS = {"openai": "openai-chat", "anthropic": "anthropic-messages"}

#: ``fold(upto) -> (ledger state, covered_upto)``: grows the ledger up to seq ``upto``.
FoldCallback = Callable[[int], tuple[Mapping[str, Any], int]]
#: ``reference -> ArtifactInfo | None``: what the store says about an artifact reference.
ArtifactResolver = Callable[[str], ArtifactInfo | None]


class ContextInputError(ValueError):
    """Budgets or options that cannot describe a request (a budget below one, unknown format,
    an output reserve not below the window). ``field`` names the input at fault."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def short(h: str) -> str:
    """An entry hash as the context names it: ``sha256:`` and the first hex digits."""
    return f"sha256:{h[:SUPPORT_PREFIX]}"


def clip(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs joined), cut to ``limit`` characters with ``…``."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_ARGS: dict[str, str] = {}


def args_text(call: EntryView) -> str:
    """A call's arguments as the JSON text a request carries (the source's own text when
    the journal kept it). Remembered by entry hash: an entry's arguments never change."""
    cached = _ARGS.get(call.entry_hash)
    if cached is not None:
        return cached
    raw = call.meta.get("raw_arguments") if isinstance(call.meta, dict) else None
    args = call.content.get("arguments")
    if isinstance(raw, str):
        text = raw
    elif isinstance(args, str):
        text = args
    else:
        text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    if len(_ARGS) > 50_000:
        _ARGS.clear()
    _ARGS[call.entry_hash] = text
    return text
