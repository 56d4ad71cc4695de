"""Prompt-cache markers on a compacted Anthropic request, and the shared prefix of two
requests. Pure (README "Prompt caching through the proxy").

The context builder (:func:`ledger_app.services.context.context_build`) writes the compacted
request afresh, without the client's ``cache_control`` markers. The proxy puts them back:

* a block of the compacted request equal to a block the client marked (the marker aside)
  gets the client's marker again;
* one marker goes on the last block before the verbatim tail (the stable prefix: system,
  pins, the continuation record and the rounds already folded or projected), so the
  provider caches everything that stays the same until the next fold;
* Anthropic takes at most :data:`MAX_MARKS` markers in the whole request, ``tools``
  included: the client's markers on its tool definitions stay as sent (the proxy forwards
  ``tools`` unchanged) and count first; of what is left, the stable-prefix one is kept, then
  the client's from the end of the request backwards.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Collection, Sequence
from typing import Any

#: the most ``cache_control`` markers Anthropic accepts in one request
MAX_MARKS = 4
#: the marker the proxy places at the end of the stable prefix
STABLE_MARK = {"type": "ephemeral"}


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def block_digest(role: str, block: Any) -> str:
    """Digest of a block without its marker and without fields left at their default
    (``None``, ``false``: the builder writes ``"is_error": false`` where a client omits it)."""
    plain = (
        {
            k: v
            for k, v in block.items()
            if k != "cache_control" and v is not None and v is not False
        }
        if isinstance(block, dict)
        else block
    )
    text = json.dumps([role, plain], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def client_marks(body: dict[str, Any]) -> dict[str, Any]:
    """``{block digest: marker}`` of the blocks the client marked (system and messages)."""
    marks: dict[str, Any] = {}
    for block in _blocks(body.get("system")):
        if isinstance(block, dict) and "cache_control" in block:
            marks[block_digest("system", block)] = block["cache_control"]
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        for block in _blocks(message.get("content")):
            if isinstance(block, dict) and "cache_control" in block:
                marks[block_digest(str(message.get("role")), block)] = block["cache_control"]
    return marks


def stable_end(sources: Sequence[Collection[str]], tail: Collection[str]) -> int:
    """How many leading messages hold no entry of the verbatim tail.

    Args:
        sources: per message of the compacted request, the (short) entry hashes it was made
            from (the builder's ``debug_trace["sources"]``).
        tail: the short hashes of the tail's entries.
    """
    for n, hashes in enumerate(sources):
        if any(h in tail for h in hashes):
            return n
    return len(sources)


def marks_place(
    out: dict[str, Any], marks: dict[str, Any], stable: int
) -> tuple[dict[str, Any], int]:
    """``out`` (a compacted Anthropic request) with the client's markers back and one at the
    end of the stable prefix (after the first ``stable`` messages; on the system when no
    message is stable). ``out`` is not changed. Markers already on ``out["tools"]`` are kept
    and count against :data:`MAX_MARKS` (Anthropic refuses a request with more).

    Returns:
        ``(request, markers in it)``: tools' markers included, at most :data:`MAX_MARKS`
        (unless the tools alone carry more, which the proxy leaves to the provider to refuse).
    """
    out = copy.deepcopy(out)
    tool_marks = sum(
        1 for t in out.get("tools") or [] if isinstance(t, dict) and "cache_control" in t
    )
    slots: list[tuple[dict[str, Any], Any]] = []  # (block, marker) in request order
    system = out.get("system")
    if system:
        out["system"] = _blocks(system)
        for block in out["system"]:
            slots.append((block, marks.get(block_digest("system", block))))
    stable_block: dict[str, Any] | None = out["system"][-1] if system else None
    for n, message in enumerate(out.get("messages") or []):
        blocks = _blocks(message.get("content"))
        if not blocks:
            continue
        message["content"] = blocks
        for block in blocks:
            if isinstance(block, dict):
                slots.append((block, marks.get(block_digest(str(message.get("role")), block))))
        if n < stable and isinstance(blocks[-1], dict):
            stable_block = blocks[-1]
    for block, _ in slots:
        block.pop("cache_control", None)
    budget = max(0, MAX_MARKS - tool_marks)
    placed = 0
    if stable_block is not None and budget > 0:
        stable_block["cache_control"] = dict(STABLE_MARK)
        placed += 1
    for block, marker in reversed(slots):
        if placed == budget:
            break
        if marker is not None and block is not stable_block:
            block["cache_control"] = marker
            placed += 1
    return out, tool_marks + placed


def shared_prefix(
    previous: dict[str, Any], current: dict[str, Any], count: Callable[[str, Any], int]
) -> tuple[int, int]:
    """``(tokens of the longest common block prefix, tokens of previous)`` of two requests.

    Blocks are compared in request order (system blocks, then each message's blocks) with
    their markers aside; ``count(role, block)`` gives a block's tokens.
    """

    def flat(request: dict[str, Any]) -> list[tuple[str, Any]]:
        out = [("system", b) for b in _blocks(request.get("system"))]
        for m in request.get("messages") or []:
            out += [(str(m.get("role")), b) for b in _blocks(m.get("content"))]
        return out

    before, after = flat(previous), flat(current)
    total = sum(count(role, b) for role, b in before)
    shared = 0
    for (role_a, a), (role_b, b) in zip(before, after, strict=False):
        if role_a != role_b or block_digest(role_a, a) != block_digest(role_b, b):
            break
        shared += count(role_a, a)
    return shared, total
