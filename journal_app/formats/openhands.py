"""Importer for OpenHands event histories (FORMATS.md section 3, SOURCES.md section 3).

Pure module. The source is one evaluation record ``{instance_id, instruction, metadata,
history[], metrics, error, test_result, instance}`` (a line of ``output.jsonl`` saved as
JSON), or a bare list of events (a UI trajectory export). Each history event is an action
(``action`` key) or an observation (``observation`` key, ``cause`` = the action ``id``).

Mapping
-------
* ``action:"system"`` -> ``message`` role ``system`` (``args.content``).
* ``action:"message"`` -> ``message`` role ``user`` (source ``user``) or ``assistant``
  (source ``agent``).
* An action with ``tool_call_metadata`` (run, read, edit, think, finish, ...) -> a
  ``tool_call`` with ``tool_call_id = tool_call_metadata.tool_call_id`` and the function
  name and arguments the model sent (taken from ``model_response``; the action ``args``
  when the response is missing). The agent's ``args.thought`` is the text the model wrote
  next to the call (``model_response`` message content), so it becomes an ``assistant``
  ``message`` just before the call (for ``think`` the thought *is* the call's argument and
  the message is the response content). Token usage of the model call (``model_response
  .usage``) goes into ``usage`` of the first entry of that response.
* The observation whose ``cause`` is a tool action -> its ``tool_result``. ``is_error``
  when ``observation == "error"``, the exit code is non-zero, ``success`` is false, or an
  editor observation starts with ``ERROR:`` (OpenHands reports failed edits that way).
* Other actions (``recall``, ...) and observations without a matching tool action
  (``recall``, ``agent_state_changed``, an ``error`` raised before any action existed)
  -> ``event`` entries; ``condensation`` -> a ``derived`` event. An observation whose
  ``cause`` names no earlier action (or whose ``tool_call_metadata`` names no earlier
  call) is an orphan and refused, naming it: it would otherwise pass as a plain event. A
  second observation of one tool action is kept as an event labelled
  ``metadata["duplicate_result_for"]``, never as a second result.
* A run-level ``error`` (e.g. max iterations) -> a final event ``{"type": "run_error"}``
  and ``ParsedSession.metadata["error"]``.

Every field not modelled is kept in ``metadata`` (ids, timestamps, ``llm_metrics``,
``tool_call_metadata`` with the full ``model_response``, ``extras``, remaining ``args``).
"""

from __future__ import annotations

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
from journal_app.formats.fields import OPENAI_USAGE, object_arguments, require_str, usage_counts
from journal_app.formats.source import Source
from journal_app.formats.titles import task_title

NAME = "openhands-events"

_EDITOR_OBSERVATIONS = ("edit", "read")


def detect(source: Source) -> bool:
    """Return True for an OpenHands evaluation record or a bare OpenHands event list.

    Accepts a JSON object with a ``history`` list and ``metadata.agent_class`` (or whose
    first history item has ``action``/``observation``), or a JSON list whose first item is an
    event ``{id, source, action|observation}``. Never raises.
    """
    source = source.detection_view()  # a large file: its bounded preview
    if source.kind != "json":
        return False
    data = source.data
    if isinstance(data, dict):
        history = data.get("history")
        if not isinstance(history, list):
            return False
        meta = data.get("metadata")
        if isinstance(meta, dict) and "agent_class" in meta:
            return True
        return bool(history) and _is_event(history[0])
    if isinstance(data, list):
        return bool(data) and _is_event(data[0]) and "source" in data[0]
    return False


def _is_event(item: Any) -> bool:
    return isinstance(item, dict) and ("action" in item or "observation" in item) and "id" in item


