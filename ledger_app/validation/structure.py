"""Structure of a request in either format: well-formed messages, paired calls and results.

Pure module (no Django). OpenAI Chat Completions (``[{"role", "content", "tool_calls"?,
"tool_call_id"?}]``) or Anthropic Messages (``{"system"?, "messages": [...]}`` or a bare list
with typed ``text`` / ``tool_use`` / ``tool_result`` / ``thinking`` blocks). The per-message
checks are one walk (``_walk``) given each format's rules and words (``_Format``); the
pairing of calls and results is the shared core of :mod:`ledger_app.validation.pairing`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from journal_app import privacy
from ledger_app.validation.budget import SURROGATE, TEXT_PARTS
from ledger_app.validation.pairing import ANTHROPIC, OPENAI, Calls, pairing_problems
from ledger_app.validation.report import EntryNames, Problem

OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
ANTHROPIC_ROLES = ("user", "assistant")
REASONING_BLOCKS = privacy.REASONING_KINDS
REASONING_FIELDS = privacy.REASONING_FIELDS


def detect_format(request: Any) -> str:
    """``"anthropic"`` or ``"openai"`` for a message list or a request object.

    Anthropic when there is a top-level ``system`` with no OpenAI marker, or a content
    block of an Anthropic-only type (``tool_use``, ``tool_result``, ``thinking``,
    ``redacted_thinking``, ``image`` with ``source``); OpenAI otherwise.
    """
    messages = request.get("messages") if isinstance(request, dict) else request
    if not isinstance(messages, list):
        return "openai"
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") in ("system", "developer", "tool") or "tool_calls" in m:
            return "openai"
        if "tool_call_id" in m:
            return "openai"
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and (
                    b.get("type") in ("tool_use", "tool_result", *REASONING_BLOCKS[:2])
                    or (b.get("type") == "image" and "source" in b)
                ):
                    return "anthropic"
    if isinstance(request, dict) and "system" in request:
        return "anthropic"
    return "openai"


def split_request(
    request: Any, fmt: str | None = None
) -> tuple[str, list[Any], Any, list[Problem]]:
    """``(format, messages, system, problems)`` of a request object or a bare message list."""
    problems: list[Problem] = []
    fmt = fmt or detect_format(request)
    system = None
    if isinstance(request, dict):
        messages = request.get("messages")
        system = request.get("system")
    else:
        messages = request
    if not isinstance(messages, list):
        problems.append(
            Problem("malformed_message", "the request has no list of messages", None, "messages")
        )
        messages = []
    elif not messages:
        problems.append(Problem("empty_message", "the request has no messages", None, "messages"))
    return fmt, messages, system, problems


def surrogate_problems(value: Any, path: str, index: int | None, out: list[Problem]) -> None:
    """Append a ``lone_surrogate`` problem to ``out`` for each string (or key) of ``value``
    holding an unpaired UTF-16 surrogate; ``path`` names ``value`` in the messages."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            m = SURROGATE.search(item)
            if m:
                out.append(
                    Problem(
                        "lone_surrogate",
                        f"{where}: character {m.start()} is an unpaired UTF-16 surrogate "
                        f"(U+{ord(m.group()):04X}); the text has no UTF-8 form",
                        index,
                        where,
                    )
                )
        elif isinstance(item, dict):
            for k, v in item.items():
                if isinstance(k, str) and SURROGATE.search(k):
                    out.append(
                        Problem(
                            "lone_surrogate", f"{where}: a key holds a lone surrogate", index, where
                        )
                    )
                stack.append((f"{where}.{SURROGATE.sub('?', str(k))}", v))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(item))


def _is_empty_content(content: Any) -> bool:
    if content is None:
        return True
    if isinstance(content, str):
        return content == ""
    if isinstance(content, list):
        return len(content) == 0
    return False


def _empty_text_blocks(content: Any) -> list[int]:
    if not isinstance(content, list):
        return []
    return [
        i
        for i, b in enumerate(content)
        if isinstance(b, dict) and b.get("type") in TEXT_PARTS and b.get("text") == ""
    ]


def _empty_text_problems(
    content: Any, at: str, noun: str, i: int | None, entry: str, out: list[Problem]
) -> None:
    for k in _empty_text_blocks(content):
        out.append(
            Problem("empty_message", f"{at}[{k}] is an empty text {noun}", i, f"{at}[{k}]", entry)
        )


