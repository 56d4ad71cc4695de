"""Importer for SWE-agent ``.traj`` trajectories (FORMATS.md section 4, SOURCES.md section 4).

Pure module. A trajectory is ``{trajectory[], history[], info, environment, replay_config?}``.
The conversation is read from ``history[]``; ``trajectory[]`` steps (per model call:
``action``, ``observation``, ``response``, ``thought``, ``execution_time``, ``state`` and,
in 1.x, ``messages``, the full prompt of that step) are redundant with it.

Mapping
-------
* ``system`` / ``user`` history messages -> ``message`` entries of that role.
* SWE-agent 1.x (function calling): an ``assistant`` message -> a ``message`` with its
  ``content`` (when non-empty), then one ``tool_call`` per ``tool_calls[]`` item
  (``function.arguments`` parsed when it is a JSON string). ``role:"tool"`` messages ->
  the ``tool_result`` of each id in ``tool_call_ids``. SWE-agent reuses call ids across
  turns (the corpus replay does), so a repeated id gets a ``#n`` suffix; the result goes to
  the latest call with that id and ``metadata["source_tool_call_id"]`` keeps the original.
* SWE-agent 0.x (text actions, no ``tool_calls``): an ``assistant`` message with a
  non-empty ``action`` -> its ``message`` plus a ``tool_call`` named ``bash`` (the action
  string runs in SWE-agent's shell, custom commands included) with id ``action-<index>``
  and ``arguments = {"command": action}``; the next ``user`` message is its
  ``tool_result``.
* ``is_demo: true`` items (0.x in-context demonstrations) -> ``derived`` messages with
  ``metadata["is_demo"] = True`` (a demo ``tool`` item becomes a ``user`` message).
* A history message that is an elided copy (``Old environment output: (N lines omitted)``)
  is marked ``derived`` with ``metadata["elided_by_source"] = True``.

Run-level fields (``info``, ``environment``, ``replay_config``, ...) go to
``ParsedSession.metadata``; ``trajectory`` is kept there without the per-step ``messages``
arrays (each step gets ``messages_count`` instead). Tool results carry no exit code: the
format has none.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from journal_app.formats.base import (
    FormatError,
    ParsedEntry,
    ParsedSession,
    message,
    tool_call,
    tool_result,
)
from journal_app.formats.fields import message_fields, top_list
from journal_app.formats.source import Source
from journal_app.formats.titles import task_title

NAME = "swe-agent-traj"

_ROLES = ("system", "user", "assistant", "tool")
_ELISION = re.compile(r"Old environment output: \(\d+ lines omitted\)")


def detect(source: Source) -> bool:
    """Return True for a SWE-agent trajectory object.

    Needs a JSON object with a ``history`` list plus ``trajectory`` or ``info``, whose first
    history item (if any) has a ``role``. Never raises.
    """
    source = source.detection_view()  # a large file: its bounded preview
    if source.kind != "json" or not isinstance(source.data, dict):
        return False
    data = source.data
    history = data.get("history")
    if not isinstance(history, list) or not ("trajectory" in data or "info" in data):
        return False
    if "trajectory_format" in data or "messages" in data:
        return False
    return not history or (isinstance(history[0], dict) and "role" in history[0])


def parse(source: Source) -> ParsedSession:
    """Parse a SWE-agent trajectory (1.x function calling or 0.x text actions).

    Args:
        source: a ``json`` source accepted by :func:`detect`.

    Returns:
        The session, entries in history order (``source_ref = "history[i]"``). ``metadata``
        holds every top-level field except ``history``, with ``trajectory`` stripped of its
        per-step prompt copies (``trajectory_messages_count`` and
        ``trajectory_elision_markers`` summarise them). ``title`` is the issue's first line.

    Raises:
        FormatError: ``history`` missing or not a list, an item that is not an object, a
            missing or unknown ``role``, null content on a non-assistant message, content of
            the wrong type, malformed ``tool_calls`` / ``tool_call_ids``, a tool message
            naming a call that was never made.
    """
    path = source.path
    data = source.data
    history = top_list(
        path,
        data,
        "history",
        what="history[]",
        missing="missing: a SWE-agent trajectory needs history[]",
    )

    entries: list[ParsedEntry] = []
    latest: dict[str, str] = {}  # source call id -> unique call id of its latest call
    names: dict[str, str] = {}  # unique call id -> tool name
    used: set[str] = set()
    answered: set[str] = set()
    pending_action = ""  # 0.x synthetic call waiting for the next user observation
    first_user = ""

    for index, item in enumerate(history):
        where = f"history[{index}]"
        role, text, meta = message_fields(path, where, item, _ROLES)
        derived = False
        if _ELISION.search(text):
            derived = True
            meta["elided_by_source"] = True

        if item.get("is_demo"):
            meta["is_demo"] = True
            if role == "tool":
                meta["source_role"] = "tool"
            demo_role = "user" if role == "tool" else role
            entries.append(message(demo_role, text, source_ref=where, derived=True, metadata=meta))
            continue

        if role == "assistant":
            pending_action = ""
            calls = item.get("tool_calls")
            if calls is not None and not isinstance(calls, list):
                raise FormatError(
                    path, where, "tool_calls", f"expected a list, got {type(calls).__name__}"
                )
            if calls:
                meta.pop("tool_calls")
                if text:
                    entries.append(
                        message("assistant", text, source_ref=where, derived=derived, metadata=meta)
                    )
                    meta = {}
                for n, call in enumerate(calls):
                    entry = _tool_call(path, f"{where}.tool_calls[{n}]", call, latest, used, meta)
                    names[entry.tool_call_id] = entry.tool_name
                    entries.append(entry)
                    meta = {}
                continue
            entries.append(
                message("assistant", text, source_ref=where, derived=derived, metadata=meta)
            )
            action = item.get("action")
            if isinstance(action, str) and action.strip():
                call_id = f"action-{index}"
                used.add(call_id)
                entries.append(
                    tool_call(
                        call_id,
                        "bash",
                        {"command": action},
                        source_ref=where,
                        metadata={"synthetic_id": True},
                    )
                )
                pending_action = call_id
            continue

        if role == "tool":
            ids = item.get("tool_call_ids")
            if ids is None:
                raise FormatError(path, where, "tool_call_ids", "missing on a tool message")
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
                raise FormatError(path, where, "tool_call_ids", "expected a non-empty list of ids")
            for n, source_id in enumerate(ids):
                unique_id = latest.get(source_id)
                if unique_id is None:
                    raise FormatError(
                        path, where, "tool_call_ids", f"no earlier tool call with id {source_id!r}"
                    )
                if unique_id in answered:
                    raise FormatError(
                        path, where, "tool_call_ids", f"second result for tool call {source_id!r}"
                    )
                answered.add(unique_id)
                result_meta = dict(meta) if n == 0 else {"shared_output_with": latest[ids[0]]}
                entries.append(
                    tool_result(
                        unique_id,
                        text if n == 0 else "",
                        name=names.get(unique_id, ""),
                        source_ref=where,
                        derived=derived,
                        metadata=result_meta,
                    )
                )
            continue

        if role == "user" and pending_action:
            answered.add(pending_action)
            entries.append(
                tool_result(
                    pending_action,
                    text,
                    name="bash",
                    source_ref=where,
                    derived=derived,
                    metadata=meta,
                )
            )
            pending_action = ""
            continue

        if role == "user" and not first_user:
            first_user = text
        entries.append(message(role, text, source_ref=where, derived=derived, metadata=meta))

    metadata = {k: v for k, v in data.items() if k not in ("history", "trajectory")}
    metadata.update(_trajectory_summary(data.get("trajectory")))
    replay = data.get("replay_config")
    statement = replay.get("problem_statement") if isinstance(replay, dict) else None
    session_id = statement.get("id") if isinstance(statement, dict) else None
    return ParsedSession(
        format=NAME,
        entries=entries,
        title=task_title(first_user),
        source_session_id=session_id if isinstance(session_id, str) else "",
        metadata=metadata,
    )


def _tool_call(
    path: str | Path,
    where: str,
    call: Any,
    latest: dict[str, str],
    used: set[str],
    meta: dict[str, Any],
) -> ParsedEntry:
    if not isinstance(call, dict):
        raise FormatError(path, where, "", f"expected an object, got {type(call).__name__}")
    source_id = call.get("id")
    if not isinstance(source_id, str) or not source_id:
        raise FormatError(path, where, "id", "tool call has no id")
    function = call.get("function")
    if not isinstance(function, dict):
        raise FormatError(path, where, "function", "expected an object")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise FormatError(path, where, "function.name", "expected a string")
    raw = function.get("arguments")
    arguments = raw
    if isinstance(raw, str):
        try:
            arguments = json.loads(raw)
        except ValueError:
            arguments = raw
    call_id, n = source_id, 2
    while call_id in used:
        call_id = f"{source_id}#{n}"
        n += 1
    used.add(call_id)
    latest[source_id] = call_id
    meta = dict(meta)
    extra = {k: v for k, v in call.items() if k not in ("id", "function")}
    extra.update(
        {f"function.{k}": v for k, v in function.items() if k not in ("name", "arguments")}
    )
    meta.update(extra)
    if call_id != source_id:
        meta["source_tool_call_id"] = source_id
    return tool_call(call_id, name, arguments, source_ref=where.split(".")[0], metadata=meta)


def _trajectory_summary(trajectory: Any) -> dict[str, Any]:
    """``trajectory`` without the per-step prompt copies, plus counts of what was left out."""
    if not isinstance(trajectory, list):
        return {} if trajectory is None else {"trajectory": trajectory}
    steps: list[Any] = []
    total = 0
    markers = 0
    for step in trajectory:
        if isinstance(step, dict) and isinstance(step.get("messages"), list):
            msgs = step["messages"]
            total += len(msgs)
            markers += len(_ELISION.findall(json.dumps(msgs, ensure_ascii=False)))
            step = {k: v for k, v in step.items() if k != "messages"}
            step["messages_count"] = len(msgs)
        steps.append(step)
    return {
        "trajectory": steps,
        "trajectory_messages_count": total,
        "trajectory_elision_markers": markers,
    }
