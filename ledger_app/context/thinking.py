"""Anthropic thinking blocks the Messages API requires back. Pure.

With extended thinking on, Anthropic's Messages API requires the last assistant message of an
ongoing tool loop (the request ends with that message's tool results) to carry its thinking
blocks unmodified, signature included ("a final assistant message must start with a thinking
block"); thinking blocks of earlier turns may be left out (the API ignores them). So the
context keeps exactly those: the ``thinking`` / ``redacted_thinking`` blocks of the last
API round, when that round issued tool calls, in the Anthropic target format only.

Privacy: :mod:`journal_app.privacy` hides reasoning from every UI and API read; a model
request for the provider that produced the block is the exception the provider's API
requires. The block goes out byte for byte (the ``signature`` is verified by Anthropic, so
the text is never redacted or clipped); no other view carries it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from journal_app.rounds import Round
from ledger_app.context.assembly import Part
from ledger_app.entry_view import EntryView


def thinking_block(e: EntryView) -> dict[str, Any] | None:
    """The Anthropic block of a reasoning entry Anthropic produced, verbatim: ``{"type":
    "thinking", "thinking", "signature"}`` (the signature kept in the entry's metadata by the
    importers) or ``{"type": "redacted_thinking", "data"}``; ``None`` for any other entry
    (an OpenAI/Codex reasoning summary has no signature and is never sent back)."""
    if e.kind != "reasoning":
        return None
    meta = e.meta if isinstance(e.meta, dict) else {}
    encrypted = e.content.get("encrypted")
    if isinstance(encrypted, str) and encrypted and meta.get("signature") is None:
        return {"type": "redacted_thinking", "data": encrypted}
    text = e.content.get("text")
    signature = meta.get("signature")
    if isinstance(text, str) and isinstance(signature, str) and signature:
        return {"type": "thinking", "thinking": text, "signature": signature}
    return None


def loop_thinking(
    rounds: Sequence[Round], by_seq: Mapping[int, EntryView]
) -> list[tuple[EntryView, dict[str, Any]]]:
    """``[(entry, block)]`` the request must carry: the thinking blocks of the last round
    when it is an API round that issued tool calls (an ongoing tool loop), in journal order;
    ``[]`` otherwise (the conversation's last turn is a user message, or no block has a
    signature).

    Args:
        rounds: the rounds the request shows, in order (the unfinished tail round excluded).
        by_seq: seq -> entry.
    """
    if not rounds or rounds[-1].kind != "api" or not rounds[-1].call_ids:
        return []
    out = []
    for seq in rounds[-1].seqs:
        block = thinking_block(by_seq[seq])
        if block is not None:
            out.append((by_seq[seq], block))
    return out


def thinking_part(e: EntryView, block: dict[str, Any]) -> Part:
    """The request part of one kept thinking block (kind ``thinking``; the block verbatim in
    ``blocks``, never redacted: :func:`ledger_app.context.final_request.final_parts`)."""
    return Part(role="assistant", kind="thinking", text="", entry=e, blocks=[block])