def parse(source: Source) -> ParsedSession:
    """Parse an OpenHands record into a :class:`ParsedSession`.

    Args:
        source: a ``json`` source accepted by :func:`detect`.

    Returns:
        The session: entries in history order (``source_ref = "history[i]"``), a final
        ``run_error`` event when the run failed; ``metadata`` holds every top-level field
        except ``history``; ``title`` is the task's first line; ``source_session_id`` the
        ``instance_id``.

    Raises:
        FormatError: ``history`` missing or not a list, an event that is not an object or has
            neither ``action`` nor ``observation``, wrong field types (``args``,
            ``tool_call_metadata``, ``content``), null message content, an unknown
            ``source`` on a message action.
    """
    path = source.path
    data = source.data
    if isinstance(data, list):
        history, record = data, {}
    elif isinstance(data, dict):
        found = data.get("history")
        if found is None:
            raise FormatError(path, "", "history", "missing: an OpenHands record needs history[]")
        if not isinstance(found, list):
            raise FormatError(path, "", "history", f"expected a list, got {type(found).__name__}")
        history, record = found, data
    else:
        raise FormatError(path, "", "", "expected a JSON object with history[]")

    state = _State()
    for index, event in enumerate(history):
        where = f"history[{index}]"
        if not isinstance(event, dict):
            raise FormatError(path, where, "", f"expected an object, got {type(event).__name__}")
        for key in ("id", "cause"):
            value = event.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | str)):
                raise FormatError(
                    path, where, key, f"expected an integer or a string, got {type(value).__name__}"
                )
        if isinstance(event.get("action"), str):
            _action(path, where, event, state)
        elif isinstance(event.get("observation"), str):
            _observation(path, where, event, state)
        elif "action" in event or "observation" in event:
            key = "action" if "action" in event else "observation"
            raise FormatError(
                path, where, key, f"expected a string, got {type(event[key]).__name__}"
            )
        else:
            raise FormatError(path, where, "action", "event has neither 'action' nor 'observation'")

    error = record.get("error")
    if error:
        state.entries.append(
            ParsedEntry(
                kind="event",
                role="runtime",
                content={"type": "run_error", "error": error},
                source_ref="error",
            )
        )

    metadata = {k: v for k, v in record.items() if k != "history"}
    instruction = record.get("instruction")
    title_text = instruction if isinstance(instruction, str) else state.first_user
    instance_id = record.get("instance_id")
    return ParsedSession(
        format=NAME,
        entries=state.entries,
        title=task_title(title_text or ""),
        source_session_id=instance_id if isinstance(instance_id, str) else "",
        metadata=metadata,
    )


class _State:
    """Mutable bookkeeping while walking the history."""

    def __init__(self) -> None:
        self.entries: list[ParsedEntry] = []
        self.calls: dict[Any, tuple[str, str]] = {}  # action id -> (call id, tool name)
        self.by_call_id: dict[str, tuple[str, str]] = {}  # source call id -> (call id, name)
        self.used_ids: set[str] = set()
        self.answered: set[str] = set()
        self.seen_responses: set[str] = set()
        self.action_ids: set[Any] = set()
        self.first_user = ""


def _envelope(event: dict[str, Any], skip: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in skip}


