"""How the context writes an entry: its short hash name and a call's argument text. Pure.

Clipping a text to one line is :func:`ledger_app.fact_text.clip`, the one clip facts and
the context share.
"""

from __future__ import annotations

import json

from ledger_app.budget import SUPPORT_PREFIX
from ledger_app.entry_view import EntryView


def short(h: str) -> str:
    """An entry hash as the context names it: ``sha256:`` and the first hex digits."""
    return f"sha256:{h[:SUPPORT_PREFIX]}"


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
