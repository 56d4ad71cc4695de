"""Matching a runtime's resent history against a branch of the journal. Pure.

Agent runtimes resend the whole conversation on every model call. The proxy turns the
request into journal items with the importers the journal already has
(:mod:`journal_app.formats.openai_chat`, :mod:`journal_app.formats.anthropic`) and compares
them, in order, with the branch's entries by a **match key**: kind, role, tool call id and
the sha256 of the entry's content, normalised so that what a runtime legitimately changes
between two sends of the same message does not count as a different message:

* keys whose value is ``null`` are dropped (an SDK that echoes ``"citations": null`` back
  sends the same message as the server that left the key out);
* ``cache_control`` markers are dropped (Anthropic runtimes move their cache breakpoints
  from message to message);
* a block list that is then one plain text block is the text alone.

Runtime events, reasoning blocks and answers journaled as interrupted (a stream the client
left) are not part of what a runtime resends, so they carry no key and are skipped on both
sides. The longest common prefix of the two key lists says what to do (see
:func:`plan_placement`): append the request's new suffix, append nothing (the same request
again), or open a new branch at the divergence point (edit-and-resend, a runtime's own
compaction): the journal is never rewritten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journal_app.formats import anthropic, openai_chat, openai_responses
from journal_app.formats.base import FormatError, ParsedEntry, check_pairing
from journal_app.formats.source import Source
from journal_app.hashing import canonical_body
from proxy_app.reading import history_items, known_call_ids

#: kinds a runtime never resends: they are journaled but skipped when matching
UNMATCHED_KINDS = ("event", "reasoning")
#: the request surfaces and the importer that reads each
SURFACES = {"openai": openai_chat, "anthropic": anthropic, "responses": openai_responses}

MatchKey = tuple[str, str, str, str]


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _normalise(v) for k, v in value.items() if v is not None and k != "cache_control"
        }
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


#: the part types that hold only text (Chat Completions / Messages, Responses input, output)
TEXT_PARTS = ("text", "input_text", "output_text")


def normalised_content(kind: str, content: dict[str, Any]) -> dict[str, Any]:
    """``content`` without null values and cache markers; a lone plain text block folded away.

    A lone block is plain text when its type is one of :data:`TEXT_PARTS` and it holds
    nothing but its text (a Responses ``output_text`` with empty ``annotations`` and
    ``logprobs`` included): a runtime that sends an answer back as ``{"role": "assistant",
    "content": "..."}`` resends the same message.
    """
    out: dict[str, Any] = _normalise(content)
    blocks = out.get("blocks")
    if (
        kind in ("message", "tool_result")
        and isinstance(blocks, list)
        and len(blocks) == 1
        and isinstance(blocks[0], dict)
        and blocks[0].get("type") in TEXT_PARTS
        and "text" in blocks[0]
        and not any(v for k, v in blocks[0].items() if k not in ("type", "text"))
    ):
        out.pop("blocks")
    return out


def match_key(
    *,
    kind: str,
    role: str,
    tool_call_id: str,
    content: dict[str, Any],
    metadata: dict[str, Any],
    every: bool = False,
) -> MatchKey | None:
    """The key two sends of one message share, or ``None`` for an item that is not matched.

    Args:
        every: key events and reasoning too (a followed log file holds every record, unlike
            a runtime's resent history, which drops them).

    Returns:
        ``(kind, role, tool_call_id, sha256 hex of the normalised canonical content)``;
        ``None`` for answers marked ``metadata["interrupted"]`` and, unless ``every``, for
        events and reasoning.
    """
    if metadata.get("interrupted") or (kind in UNMATCHED_KINDS and not every):
        return None
    digest = hashlib.sha256(canonical_body(normalised_content(kind, content))).hexdigest()
    return (kind, role, tool_call_id, digest)


def parsed_key(item: ParsedEntry, *, every: bool = False) -> MatchKey | None:
    """:func:`match_key` of a parsed item."""
    return match_key(
        kind=item.kind,
        role=item.role,
        tool_call_id=item.tool_call_id,
        content=item.content,
        metadata=item.metadata,
        every=every,
    )


def keyed(keys: Sequence[MatchKey | None]) -> list[tuple[int, MatchKey]]:
    """``(position, key)`` of the items that carry a key, in order."""
    return [(i, k) for i, k in enumerate(keys) if k is not None]


def common_prefix(a: Sequence[MatchKey], b: Sequence[MatchKey]) -> int:
    """How many leading keys ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass(frozen=True)
class Placement:
    """Where a sequence of items goes in one branch (positions index the lists given).

    Attributes:
        action: ``"append"`` (the branch is a prefix of the items: append ``items[start:]``),
            ``"none"`` (the items are a prefix of the branch: nothing to append) or
            ``"branch"`` (they diverge: a new branch holds ``stored[:stored_end]`` then
            ``items[start:]``).
        matched: how many keyed items matched.
        start: the first item to append (``len(items)`` when none).
        stored_end: for ``"none"`` and ``"branch"``, the stored position just after the last
            matched entry (the revision the items reach is that entry's seq); for
            ``"append"`` the length of the stored list.
    """

    action: str
    matched: int
    start: int
    stored_end: int


def plan_placement(
    stored: Sequence[MatchKey | None], items: Sequence[MatchKey | None]
) -> Placement:
    """Decide how ``items`` (a whole resent history) relate to a branch's ``stored`` entries.

    Both are key lists as :func:`match_key` gives them, in journal order. Idempotent by
    construction: for items already in the branch the answer is ``"none"``.
    """
    s = keyed(stored)
    t = keyed(items)
    k = common_prefix([key for _, key in s], [key for _, key in t])
    after_item = t[k - 1][0] + 1 if k else 0
    after_stored = s[k - 1][0] + 1 if k else 0
    if k == len(s):
        # trailing unkeyed items of the branch (an interrupted answer) stay before the new ones
        return Placement("append", k, after_item if s else 0, len(stored))
    if k == len(t):
        return Placement("none", k, len(items), after_stored)
    return Placement("branch", k, after_item, after_stored)


class RequestInvalid(ValueError):
    """A request body that is not a Chat Completions / Messages request.

    Attributes:
        field: the request field at fault (``"messages[2].role"``, ``"model"``).
        reason: what is wrong, one sentence.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"field {field!r}: {reason}")


def _int_field(body: dict[str, Any], name: str, *, required: bool = False) -> int | None:
    value = body.get(name)
    if value is None:
        if required:
            raise RequestInvalid(name, "field is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestInvalid(name, "expected a positive integer")
    return value


def check_request(surface: str, body: Any) -> int:
    """Check the shape the proxy relies on; return the requested output tokens (0 if none).

    OpenAI Responses: ``model``, ``input`` (non-empty string or list of items),
    ``instructions`` (string), ``previous_response_id`` (string), ``max_output_tokens``.
    OpenAI Chat Completions: ``model`` (string), ``messages`` (non-empty list),
    ``max_tokens``/``max_completion_tokens`` (positive integers when given), ``stream``
    (boolean when given). Anthropic Messages: ``model``, ``messages``, ``max_tokens``
    (required), ``system`` (string or list when given), ``stream``.

    Raises:
        RequestInvalid: naming the field.
    """
    if not isinstance(body, dict):
        raise RequestInvalid("body", f"expected a JSON object, got {type(body).__name__}")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise RequestInvalid("model", "expected the model name (a non-empty string)")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise RequestInvalid("stream", "expected true or false")
    if surface == "responses":
        value = body.get("input")
        if not (isinstance(value, str) and value) and not (isinstance(value, list) and value):
            raise RequestInvalid("input", "expected a non-empty string or list of items")
        if "instructions" in body and not isinstance(body["instructions"], (str, type(None))):
            raise RequestInvalid("instructions", "expected a string")
        previous = body.get("previous_response_id")
        if previous is not None and not (isinstance(previous, str) and previous):
            raise RequestInvalid("previous_response_id", "expected a response id (a string)")
        return _int_field(body, "max_output_tokens") or 0
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestInvalid("messages", "expected a non-empty list of messages")
    if surface == "anthropic":
        if "system" in body and not isinstance(body["system"], (str, list)):
            raise RequestInvalid("system", "expected a string or a list of text blocks")
        return _int_field(body, "max_tokens", required=True) or 0
    tokens = _int_field(body, "max_completion_tokens") or _int_field(body, "max_tokens")
    return tokens or 0


def responses_input(body: dict[str, Any]) -> list[Any]:
    """A Responses request's ``input`` as a list of items (a string is one user message)."""
    value = body["input"]
    return [{"role": "user", "content": value}] if isinstance(value, str) else list(value)


def _request_data(surface: str, body: dict[str, Any]) -> dict[str, Any]:
    if surface == "responses":
        data: dict[str, Any] = {"input": responses_input(body)}
        if body.get("instructions"):
            data["instructions"] = body["instructions"]
        return data
    data = {"messages": body["messages"]}
    if surface == "anthropic" and body.get("system") not in (None, "", []):
        data["system"] = body["system"]
    return data


def _parsed(surface: str, data: dict[str, Any]) -> list[ParsedEntry]:
    source = Source(path=Path("request"), kind="json", data=data)
    try:
        parsed = SURFACES[surface].parse(source)
        check_pairing(source.path, parsed.entries)
    except FormatError as exc:
        raise RequestInvalid(_field_path(exc, surface), exc.reason) from None
    entries: list[ParsedEntry] = parsed.entries
    return entries


def request_items(surface: str, body: dict[str, Any]) -> list[ParsedEntry]:
    """The request's history as journal items, read by the journal's own importer.

    Args:
        surface: ``"openai"``, ``"anthropic"`` or ``"responses"``.
        body: a request that passed :func:`check_request`.

    Raises:
        RequestInvalid: a message the importer refuses (``field`` is
            ``messages[i].<field>``, ``input[i].<field>``, or ``system``), or a tool result
            without its call.
    """
    data = _request_data(surface, body)
    if surface == "responses":
        return _parsed(surface, data)
    return history_items(
        surface,
        data.get("system"),
        data["messages"],
        lambda: _parsed(surface, data),
        lambda messages, at: _read_alone(surface, messages, at),
    )


def _read_alone(surface: str, messages: Sequence[Any], at: int) -> list[ParsedEntry]:
    """The items of ``messages`` read alone as the ``at``-th and later messages of a
    request (their ``source_ref`` shifted by ``at``): the suffix reader of
    :func:`proxy_app.reading.history_items`. Raises :class:`RequestInvalid`."""
    items = _parsed(surface, {"messages": list(messages)})
    for item in items:
        ref = item.source_ref
        if not ref.startswith("messages["):
            raise RequestInvalid("messages", f"unexpected source position {ref!r}")
        close = ref.index("]")
        item.source_ref = f"messages[{int(ref[9:close]) + at}{ref[close:]}"
    return items


def _field_path(exc: FormatError, surface: str = "openai") -> str:
    where = exc.location.split(".")[0] if exc.location else ""
    if where.startswith("index "):
        where = f"messages[{where[6:]}]"
    parts = [p for p in (where, exc.field) if p]
    return ".".join(parts) or ("input" if surface == "responses" else "messages")


def _answer_alone(
    surface: str, body: dict[str, Any], answer: Any, request: Sequence[ParsedEntry]
) -> list[ParsedEntry] | None:
    """The answer's items read without the request (the answer's own cost, not the
    history's), or ``None`` when they could differ from reading it after the request: a
    tool call id the request already used (the importer numbers a reused id) or an answer
    that does not read alone. Chat Completions and Messages only; the source positions are
    those the answer has after the request's messages."""
    if surface == "responses" or not isinstance(answer, dict):
        return None
    try:
        items = _parsed(surface, {"messages": [answer]})
    except RequestInvalid:
        return None
    calls = [i.tool_call_id for i in items if i.kind == "tool_call"]
    if calls:
        used = known_call_ids(request)
        if used is None:  # not the request just read: its ids, one item at a time
            ids = {i.tool_call_id for i in request if i.kind == "tool_call"}
            ids.update(str(i.metadata.get("source_tool_call_id", "")) for i in request)
            used = frozenset(ids)
        if any(c in used for c in calls):
            return None
    at = f"messages[{len(body['messages'])}]"
    for item in items:
        if not item.source_ref.startswith("messages[0]"):
            return None
        item.source_ref = at + item.source_ref[len("messages[0]") :]
    return items


def answer_items(
    surface: str, body: dict[str, Any], answer: Any, request: Sequence[ParsedEntry]
) -> list[ParsedEntry]:
    """The upstream's answer (one assistant message) as journal items.

    The answer is read together with the request's messages, so tool call ids get the same
    journal ids a later resend of the whole history gives them.

    Args:
        answer: an assistant message in the surface's request shape (``{"role":
            "assistant", "content", "tool_calls"?}`` or ``{"role": "assistant", "content":
            [blocks]}``); for Responses, the response's ``output`` items.
        request: :func:`request_items` of ``body``.

    Raises:
        RequestInvalid: the answer cannot be read (``field`` starts with ``answer``).
    """
    alone = _answer_alone(surface, body, answer, request)
    if alone is not None:
        return alone
    data = _request_data(surface, body)
    if surface == "responses":
        data["output"] = answer
    else:
        data["messages"] = [*data["messages"], answer]
    try:
        items = _parsed(surface, data)
    except RequestInvalid as exc:
        raise RequestInvalid("answer", exc.reason) from None
    return items[len(request) :]


def _part_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def responses_as_chat(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Responses ``input`` items as Chat Completions messages (for counting tokens).

    ``message`` items keep role and text; ``function_call`` becomes an assistant tool call,
    ``function_call_output`` a tool message; reasoning and other items become an assistant
    message holding their JSON (what they weigh, not what they say).
    """
    out: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            out.append(
                {"role": item.get("role", "user"), "content": _part_text(item.get("content"))}
            )
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments", item.get("input", ""))
            call = {"name": item.get("name", ""), "arguments": str(arguments)}
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": item.get("call_id", ""), "type": "function", "function": call}
                    ],
                }
            )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output", "")
            text = output if isinstance(output, str) else _part_text(output)
            out.append({"role": "tool", "tool_call_id": item.get("call_id", ""), "content": text})
        else:
            out.append({"role": "assistant", "content": canonical_body(item).decode("utf-8")})
    return out


def chat_as_responses(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages (the context builder's model view) as Responses ``input``
    items: text messages keep their role, an assistant's tool calls become ``function_call``
    items after its text, a tool message a ``function_call_output``."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role", "user")
        if role == "tool":
            output = _part_text(m.get("content"))
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": m.get("tool_call_id", ""),
                    "output": output,
                }
            )
            continue
        text = _part_text(m.get("content"))
        if text or not m.get("tool_calls"):
            out.append({"type": "message", "role": role, "content": text})
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            out.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id", ""),
                    "name": fn.get("name", ""),
                    "arguments": fn.get("arguments", ""),
                }
            )
    return out
