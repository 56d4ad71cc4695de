"""Importer for mini-swe-agent ``.traj.json`` trajectories (FORMATS.md section 5, SOURCES.md 5).

Pure module. A trajectory is ``{info, messages[], trajectory_format: "mini-swe-agent-1",
instance_id}``; ``messages[]`` are ``{role, content}`` with ``extra.response`` (the raw
ChatCompletion) on assistant messages.

Mapping
-------
* ``system`` / ``user`` messages -> ``message`` entries.
* An ``assistant`` message -> a ``reasoning`` entry when the provider returned reasoning
  text (``extra.response.choices[0].message.reasoning``), then the ``message`` (usage from
  ``extra.response.usage``, the whole ``extra`` in ``metadata``) and, when the text holds
  exactly one fenced ```` ```bash ```` block (mini-swe-agent's own rule), a ``tool_call``
  ``bash-<index>`` named ``bash`` with ``arguments = {"command": ...}``.
* The next ``user`` message of the form ``<returncode>N</returncode>...`` (short
  ``<output>`` form or the long ``<warning>/<output_head>/<elided_chars>/<output_tail>``
  form) -> the call's ``tool_result``, verbatim, with ``exit_code = N`` and
  ``is_error = N != 0``. In the long form ``metadata["elided_chars"] = N`` and
  ``metadata["truncated_by_source"] = True``: it is the raw observation the agent saw,
  so it is not ``derived``. The timeout template -> an ``is_error`` result.
* Format-error user messages (``Please always provide EXACTLY ONE action...``) stay user
  messages with ``metadata["format_error"] = True`` and ``metadata["harness"] = True``
  (the harness wrote them, not the user: they are never pinned as instructions).
* The final raw submission (a user message equal to ``info.submission``, sent without the
  ``<returncode>`` wrapper) is the output of the pending submit call: it becomes that call's
  ``tool_result`` with ``metadata["submission"] = True`` (so an 868k-character diff is an
  artifact, not a P0 pin). Any other user message is kept verbatim as a user message.
"""

from __future__ import annotations

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
from journal_app.formats.fields import message_fields, top_list, usage_counts
from journal_app.formats.source import Source
from journal_app.formats.titles import task_title

NAME = "mini-swe-agent-traj"

_ROLES = ("system", "user", "assistant")
# mini-swe-agent's own action regex (DefaultAgent.parse_action).
_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE = re.compile(r"\A\s*<returncode>(-?\d+)</returncode>")
_ELIDED = re.compile(r"<elided_chars>\s*(\d+) characters elided\s*</elided_chars>")
_TIMEOUT = re.compile(r"\A\s*The last command <command>.*?</command> timed out", re.DOTALL)
_FORMAT_ERROR = "Please always provide EXACTLY ONE action"


def detect(source: Source) -> bool:
    """Return True for a mini-swe-agent trajectory.

    Needs a JSON object with a ``messages`` list and ``trajectory_format`` starting with
    ``mini-swe-agent`` (or ``info.mini_version``). Never raises.
    """
    source = source.detection_view()  # a large file: its bounded preview
    if source.kind != "json" or not isinstance(source.data, dict):
        return False
    data = source.data
    if not isinstance(data.get("messages"), list):
        return False
    fmt = data.get("trajectory_format")
    if isinstance(fmt, str):
        return fmt.startswith("mini-swe-agent")
    info = data.get("info")
    return isinstance(info, dict) and "mini_version" in info