def _reasoning_only(where: str, i: int, names: EntryNames) -> Problem:
    return Problem(
        "reasoning_only_message",
        f"{where}: an assistant message holding only reasoning",
        i,
        where,
        names.of_message(i),
    )


def _blocks(content: Any) -> list[Any]:
    return content if isinstance(content, list) else []


class _Format(NamedTuple):
    """One format's rules and words for :func:`_walk`; the walk itself is shared.

    Attributes:
        roles: the roles a message may have.
        call: what a call is called in the format's sentences (``"call"``, ``"tool_use"``).
        no_id: the sentence for a call without an id (``{at}``: where the call is).
        content: the checks of a message's content before its calls, appending to the
            problems; ``False`` skips the rest of that message.
        calls: ``(where, id)`` of each call a message issues (appending a problem for a
            malformed list of calls).
        after: the checks of a message once its call ids are known, if any.
    """

    roles: tuple[str, ...]
    call: str
    no_id: str
    content: Callable[[dict[str, Any], str, str, int, EntryNames, list[Problem]], bool]
    calls: Callable[[dict[str, Any], str, str, int, list[Problem]], list[tuple[str, Any]]]
    after: (
        Callable[[dict[str, Any], str, str, int, list[str], EntryNames, list[Problem]], None] | None
    )


def _walk(
    messages: list[Any], names: EntryNames, fmt: _Format, problems: list[Problem]
) -> dict[int, list[str]]:
    """Append the per-message problems of ``messages`` to ``problems`` (malformed messages,
    unknown roles, lone surrogates, the format's content checks, calls without an id or
    outside an assistant message, duplicate call ids); return message index -> call ids."""
    seen_ids: dict[str, int] = {}
    issued: dict[int, list[str]] = {}
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            problems.append(Problem("malformed_message", f"{where} is not an object", i, where))
            continue
        surrogate_problems(m, where, i, problems)
        role = m.get("role")
        if role not in fmt.roles:
            problems.append(
                Problem("malformed_message", f"{where}: unknown role {role!r}", i, f"{where}.role")
            )
            continue
        if not fmt.content(m, role, where, i, names, problems):
            continue
        ids: list[str] = []
        for at, cid in fmt.calls(m, role, where, i, problems):
            if not isinstance(cid, str) or not cid:
                problems.append(
                    Problem("malformed_message", fmt.no_id.format(at=at), i, f"{at}.id")
                )
                continue
            if role != "assistant":
                problems.append(
                    Problem("malformed_message", f"{at}: {fmt.call} in a {role} message", i, cid)
                )
                continue
            if cid in seen_ids:
                problems.append(
                    Problem(
                        "duplicate_tool_call_id",
                        f"{at}: {fmt.call} id {cid!r} was already used by "
                        f"messages[{seen_ids[cid]}]",
                        i,
                        cid,
                        names.of_call(cid, i),
                    )
                )
            seen_ids[cid] = i
            ids.append(cid)
        if ids:
            issued[i] = ids
        if fmt.after is not None:
            fmt.after(m, role, where, i, ids, names, problems)
    return issued


def _openai_content(
    m: dict[str, Any], role: str, where: str, i: int, names: EntryNames, out: list[Problem]
) -> bool:
    content = m.get("content")
    if content is not None and not isinstance(content, str | list):
        out.append(
            Problem(
                "malformed_message",
                f"{where}.content must be a string, a list of parts or null",
                i,
                f"{where}.content",
                names.of_message(i),
            )
        )
    _empty_text_problems(content, f"{where}.content", "part", i, names.of_message(i), out)
    return True


def _openai_calls(
    m: dict[str, Any], role: str, where: str, i: int, out: list[Problem]
) -> list[tuple[str, Any]]:
    raw_calls = m.get("tool_calls") if role == "assistant" else None
    if raw_calls is not None and not isinstance(raw_calls, list):
        out.append(Problem("malformed_message", f"{where}.tool_calls must be a list", i, where))
        return []
    return [
        (f"{where}.tool_calls[{k}]", call.get("id") if isinstance(call, dict) else None)
        for k, call in enumerate(raw_calls or [])
    ]