def _args(path: str | Path, where: str, event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args", {})
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise FormatError(path, where, "args", f"expected an object, got {type(args).__name__}")
    return args


def _action(path: str | Path, where: str, event: dict[str, Any], state: _State) -> None:
    action = event["action"]
    args = _args(path, where, event)
    if event.get("id") is not None:
        state.action_ids.add(event["id"])
    tcm = event.get("tool_call_metadata")
    if tcm is not None and not isinstance(tcm, dict):
        raise FormatError(
            path, where, "tool_call_metadata", f"expected an object, got {type(tcm).__name__}"
        )

    if action == "system" and not tcm:
        text = require_str(path, where, "args.content", args.get("content", event.get("message")))
        meta = _envelope(event, ("args",))
        meta["args"] = {k: v for k, v in args.items() if k != "content"}
        if meta.get("message") == text:
            del meta["message"]
        state.entries.append(message("system", text, source_ref=where, metadata=meta))
        return

    if action == "message" and not tcm:
        sender = event.get("source")
        roles = {"user": "user", "agent": "assistant"}
        if not isinstance(sender, str) or sender not in roles:
            raise FormatError(path, where, "source", f"unknown message source {sender!r}")
        role = roles[sender]
        said = args.get("content", event.get("message"))
        if said is None and role == "assistant":
            said = ""
        text = require_str(path, where, "args.content", said)
        meta = _envelope(event, ("args",))
        meta["args"] = {k: v for k, v in args.items() if k != "content"}
        if meta.get("message") == text:
            del meta["message"]
        if role == "user" and not state.first_user:
            state.first_user = text
        state.entries.append(message(role, text, source_ref=where, metadata=meta))
        return

    if tcm:
        _tool_action(path, where, event, args, tcm, state)
        return

    if action == "finish":
        text = args.get("final_thought") or args.get("thought") or event.get("message") or ""
        text = require_str(path, where, "args.final_thought", text)
        state.entries.append(message("assistant", text, source_ref=where, metadata=dict(event)))
        return

    if action == "think":
        text = require_str(path, where, "args.thought", args.get("thought", ""))
        state.entries.append(
            ParsedEntry(
                kind="reasoning",
                role="assistant",
                content={"text": text},
                source_ref=where,
                metadata=_envelope(event, ()),
            )
        )
        return

    content: dict[str, Any] = {"type": action}
    derived = False
    if action == "condensation":
        derived = True
        for key in (
            "summary",
            "summary_offset",
            "forgotten_event_ids",
            "forgotten_events_start_id",
            "forgotten_events_end_id",
        ):
            if args.get(key) is not None:
                content[key] = args[key]
    elif isinstance(event.get("message"), str):
        content["message"] = event["message"]
    state.entries.append(
        ParsedEntry(
            kind="event",
            role="runtime",
            content=content,
            derived=derived,
            source_ref=where,
            metadata=_envelope(event, ()),
        )
    )


def _model_message(response: Any) -> dict[str, Any]:
    if isinstance(response, dict):
        choices = response.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            msg = choices[0].get("message")
            if isinstance(msg, dict):
                return msg
    return {}


def _usage(response: Any, llm_metrics: Any) -> dict[str, Any] | None:
    """Usage of one model call: ``model_response.usage``, else the matching (or last)
    ``llm_metrics.token_usages`` item. ``accumulated_token_usage`` is cumulative: not used."""
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict) and isinstance(llm_metrics, dict):
        items = [u for u in llm_metrics.get("token_usages") or [] if isinstance(u, dict)]
        response_id = response.get("id") if isinstance(response, dict) else None
        matching = [u for u in items if response_id and u.get("response_id") == response_id]
        candidates = matching or items
        usage = candidates[-1] if candidates else None
    if not isinstance(usage, dict):
        return None
    out = usage_counts(
        usage,
        (
            *OPENAI_USAGE,
            ("cache_read_tokens", "cache_read_tokens"),
            ("cache_write_tokens", "cache_write_tokens"),
        ),
    )
    return out if "input_tokens" in out or "output_tokens" in out else None


