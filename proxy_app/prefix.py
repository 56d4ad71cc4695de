"""Digests of a request's message list prefixes, for the proxy's prefix index. Pure.

A runtime resends its whole history on every call: the previous request's messages, the
answer, and the new messages. The proxy remembers, per session, where each request's
messages were placed (``prefix digest -> branch, seq, entry hash``; README "How the proxy
places a history") so the next call finds the stored prefix from one digest and reads,
keys and appends only the messages after it.

The digest of ``messages[:m]`` is the sha256 of their JSON (sorted keys, compact
separators) together with the request's system prompt or instructions, with every
``cache_control`` marker taken out of the text first: clients move their cache
breakpoints from call to call, and the proxy's matching ignores them too
(:func:`proxy_app.matching.normalised_content`). Equal digests mean equal messages up to
those markers, so the history they were placed as is the same.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

#: a ``"cache_control": {...}`` member in compact JSON (a quote inside a string is escaped,
#: so this never matches string content); the comma on one side goes with it
_CACHE_MARK = re.compile(r',"cache_control":\{[^{}]*\}|"cache_control":\{[^{}]*\},?')


def request_messages(surface: str, body: dict[str, Any]) -> tuple[Any, list[Any]]:
    """``(head, messages)`` of a checked request: the system prompt (Anthropic ``system``,
    Responses ``instructions``; ``None`` for Chat Completions, whose system is a message)
    and the list the history is read from (``messages``, or the Responses ``input`` items,
    a string input being one user message)."""
    if surface == "responses":
        value = body["input"]
        items = [{"role": "user", "content": value}] if isinstance(value, str) else value
        return body.get("instructions") or None, list(items)
    head = body.get("system") or None if surface == "anthropic" else None
    return head, list(body["messages"])


def prefix_digest(head: Any, messages: Sequence[Any], m: int) -> str:
    """The digest of the first ``m`` messages (with ``head``), hex sha256.

    Args:
        head, messages: from :func:`request_messages`.
        m: how many messages, ``0 <= m <= len(messages)``.
    """
    text = json.dumps(
        [head, list(messages[:m])], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    if '"cache_control":' in text:
        text = _CACHE_MARK.sub("", text)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _piece(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    if '"cache_control":' in text:
        text = _CACHE_MARK.sub("", text)
    return text.encode("utf-8", "surrogatepass")


def digest_start(head: Any) -> Any:
    """The sha256 state of :func:`prefix_digest`'s text before its first message: the
    digest of ``m`` messages is this state fed their JSON (:func:`digest_extend`), then
    closed (:func:`digest_value`). The text is built a message at a time (each message's
    JSON is a slice of the whole list's, and a cache marker never spans two messages), so
    a state kept at ``m`` extends to any longer prefix of the same messages."""
    state = hashlib.sha256(b"[")
    state.update(_piece(head))
    state.update(b",[")
    return state


def digest_extend(state: Any, messages: Sequence[Any], start: int) -> None:
    """Feed ``messages[start:]`` to ``state``, a :func:`digest_start` state that holds the
    first ``start`` messages (changed in place: copy a kept state first)."""
    for i in range(start, len(messages)):
        if i:
            state.update(b",")
        state.update(_piece(messages[i]))


def digest_value(state: Any) -> str:
    """:func:`prefix_digest` of the messages ``state`` holds (``state`` is not changed)."""
    done = state.copy()
    done.update(b"]]")
    return str(done.hexdigest())