def _openai_after(
    m: dict[str, Any],
    role: str,
    where: str,
    i: int,
    ids: list[str],
    names: EntryNames,
    out: list[Problem],
) -> None:
    if not _is_empty_content(m.get("content")) or ids or m.get("function_call"):
        return
    if role == "assistant" and any(m.get(k) for k in REASONING_FIELDS):
        out.append(_reasoning_only(where, i, names))
    else:
        out.append(
            Problem(
                "empty_message", f"{where} ({role}) has no content", i, where, names.of_message(i)
            )
        )


def _anthropic_content(
    m: dict[str, Any], role: str, where: str, i: int, names: EntryNames, out: list[Problem]
) -> bool:
    content = m.get("content")
    if not isinstance(content, str | list):
        out.append(
            Problem(
                "malformed_message",
                f"{where}.content must be a string or blocks",
                i,
                f"{where}.content",
            )
        )
        return False
    if _is_empty_content(content):
        out.append(
            Problem(
                "empty_message", f"{where} ({role}) has no content", i, where, names.of_message(i)
            )
        )
        return False
    _empty_text_problems(content, f"{where}.content", "block", i, names.of_message(i), out)
    blocks = _blocks(content)
    if (
        role == "assistant"
        and blocks
        and all(isinstance(b, dict) and b.get("type") in REASONING_BLOCKS for b in blocks)
    ):
        out.append(_reasoning_only(where, i, names))
    return True


def _anthropic_calls(
    m: dict[str, Any], role: str, where: str, i: int, out: list[Problem]
) -> list[tuple[str, Any]]:
    return [
        (f"{where}.content[{k}]", b.get("id"))
        for k, b in enumerate(_blocks(m.get("content")))
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]


_OPENAI = _Format(
    roles=OPENAI_ROLES,
    call="call",
    no_id="{at} has no id",
    content=_openai_content,
    calls=_openai_calls,
    after=_openai_after,
)
_ANTHROPIC = _Format(
    roles=ANTHROPIC_ROLES,
    call="tool_use",
    no_id="{at} tool_use has no id",
    content=_anthropic_content,
    calls=_anthropic_calls,
    after=None,
)


def openai_structure(messages: list[Any], names: EntryNames) -> list[Problem]:
    """Problems of an OpenAI message list: malformed, empty or reasoning-only messages, lone
    surrogates, duplicate call ids, then unpaired calls and results (in that order)."""
    problems: list[Problem] = []
    issued = _walk(messages, names, _OPENAI, problems)

    # pairing: the results of an assistant message's calls are the tool messages after it
    def block_end(i: int) -> int:
        j = i + 1
        while (
            j < len(messages)
            and isinstance(messages[j], dict)
            and messages[j].get("role") == "tool"
        ):
            j += 1
        return j

    results: list[tuple[int, str | None]] = []
    for k, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "tool":
            cid = m.get("tool_call_id")
            results.append((k, cid if isinstance(cid, str) and cid else None))
    problems += pairing_problems(Calls(issued, results, block_end), names, OPENAI)
    return problems


def anthropic_structure(messages: list[Any], system: Any, names: EntryNames) -> list[Problem]:
    """Problems of an Anthropic request (``system`` and messages): as
    :func:`openai_structure`, plus the first message must be the user's."""
    problems: list[Problem] = []
    if system is not None:
        surrogate_problems(system, "system", None, problems)
        if not isinstance(system, str | list):
            problems.append(
                Problem(
                    "malformed_message", "system must be a string or text blocks", None, "system"
                )
            )
        _empty_text_problems(system, "system", "block", None, "", problems)
    if messages and isinstance(messages[0], dict) and messages[0].get("role") != "user":
        problems.append(
            Problem(
                "malformed_message",
                "messages[0]: an Anthropic request must start with a user message",
                0,
                "messages[0].role",
                names.of_message(0),
            )
        )
    issued = _walk(messages, names, _ANTHROPIC, problems)
    # pairing: the results of an assistant message's tool_use blocks are in the next message
    results: list[tuple[int, str | None]] = []
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        for b in _blocks(m.get("content")):
            if isinstance(b, dict) and b.get("type") == "tool_result":
                cid = b.get("tool_use_id")
                results.append((k, cid if isinstance(cid, str) and cid else None))
    problems += pairing_problems(Calls(issued, results, lambda i: i + 2), names, ANTHROPIC)
    return problems
