"""What a parsed item must be to become a journal entry (docs/architecture.md, invariants). Pure.

:func:`validate_item` is the one check every surface appends through (importers, API,
proxy, follow), run by :func:`journal_app.chain.prepare_entries` before anything is hashed;
:class:`EntryInvalid` names the item and the field at fault.
"""

from __future__ import annotations

from typing import Any

from journal_app.formats.base import KINDS, ROLES, ParsedEntry

#: which roles each kind may carry (journal_app.formats.base documents the shapes)
ROLES_OF_KIND: dict[str, tuple[str, ...]] = {
    "message": ("system", "developer", "user", "assistant"),
    "tool_call": ("assistant",),
    "tool_result": ("tool",),
    "reasoning": ("assistant",),
    "event": ("runtime",),
}


#: the longest ``tool_call_id`` and ``tool_name`` stored (characters; the ``Entry`` columns'
#: ``max_length``). The entry hash covers both whole, so a longer value is refused here, on
#: the one path every surface appends through (importers, API, proxy, follow), never cut.
MAX_TOOL_FIELD_CHARS = 200


class EntryInvalid(ValueError):
    """An item cannot become an entry. ``index`` is its position in the batch, ``field`` the field."""

    def __init__(self, index: int, field_name: str, reason: str, source_ref: str = "") -> None:
        self.index = index
        self.field = field_name
        self.reason = reason
        self.source_ref = source_ref
        where = f"entry {index}" + (f" ({source_ref})" if source_ref else "")
        super().__init__(f"{where}, field {field_name!r}: {reason}")


def validate_item(index: int, item: ParsedEntry) -> None:
    """Refuse ``item`` (the ``index``-th of its batch) when it cannot become an entry.

    Checks its kind and role (and that the role fits the kind), the content each kind
    needs (a message's text, a tool call's name and object arguments, a tool result's
    output and flags, an event's type), the call id and tool name (no NUL, at most
    :data:`MAX_TOOL_FIELD_CHARS` characters) and a provider token figure.

    Raises:
        EntryInvalid: naming ``index``, the field and the item's ``source_ref``.
    """
    ref = item.source_ref
    if item.kind not in KINDS:
        raise EntryInvalid(
            index, "kind", f"unknown kind {item.kind!r} (known: {', '.join(KINDS)})", ref
        )
    if item.role not in ROLES:
        raise EntryInvalid(
            index, "role", f"unknown role {item.role!r} (known: {', '.join(ROLES)})", ref
        )
    if not isinstance(item.content, dict):
        raise EntryInvalid(index, "content", "content must be a JSON object", ref)
    if item.kind == "message" and not isinstance(item.content.get("text"), str):
        raise EntryInvalid(index, "content.text", "a message needs its text (null content)", ref)
    for name in ("tool_call_id", "tool_name"):
        value = getattr(item, name)
        if "\x00" in value:
            raise EntryInvalid(index, name, "contains a NUL character", ref)
        if len(value) > MAX_TOOL_FIELD_CHARS:
            raise EntryInvalid(
                index,
                name,
                f"is {len(value)} characters; at most {MAX_TOOL_FIELD_CHARS} are stored "
                "(the entry hash covers it whole)",
                ref,
            )
    if item.kind in ("tool_call", "tool_result") and not item.tool_call_id:
        raise EntryInvalid(index, "tool_call_id", f"a {item.kind} needs a tool_call_id", ref)
    if item.token_figure is not None:
        tokens, source = item.token_figure
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise EntryInvalid(index, "token_figure", "tokens must be an integer >= 0", ref)
        if not isinstance(source, str) or not 0 < len(source) <= 40:
            raise EntryInvalid(index, "token_figure", "source must be 1-40 characters", ref)
    if item.kind == "tool_result" and not isinstance(item.content.get("output"), str):
        raise EntryInvalid(index, "content.output", "a tool result needs its output text", ref)
    allowed = ROLES_OF_KIND.get(item.kind)
    if allowed and item.role not in allowed:
        raise EntryInvalid(
            index, "role", f"a {item.kind} has role {' or '.join(allowed)}, not {item.role!r}", ref
        )
    content = item.content
    if item.kind == "tool_result":
        if "is_error" in content and not isinstance(content["is_error"], bool):
            raise EntryInvalid(index, "content.is_error", "must be true or false", ref)
        code = content.get("exit_code")
        if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
            raise EntryInvalid(index, "content.exit_code", "must be an integer or null", ref)
    if item.kind == "tool_call" and not isinstance(content.get("name"), str):
        raise EntryInvalid(index, "content.name", "a tool call needs its tool name", ref)
    if item.kind == "tool_call" and not isinstance(content.get("arguments", {}), dict | str):
        raise EntryInvalid(
            index,
            "content.arguments",
            "tool arguments must be a JSON object (or the raw string the model sent), not "
            + _type_name(content.get("arguments")),
            ref,
        )
    if item.kind == "event" and not isinstance(content.get("type"), str):
        raise EntryInvalid(index, "content.type", "an event needs its type", ref)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list"}.get(
        type(value), type(value).__name__
    )
