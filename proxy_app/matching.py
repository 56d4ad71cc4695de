"""Matching a runtime's resent history against a branch of the journal (issue 14). Pure.

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

from journal_app.formats import anthropic, openai_chat
from journal_app.formats.base import FormatError, ParsedEntry, check_pairing
from journal_app.formats.source import Source
from journal_app.hashing import canonical_body

#: kinds a runtime never resends: they are journaled but skipped when matching
UNMATCHED_KINDS = ("event", "reasoning")
#: the request surfaces and the importer that reads each
SURFACES = {"openai": openai_chat, "anthropic": anthropic}

MatchKey = tuple[str, str, str, str]


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _normalise(v) for k, v in value.items() if v is not None and k != "cache_control"
        }
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def normalised_content(kind: str, content: dict[str, Any]) -> dict[str, Any]:
    """``content`` without null values and cache markers; a lone plain text block folded away."""
    out = _normalise(content)
    blocks = out.get("blocks")
    if (
        kind in ("message", "tool_result")
        and isinstance(blocks, list)
        and len(blocks) == 1
        and isinstance(blocks[0], dict)
        and set(blocks[0]) == {"type", "text"}
        and blocks[0]["type"] == "text"
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
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestInvalid("messages", "expected a non-empty list of messages")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise RequestInvalid("stream", "expected true or false")
    if surface == "anthropic":
        if "system" in body and not isinstance(body["system"], (str, list)):
            raise RequestInvalid("system", "expected a string or a list of text blocks")
        return _int_field(body, "max_tokens", required=True) or 0
    tokens = _int_field(body, "max_completion_tokens") or _int_field(body, "max_tokens")
    return tokens or 0


def request_items(surface: str, body: dict[str, Any]) -> list[ParsedEntry]:
    """The request's history as journal items, read by the journal's own importer.

    Args:
        surface: ``"openai"`` or ``"anthropic"``.
        body: a request that passed :func:`check_request`.

    Raises:
        RequestInvalid: a message the importer refuses (``field`` is
            ``messages[i].<field>``, or ``system``), or a tool result without its call.
    """
    data: dict[str, Any] = {"messages": body["messages"]}
    if surface == "anthropic" and body.get("system") not in (None, "", []):
        data["system"] = body["system"]
    source = Source(path=Path("request"), kind="json", data=data)
    try:
        parsed = SURFACES[surface].parse(source)
        check_pairing(source.path, parsed.entries)
    except FormatError as exc:
        raise RequestInvalid(_field_path(exc), exc.reason) from None
    return parsed.entries


def _field_path(exc: FormatError) -> str:
    where = exc.location.split(".")[0] if exc.location else ""
    if where.startswith("index "):
        where = f"messages[{where[6:]}]"
    parts = [p for p in (where, exc.field) if p]
    return ".".join(parts) or "messages"


def answer_items(
    surface: str, body: dict[str, Any], answer: dict[str, Any], request: Sequence[ParsedEntry]
) -> list[ParsedEntry]:
    """The upstream's answer (one assistant message) as journal items.

    The answer is read together with the request's messages, so tool call ids get the same
    journal ids a later resend of the whole history gives them.

    Args:
        answer: an assistant message in the surface's request shape (``{"role":
            "assistant", "content", "tool_calls"?}`` or ``{"role": "assistant", "content":
            [blocks]}``).
        request: :func:`request_items` of ``body``.

    Raises:
        RequestInvalid: the answer cannot be read (``field`` starts with ``answer``).
    """
    full = {**body, "messages": [*body["messages"], answer]}
    try:
        items = request_items(surface, full)
    except RequestInvalid as exc:
        raise RequestInvalid("answer", exc.reason) from None
    return items[len(request) :]