def _tool_action(
    path: str | Path,
    where: str,
    event: dict[str, Any],
    args: dict[str, Any],
    tcm: dict[str, Any],
    state: _State,
) -> None:
    action = event["action"]
    name = require_str(path, where, "tool_call_metadata.function_name", tcm.get("function_name"))
    source_id = require_str(path, where, "tool_call_metadata.tool_call_id", tcm.get("tool_call_id"))
    response = tcm.get("model_response")
    model_msg = _model_message(response)

    arguments: Any = None
    calls = model_msg.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise FormatError(
            path,
            where,
            "tool_call_metadata.model_response.choices[0].message.tool_calls",
            f"expected a list, got {type(calls).__name__}",
        )
    for call in calls or []:
        if isinstance(call, dict) and call.get("id") == source_id:
            function = call.get("function") or {}
            if isinstance(function, dict) and "arguments" in function:
                arguments = object_arguments(function["arguments"])
            break
    if arguments is None:
        arguments = {k: v for k, v in args.items() if k != "thought" or action == "think"}

    thought = args.get("thought")
    if action == "think":
        text = model_msg.get("content") if isinstance(model_msg.get("content"), str) else ""
    else:
        text = thought if isinstance(thought, str) else ""

    usage = None
    response_id = response.get("id") if isinstance(response, dict) else None
    if not isinstance(response_id, str) or response_id not in state.seen_responses:
        usage = _usage(response, event.get("llm_metrics"))
        if isinstance(response_id, str):
            state.seen_responses.add(response_id)

    call_id = source_id
    n = 2
    while call_id in state.used_ids:
        call_id = f"{source_id}#{n}"
        n += 1
    state.used_ids.add(call_id)

    meta = _envelope(event, ("args",))
    meta["args"] = {k: v for k, v in args.items() if k != "thought"}
    if action == "think" and isinstance(thought, str):
        meta["args"]["thought"] = thought
    if call_id != source_id:
        meta["source_tool_call_id"] = source_id

    if text:
        state.entries.append(
            message(
                "assistant",
                text,
                source_ref=where,
                usage=usage,
                metadata={
                    "from_field": "args.thought",
                    "id": event.get("id"),
                    "timestamp": event.get("timestamp"),
                },
            )
        )
        usage = None
    state.entries.append(
        tool_call(call_id, name, arguments, source_ref=where, usage=usage, metadata=meta)
    )
    state.calls[event.get("id")] = (call_id, name)
    state.by_call_id[source_id] = (call_id, name)


def _observation(path: str | Path, where: str, event: dict[str, Any], state: _State) -> None:
    kind = event["observation"]
    content = event.get("content", "")
    text = require_str(path, where, "content", content)
    extras = event.get("extras")
    if extras is not None and not isinstance(extras, dict):
        raise FormatError(path, where, "extras", f"expected an object, got {type(extras).__name__}")
    extras = extras or {}

    cause = event.get("cause")
    if cause is not None and cause not in state.action_ids:
        raise FormatError(
            path,
            where,
            "cause",
            f"observation of action {cause!r}, which is not earlier in the history "
            "(an orphaned observation)",
        )
    target = state.calls.get(cause) if cause is not None else None
    tcm = event.get("tool_call_metadata")
    if tcm is not None and not isinstance(tcm, dict):
        raise FormatError(
            path, where, "tool_call_metadata", f"expected an object, got {type(tcm).__name__}"
        )
    if target is None and cause is None and tcm:
        call_id = tcm.get("tool_call_id")
        target = state.by_call_id.get(call_id) if isinstance(call_id, str) else None
        if target is None:
            raise FormatError(
                path,
                where,
                "tool_call_metadata.tool_call_id",
                f"observation of tool call {call_id!r}, which is not earlier in the history "
                "(an orphaned observation)",
            )

    if target is not None and target[0] not in state.answered:
        call_id, name = target
        exit_code = None
        meta_extras = extras.get("metadata")
        if isinstance(meta_extras, dict) and isinstance(meta_extras.get("exit_code"), int):
            exit_code = meta_extras["exit_code"]
        is_error = (
            kind == "error"
            or (exit_code is not None and exit_code != 0)
            or event.get("success") is False
            or (kind in _EDITOR_OBSERVATIONS and text.startswith("ERROR:"))
        )
        state.answered.add(call_id)
        state.entries.append(
            tool_result(
                call_id,
                text,
                is_error=is_error,
                exit_code=exit_code,
                name=name,
                source_ref=where,
                metadata=_envelope(event, ("content",)),
            )
        )
        return

    body: dict[str, Any] = {"type": kind, "text": text}
    if kind == "error":
        body["is_error"] = True
    if kind == "agent_state_changed" and "agent_state" in extras:
        body["agent_state"] = extras["agent_state"]
    meta = _envelope(event, ("content",))
    if target is not None:
        meta["duplicate_result_for"] = target[0]
    state.entries.append(
        ParsedEntry(kind="event", role="runtime", content=body, source_ref=where, metadata=meta)
    )
