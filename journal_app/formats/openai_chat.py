"""Importer for OpenAI Chat Completions message lists (corpus FORMATS.md section 6).

Pure module. Accepted shapes:

* a bare JSON list of Chat Completions messages ``[{role, content, ...}, ...]``;
* tau-bench's wrapper ``{"traj": [...], "task_id", "reward", "trial", "info"}``;
* a request-like wrapper ``{"messages": [...], "model": ..., ...}``.

Mapping (one source message can give several entries, in this order):

* ``system`` / ``developer`` / ``user`` -> a ``message`` entry. These are authoritative and
  not marked ``injected``: in this format every such message was sent to the model as is.
* ``assistant`` -> a ``message`` entry when its text is non-empty, then one ``tool_call``
  per ``tool_calls[]`` item (``function.arguments`` is parsed when it is a JSON string;
  the raw string is kept in ``metadata["raw_arguments"]`` when re-serialising would not
  give it back byte for byte).
* ``tool`` -> a ``tool_result``. There is no error flag in the format; tau-bench marks
  failures with content starting ``"Error:"``, so that prefix sets ``is_error``.

Every source field not modelled by the entry lands in the metadata of the first entry made
from that message. Wrapper fields (task_id, reward, info...) go to the session metadata.

Tool call ids are not always unique: the tau-bench corpus file reuses two ``call_...`` ids
for later, different calls. A reused id gets a ``#2``, ``#3``... suffix in the journal (the
source id stays in ``metadata["source_tool_call_id"]``) and a result is bound to the most
recent call with its id, so pairing stays exact.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from journal_app.formats.base import (
    EntryStream,
    FormatError,
    ParsedEntry,
    ParsedSession,
    collect,
    message,
    tool_call,
    tool_result,
)
from journal_app.formats.fields import parts_text, role_of
from journal_app.formats.source import Source, loads
from journal_app.formats.titles import short_title

NAME = "openai-chat"

ROLES = ("system", "developer", "user", "assistant", "tool")
TEXT_PARTS = ("text", "input_text", "output_text")
ERROR_PREFIX = "Error:"
# Keys that mark another importer's file that also holds a "messages" list.
_FOREIGN_KEYS = ("trajectory_format", "history", "steps", "trajectory")


FAILED_STATUSES = ("interrupted", "killed", "timeout", "timed_out", "cancelled", "error", "failed")


def json_status(output: str) -> str:
    """The lowercased string ``status`` of a JSON-object tool output, else ``""``.

    A run killed by a signal reports ``{"status": "interrupted", "exit_code": null, ...}``
    (shared/cases/05): not a success, whatever its partial output says.
    """
    if not output.startswith("{"):
        return ""
    try:
        value = json.loads(output)
    except ValueError:
        return ""
    status = value.get("status") if isinstance(value, dict) else None
    return status.lower() if isinstance(status, str) else ""


def json_exit_code(output: str) -> int | None:
    """The integer ``exit_code`` (or ``returncode``) of a tool output that is a JSON object.

    Runtimes that speak Chat Completions often return command results as
    ``{"exit_code": 1, "output": "..."}``; the code is the only failure signal there.
    Returns ``None`` when the output is not such an object.
    """
    if not output.startswith("{"):
        return None
    try:
        value = json.loads(output)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    for key in ("exit_code", "returncode"):
        code = value.get(key)
        if isinstance(code, int) and not isinstance(code, bool):
            return code
    return None


def parse_arguments(raw: Any) -> tuple[Any, str | None]:
    """Decode tool-call arguments.

    Args:
        raw: a JSON string (Chat Completions), or an already decoded JSON value.

    Returns:
        ``(value, raw_kept)``: ``value`` is the decoded JSON object when ``raw`` is a string
        holding one, else ``raw`` unchanged (a wrong-typed ``raw`` is refused when the entry
        is prepared: arguments are an object or a string). ``raw_kept`` is the original string when
        compact re-serialisation of ``value`` would not reproduce it (so nothing is lost),
        else ``None``.
    """
    if not isinstance(raw, str):
        return raw, None
    try:
        value = loads(raw)
    except ValueError:
        return raw, None
    if not isinstance(value, dict):
        return raw, None  # JSON, but not an object: kept as the string the model sent
    if json.dumps(value, ensure_ascii=False, separators=(",", ":")) == raw:
        return value, None
    return value, raw


def unique_call_id(source_id: str, used: dict[str, int]) -> str:
    """Return a journal id for ``source_id``: itself the first time, ``id#N`` on reuse.

    ``used`` counts how often each source id was seen; it is updated in place.
    """
    n = used.get(source_id, 0) + 1
    used[source_id] = n
    return source_id if n == 1 else f"{source_id}#{n}"


def numbered_call(
    call_id: str,
    name: str,
    arguments: Any,
    raw_arguments: str | None,
    meta: dict[str, Any],
    *,
    used: dict[str, int],
    pending: dict[str, str],
    source_ref: str,
) -> ParsedEntry:
    """The ``tool_call`` entry of an OpenAI call under its journal id.

    The journal id is :func:`unique_call_id` (``meta["source_tool_call_id"]`` keeps the
    source's id when they differ); ``raw_arguments`` (arguments that were not JSON) goes in
    ``meta["raw_arguments"]``; ``pending`` maps the source id to the journal id, so the
    call's result finds it. Chat Completions and Responses call this.
    """
    if raw_arguments is not None:
        meta["raw_arguments"] = raw_arguments
    journal_id = unique_call_id(call_id, used)
    if journal_id != call_id:
        meta["source_tool_call_id"] = call_id
    pending[call_id] = journal_id
    return tool_call(journal_id, name, arguments, source_ref=source_ref, metadata=meta)


def result_call_id(call_id: str, pending: dict[str, str], meta: dict[str, Any]) -> str:
    """The journal id of the call a result answers (taken from ``pending``, filled by
    :func:`numbered_call`; ``call_id`` itself when no call claimed it), noting the source's
    id in ``meta["source_tool_call_id"]`` when they differ."""
    journal_id = pending.pop(call_id, call_id)
    if journal_id != call_id:
        meta["source_tool_call_id"] = call_id
    return journal_id


def _list_key(data: Any) -> tuple[str | None, str] | None:
    """Where the message list of ``data`` is: ``(top-level key or None, location prefix)``."""
    if isinstance(data, list):
        return None, "index"
    if isinstance(data, dict) and not any(k in data for k in _FOREIGN_KEYS):
        for key in ("traj", "messages"):
            if isinstance(data.get(key), list):
                return key, key
    return None


def _messages(source: Source) -> tuple[Iterable[Any], str, dict[str, Any]] | None:
    """Locate the message list: ``(messages, location prefix, wrapper fields)`` or None.

    A streamed source is shaped from its preview; its messages are then read one at a time
    and its wrapper fields without building the list.
    """
    found = _list_key(source.detection_view().data)
    if found is None:
        return None
    key, prefix = found
    return source.items(key), prefix, ({} if key is None else source.fields(key))


def _where(prefix: str, index: int) -> str:
    return f"index {index}" if prefix == "index" else f"{prefix}[{index}]"


def detect(source: Source) -> bool:
    """Return True for a Chat Completions message list (bare, ``traj`` or ``messages``).

    Cheap: the list must be non-empty and every item an object with a ``role`` key. The
    Anthropic importer is tried first, so typed-block Anthropic lists never get here.
    """
    source = source.detection_view()  # a large file: its bounded preview
    if source.kind != "json":
        return False
    found = _list_key(source.data)
    if found is None:
        return False
    items = source.data if found[0] is None else source.data[found[0]]
    return bool(items) and all(isinstance(m, dict) and "role" in m for m in items)


def chat_text(path: Path, where: str, field: str, value: Any) -> tuple[str, list[Any] | None]:
    """Turn Chat Completions ``content`` (string or list of parts) into text.

    Returns:
        ``(text, blocks)``: for a list, ``text`` joins its ``text`` parts with newlines
        and ``blocks`` is the verbatim list (``None`` for a string).

    Raises:
        FormatError: content is null, not a string or list, or a part is malformed.
    """
    if value is None:
        raise FormatError(path, where, field, "content is null")
    if isinstance(value, str):
        return value, None
    if not isinstance(value, list):
        raise FormatError(
            path, where, field, f"expected a string or a list, got {type(value).__name__}"
        )
    return parts_text(path, where, field, value, TEXT_PARTS), value


def _tool_calls(
    path: Path, where: str, raw: Any, used: dict[str, int], pending: dict[str, str]
) -> list[ParsedEntry]:
    if not isinstance(raw, list):
        raise FormatError(path, where, "tool_calls", f"expected a list, got {type(raw).__name__}")
    entries: list[ParsedEntry] = []
    for k, call in enumerate(raw):
        field = f"tool_calls[{k}]"
        if not isinstance(call, dict):
            raise FormatError(path, where, field, "expected an object")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise FormatError(path, where, f"{field}.id", "tool call has no id")
        fn_key = "custom" if call.get("type") == "custom" else "function"
        fn = call.get(fn_key)
        if not isinstance(fn, dict):
            raise FormatError(path, where, f"{field}.{fn_key}", "expected an object")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise FormatError(path, where, f"{field}.{fn_key}.name", "tool call has no name")
        arg_key = "input" if fn_key == "custom" else "arguments"
        if arg_key not in fn:
            raise FormatError(path, where, f"{field}.{fn_key}.{arg_key}", "field is missing")
        arguments, raw_kept = parse_arguments(fn[arg_key])
        meta: dict[str, Any] = {k2: v for k2, v in call.items() if k2 not in ("id", fn_key)}
        extra_fn = {k2: v for k2, v in fn.items() if k2 not in ("name", arg_key)}
        if extra_fn:
            meta[fn_key] = extra_fn
        entries.append(
            numbered_call(
                call_id,
                name,
                arguments,
                raw_kept,
                meta,
                used=used,
                pending=pending,
                source_ref=f"{where}.{field}",
            )
        )
    return entries


def parse(source: Source) -> ParsedSession:
    """Parse a Chat Completions message list into a :class:`ParsedSession`.

    Args:
        source: a ``kind="json"`` source holding a list, ``{"traj": [...]}`` or
            ``{"messages": [...]}``.

    Returns:
        The session; ``metadata`` holds the wrapper fields, ``title`` the first user text.

    Raises:
        FormatError: naming the file, ``index N`` / ``traj[N]`` and the field, for a
            message that is not an object, a missing or unknown ``role``, null content
            without tool calls, a malformed tool call, a tool message without
            ``tool_call_id``.
    """
    return collect(stream(source))


def stream(source: Source) -> EntryStream:
    """The entries of :func:`parse`, one message at a time (a large file is streamed with
    ``ijson``, never held whole: memory does not grow with the file). Returns the session fields
    (``entries=[]``); raises the errors of :func:`parse`."""
    path = source.path
    found = _messages(source) if source.kind == "json" else None
    if found is None:
        raise FormatError(path, "", "", "not an OpenAI chat message list")
    items, prefix, wrapper = found
    used: dict[str, int] = {}
    pending: dict[str, str] = {}
    title = ""
    for i, m in enumerate(items):
        where = _where(prefix, i)
        role = role_of(path, where, m, ROLES)
        made: list[ParsedEntry] = []
        meta = {k: v for k, v in m.items() if k not in ("role", "content", "tool_calls")}
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise FormatError(path, where, "tool_call_id", "tool message has no tool_call_id")
            output, blocks = chat_text(path, where, "content", m.get("content"))
            meta.pop("tool_call_id")
            name = meta.pop("name", "")
            if not isinstance(name, str):
                meta["name"] = name
                name = ""
            is_error = output.startswith(ERROR_PREFIX)
            exit_code = json_exit_code(output)
            status = json_status(output)
            if is_error:
                meta["is_error_from"] = f"content starts with {ERROR_PREFIX!r}"
            elif exit_code:
                is_error = True
                meta["is_error_from"] = f"JSON content has exit_code {exit_code}"
            elif status in FAILED_STATUSES:
                is_error = True
                meta["is_error_from"] = f"JSON content has status {status!r}"
            entry = tool_result(
                result_call_id(call_id, pending, meta),
                output,
                is_error=is_error,
                exit_code=exit_code,
                name=name,
                source_ref=where,
                metadata=meta,
            )
            if blocks is not None:
                entry.content["blocks"] = blocks
            made.append(entry)
        else:
            raw_calls = m.get("tool_calls")
            has_calls = role == "assistant" and raw_calls is not None
            if "tool_calls" in m and raw_calls is None:
                meta["tool_calls"] = None
            if role != "assistant" and raw_calls is not None:
                raise FormatError(path, where, "tool_calls", f"tool calls on a {role} message")
            content = m.get("content")
            if "content" not in m and not has_calls:
                raise FormatError(path, where, "content", "field is missing")
            if content is None and has_calls:
                text, blocks = "", None
                if "content" in m:
                    meta["content"] = None
            else:
                text, blocks = chat_text(path, where, "content", content)
            if text or blocks is not None or not has_calls:
                entry = message(role, text, source_ref=where)
                if blocks is not None:
                    entry.content["blocks"] = blocks
                made.append(entry)
                if role == "user" and not title:
                    title = short_title(text)
            elif content is not None:
                meta["content"] = content
            if has_calls:
                made.extend(_tool_calls(path, where, raw_calls, used, pending))
            if not made:
                raise FormatError(path, where, "content", "content is null")
        made[0].metadata = {**meta, **made[0].metadata}
        yield from made
    return ParsedSession(format=NAME, entries=[], title=title, metadata=wrapper)