def parse(source: Source) -> ParsedSession:
    """Parse a mini-swe-agent v1 trajectory.

    Args:
        source: a ``json`` source accepted by :func:`detect`.

    Returns:
        The session, entries in message order (``source_ref = "messages[i]"``).
        ``metadata`` holds every top-level field except ``messages`` (``info`` with
        ``submission``, ``model_stats``, ``config``; ``trajectory_format``; ``instance_id``).
        ``title`` is the task's first line, ``source_session_id`` the ``instance_id``.

    Raises:
        FormatError: ``messages`` missing or not a list, a message that is not an object, a
            missing or unknown ``role``, null content on a non-assistant message, content of
            the wrong type, ``extra`` that is not an object.
    """
    path = source.path
    data = source.data
    messages = top_list(
        path,
        data,
        "messages",
        what="messages[]",
        missing="missing: a mini-swe-agent trajectory needs it",
    )
    raw_info = data.get("info")
    info: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
    submission = info.get("submission")

    entries: list[ParsedEntry] = []
    pending = ""
    first_user = ""
    for index, item in enumerate(messages):
        where = f"messages[{index}]"
        role, text, meta = message_fields(path, where, item, _ROLES)

        if role == "assistant":
            pending = ""
            entries.extend(_assistant(path, where, index, text, meta))
            if entries[-1].kind == "tool_call":
                pending = entries[-1].tool_call_id
            continue

        if role == "user":
            is_submission = isinstance(submission, str) and bool(submission) and text == submission
            result = _result(pending, text, where, meta) if pending else None
            if result is None and pending and is_submission:
                # the submit command's output: mini-swe-agent sends it back without the
                # <returncode> wrapper, but it is the result of the pending call, not a prompt
                result = tool_result(
                    pending,
                    text,
                    name="bash",
                    source_ref=where,
                    metadata={**meta, "submission": True},
                )
            pending = ""
            if result is not None:
                entries.append(result)
                continue
            if text.lstrip().startswith(_FORMAT_ERROR):
                # written by the harness, not the user: kept verbatim, never pinned
                meta["format_error"] = True
                meta["harness"] = True
            if is_submission:
                meta["submission"] = True
            if not first_user:
                first_user = text
        entries.append(message(role, text, source_ref=where, metadata=meta))

    instance_id = data.get("instance_id")
    return ParsedSession(
        format=NAME,
        entries=entries,
        title=task_title(first_user),
        source_session_id=instance_id if isinstance(instance_id, str) else "",
        metadata={k: v for k, v in data.items() if k != "messages"},
    )


def _assistant(
    path: str | Path, where: str, index: int, text: str, meta: dict[str, Any]
) -> list[ParsedEntry]:
    extra = meta.get("extra")
    if extra is not None and not isinstance(extra, dict):
        raise FormatError(path, where, "extra", f"expected an object, got {type(extra).__name__}")
    response = (extra or {}).get("response")
    response = response if isinstance(response, dict) else {}
    out: list[ParsedEntry] = []

    choices = response.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else {}
    model_msg = choice.get("message") if isinstance(choice, dict) else None
    reasoning = model_msg.get("reasoning") if isinstance(model_msg, dict) else None
    if isinstance(reasoning, str) and reasoning:
        out.append(
            ParsedEntry(
                kind="reasoning",
                role="assistant",
                content={"text": reasoning},
                source_ref=where,
                metadata={"from_field": "extra.response.choices[0].message.reasoning"},
            )
        )

    actions = _ACTION.findall(text)
    if len(actions) != 1:
        meta["actions_found"] = len(actions)
    out.append(message("assistant", text, source_ref=where, usage=_usage(response), metadata=meta))
    if len(actions) == 1:
        out.append(
            tool_call(f"bash-{index}", "bash", {"command": actions[0].strip()}, source_ref=where)
        )
    return out


def _usage(response: dict[str, Any]) -> dict[str, Any] | None:
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return None
    out = usage_counts(usage)
    prompt = usage.get("prompt_tokens_details")
    cached = prompt.get("cached_tokens") if isinstance(prompt, dict) else None
    if isinstance(cached, int):
        out["cache_read_tokens"] = cached
    completion = usage.get("completion_tokens_details")
    reasoning = completion.get("reasoning_tokens") if isinstance(completion, dict) else None
    if isinstance(reasoning, int):
        out["reasoning_tokens"] = reasoning
    if isinstance(usage.get("cost"), int | float):
        out["cost"] = usage["cost"]
    return out or None


def _result(call_id: str, text: str, where: str, meta: dict[str, Any]) -> ParsedEntry | None:
    """The tool result a user observation message stands for, or None if it is not one."""
    match = _RETURNCODE.match(text)
    if match:
        code = int(match.group(1))
        elided = _ELIDED.search(text)
        if elided:
            meta["elided_chars"] = int(elided.group(1))
            meta["truncated_by_source"] = True
        return tool_result(
            call_id,
            text,
            is_error=code != 0,
            exit_code=code,
            name="bash",
            source_ref=where,
            metadata=meta,
        )
    if _TIMEOUT.match(text):
        meta["timeout"] = True
        return tool_result(
            call_id, text, is_error=True, name="bash", source_ref=where, metadata=meta
        )
    return None
