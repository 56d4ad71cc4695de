"""Structure of a request in either format: well-formed messages, paired calls and results.

Pure module (no Django). OpenAI Chat Completions (``[{"role", "content", "tool_calls"?,
"tool_call_id"?}]``) or Anthropic Messages (``{"system"?, "messages": [...]}`` or a bare list
with typed ``text`` / ``tool_use`` / ``tool_result`` / ``thinking`` blocks). Per-message checks
are here; the pairing of calls and results is the shared core of
:mod:`ledger_app.validation.pairing` (DESIGN.md section 6).
"""

from __future__ import annotations

from typing import Any

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


def openai_structure(messages: list[Any], names: EntryNames) -> list[Problem]:
    """Problems of an OpenAI message list: malformed, empty or reasoning-only messages, lone
    surrogates, duplicate call ids, then unpaired calls and results (in that order)."""
    problems: list[Problem] = []
    seen_ids: dict[str, int] = {}
    calls_at: dict[int, list[str]] = {}
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            problems.append(Problem("malformed_message", f"{where} is not an object", i, where))
            continue
        surrogate_problems(m, where, i, problems)
        role = m.get("role")
        if role not in OPENAI_ROLES:
            problems.append(
                Problem("malformed_message", f"{where}: unknown role {role!r}", i, f"{where}.role")
            )
            continue
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            problems.append(
                Problem(
                    "malformed_message",
                    f"{where}.content must be a string, a list of parts or null",
                    i,
                    f"{where}.content",
                    names.of_message(i),
                )
            )
        for k in _empty_text_blocks(content):
            problems.append(
                Problem(
                    "empty_message",
                    f"{where}.content[{k}] is an empty text part",
                    i,
                    f"{where}.content[{k}]",
                    names.of_message(i),
                )
            )
        raw_calls = m.get("tool_calls") if role == "assistant" else None
        if raw_calls is not None and not isinstance(raw_calls, list):
            problems.append(
                Problem("malformed_message", f"{where}.tool_calls must be a list", i, where)
            )
            raw_calls = None
        ids: list[str] = []
        for k, call in enumerate(raw_calls or []):
            cid = call.get("id") if isinstance(call, dict) else None
            if not isinstance(cid, str) or not cid:
                problems.append(
                    Problem(
                        "malformed_message",
                        f"{where}.tool_calls[{k}] has no id",
                        i,
                        f"{where}.tool_calls[{k}].id",
                    )
                )
                continue
            if cid in seen_ids:
                problems.append(
                    Problem(
                        "duplicate_tool_call_id",
                        f"{where}.tool_calls[{k}]: call id {cid!r} was already used by "
                        f"messages[{seen_ids[cid]}]",
                        i,
                        cid,
                        names.of_call(cid, i),
                    )
                )
            seen_ids[cid] = i
            ids.append(cid)
        if ids:
            calls_at[i] = ids
        if _is_empty_content(content) and not ids and not m.get("function_call"):
            if role == "assistant" and any(m.get(k) for k in REASONING_FIELDS):
                problems.append(
                    Problem(
                        "reasoning_only_message",
                        f"{where}: an assistant message holding only reasoning",
                        i,
                        where,
                        names.of_message(i),
                    )
                )
            else:
                problems.append(
                    Problem(
                        "empty_message",
                        f"{where} ({role}) has no content",
                        i,
                        where,
                        names.of_message(i),
                    )
                )

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
    problems += pairing_problems(Calls(calls_at, results, block_end), names, OPENAI)
    return problems


def _blocks(content: Any) -> list[Any]:
    return content if isinstance(content, list) else []


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
        for k in _empty_text_blocks(system):
            problems.append(
                Problem(
                    "empty_message", f"system[{k}] is an empty text block", None, f"system[{k}]"
                )
            )
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
    seen_ids: dict[str, int] = {}
    uses: dict[int, list[str]] = {}
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            problems.append(Problem("malformed_message", f"{where} is not an object", i, where))
            continue
        surrogate_problems(m, where, i, problems)
        role = m.get("role")
        if role not in ANTHROPIC_ROLES:
            problems.append(
                Problem("malformed_message", f"{where}: unknown role {role!r}", i, f"{where}.role")
            )
            continue
        content = m.get("content")
        if not isinstance(content, str | list):
            problems.append(
                Problem(
                    "malformed_message",
                    f"{where}.content must be a string or blocks",
                    i,
                    f"{where}.content",
                )
            )
            continue
        if _is_empty_content(content):
            problems.append(
                Problem(
                    "empty_message",
                    f"{where} ({role}) has no content",
                    i,
                    where,
                    names.of_message(i),
                )
            )
            continue
        for k in _empty_text_blocks(content):
            problems.append(
                Problem(
                    "empty_message",
                    f"{where}.content[{k}] is an empty text block",
                    i,
                    f"{where}.content[{k}]",
                    names.of_message(i),
                )
            )
        blocks = _blocks(content)
        if (
            role == "assistant"
            and blocks
            and all(isinstance(b, dict) and b.get("type") in REASONING_BLOCKS for b in blocks)
        ):
            problems.append(
                Problem(
                    "reasoning_only_message",
                    f"{where}: an assistant message holding only reasoning",
                    i,
                    where,
                    names.of_message(i),
                )
            )
        ids = []
        for k, b in enumerate(blocks):
            if not isinstance(b, dict) or b.get("type") != "tool_use":
                continue
            cid = b.get("id")
            if not isinstance(cid, str) or not cid:
                problems.append(
                    Problem(
                        "malformed_message",
                        f"{where}.content[{k}] tool_use has no id",
                        i,
                        f"{where}.content[{k}].id",
                    )
                )
                continue
            if role != "assistant":
                problems.append(
                    Problem(
                        "malformed_message",
                        f"{where}.content[{k}]: tool_use in a user message",
                        i,
                        cid,
                    )
                )
                continue
            if cid in seen_ids:
                problems.append(
                    Problem(
                        "duplicate_tool_call_id",
                        f"{where}.content[{k}]: tool_use id {cid!r} was already used by messages[{seen_ids[cid]}]",
                        i,
                        cid,
                        names.of_call(cid, i),
                    )
                )
            seen_ids[cid] = i
            ids.append(cid)
        if ids:
            uses[i] = ids
    # pairing: the results of an assistant message's tool_use blocks are in the next message
    results: list[tuple[int, str | None]] = []
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        for b in _blocks(m.get("content")):
            if isinstance(b, dict) and b.get("type") == "tool_result":
                cid = b.get("tool_use_id")
                results.append((k, cid if isinstance(cid, str) and cid else None))
    problems += pairing_problems(Calls(uses, results, lambda i: i + 2), names, ANTHROPIC)
    return problems
