"""Importer for ATIF trajectories (Harbor Agent Trajectory Interchange Format; corpus
FORMATS.md section 8, SOURCES.md section 8).

Pure module. Root object ``{schema_version, session_id, agent, steps[], notes?,
final_metrics?, extra?}``; everything but ``steps`` goes to the session metadata and
``session_id`` is the ``source_session_id``. Two step shapes are accepted:

* canonical ``ATIF-v1.x``: ``tool_calls[{tool_call_id, function_name, arguments}]`` and
  ``observation{results[{source_call_id, content, subagent_trajectory_ref?}]}`` in the
  same agent step. A result without ``source_call_id`` (an action that is not a tool call,
  or a system operation) becomes a runtime ``event`` ``{"type": "observation", ...}``.
* the corpus variant (``schema_version: "1.4"``): ``tool_calls[{id, name, arguments}]``,
  and each result is its own ``source: "system"`` step with ``message: "Tool result for
  <id>"`` and ``observation{type: "tool_result", content, result{success, output|error}}``;
  ``success == false`` sets ``is_error`` and a leading ``"Exit code N"`` line sets
  ``exit_code``.

Step mapping: ``source`` user/agent/system -> role user/assistant/system. An agent step
gives ``reasoning`` (``reasoning_content``), then ``message`` (when the text is non-empty,
or when the step has nothing else), then its ``tool_call`` entries, then its results.
``metrics`` go to the first entry's ``usage`` (``prompt_tokens`` -> ``input_tokens``,
``completion_tokens`` -> ``output_tokens``, ``cached_tokens`` -> ``cache_read_tokens``,
``cost_usd``) and verbatim to ``metadata["metrics"]``.

Order repair (variant): the corpus file lists an agent turn's tool calls on the *next*
agent step, after their result steps (steps 3-6 answer calls listed on step 7). When a
result step answers a call that is only listed on a later step, all of that step's calls
are emitted right there, before the result, with ``metadata["listed_on"]`` naming the
step; the step's own message is emitted at its place. This restores the real order
(call, result, next message) that the step timestamps also show.

User steps are authoritative and not marked ``injected`` (ATIF has no such marker).
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
from journal_app.formats.openai_chat import parse_arguments
from journal_app.formats.source import Source
from journal_app.formats.titles import short_title

NAME = "atif-trajectory"

SOURCES = {"user": "user", "agent": "assistant", "system": "system"}
_RESULT_LABEL = re.compile(r"^Tool result for (\S+)\s*$")
_EXIT_CODE = re.compile(r"^Exit code (-?\d+)(?:\n|$)")
_STEP_MODELLED = (
    "source",
    "message",
    "reasoning_content",
    "tool_calls",
    "observation",
    "metrics",
)


def detect(source: Source) -> bool:
    """Return True for a JSON object with a ``schema_version`` string and a ``steps`` list."""
    source = source.detection_view()  # a large file: its bounded preview
    data = source.data
    return (
        source.kind == "json"
        and isinstance(data, dict)
        and isinstance(data.get("schema_version"), str)
        and isinstance(data.get("steps"), list)
    )


def _calls_of(
    path: Path, where: str, step: dict[str, Any]
) -> list[tuple[str, str, Any, dict[str, Any]]]:
    """``[(id, name, arguments, metadata)]`` of a step's ``tool_calls`` (both shapes)."""
    raw = step.get("tool_calls")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise FormatError(path, where, "tool_calls", f"expected a list, got {type(raw).__name__}")
    calls = []
    for k, c in enumerate(raw):
        field = f"tool_calls[{k}]"
        if not isinstance(c, dict):
            raise FormatError(path, where, field, "expected an object")
        id_key = "tool_call_id" if "tool_call_id" in c else "id"
        name_key = "function_name" if "function_name" in c else "name"
        call_id, name = c.get(id_key), c.get(name_key)
        if not isinstance(call_id, str) or not call_id:
            raise FormatError(path, where, f"{field}.tool_call_id", "tool call has no id")
        if not isinstance(name, str) or not name:
            raise FormatError(path, where, f"{field}.function_name", "tool call has no name")
        if "arguments" not in c:
            raise FormatError(path, where, f"{field}.arguments", "field is missing")
        arguments, raw_kept = parse_arguments(c["arguments"])
        meta = {k2: v for k2, v in c.items() if k2 not in (id_key, name_key, "arguments")}
        if raw_kept is not None:
            meta["raw_arguments"] = raw_kept
        calls.append((call_id, name, arguments, meta))
    return calls


def _usage(metrics: Any) -> dict[str, Any] | None:
    if not isinstance(metrics, dict):
        return None
    names = {
        "prompt_tokens": "input_tokens",
        "completion_tokens": "output_tokens",
        "cached_tokens": "cache_read_tokens",
        "cost_usd": "cost_usd",
    }
    usage = {new: metrics[old] for old, new in names.items() if metrics.get(old) is not None}
    return usage or None


def _variant_result(
    path: Path, where: str, step: dict[str, Any], obs: dict[str, Any]
) -> ParsedEntry:
    """The tool_result of a corpus-variant ``source: "system"`` result step."""
    label = step.get("message")
    match = _RESULT_LABEL.match(label) if isinstance(label, str) else None
    call_id = obs.get("tool_call_id") or obs.get("source_call_id") or (match and match[1])
    if not isinstance(call_id, str) or not call_id:
        raise FormatError(
            path,
            where,
            "message",
            "tool result step names no call (expected 'Tool result for <id>')",
        )
    content = obs.get("content")
    if content is None:
        raise FormatError(path, where, "observation.content", "content is null")
    if not isinstance(content, str):
        raise FormatError(path, where, "observation.content", "expected a string")
    result = obs.get("result")
    if result is not None and not isinstance(result, dict):
        raise FormatError(path, where, "observation.result", "expected an object")
    result = result or {}
    success = result.get("success", True)
    if not isinstance(success, bool):
        raise FormatError(path, where, "observation.result.success", "expected a boolean")
    meta: dict[str, Any] = {"message": label}
    extra_obs = {k: v for k, v in obs.items() if k not in ("type", "content", "result")}
    if extra_obs:
        meta["observation"] = extra_obs
    # result.output / result.error usually repeat ``content``: keep only what differs.
    kept = {k: v for k, v in result.items() if not (k in ("output", "error") and v == content)}
    same = [k for k in ("output", "error") if k in result and result[k] == content]
    meta["result"] = kept
    if same:
        meta["result_fields_equal_to_content"] = same
    code = _EXIT_CODE.match(content) if not success else None
    return tool_result(
        call_id,
        content,
        is_error=not success,
        exit_code=int(code[1]) if code else None,
        source_ref=where,
        metadata=meta,
    )


def _canonical_results(path: Path, where: str, obs: dict[str, Any]) -> list[ParsedEntry]:
    results = obs.get("results")
    if not isinstance(results, list):
        raise FormatError(path, where, "observation.results", "expected a list")
    entries = []
    for k, r in enumerate(results):
        field = f"observation.results[{k}]"
        if not isinstance(r, dict):
            raise FormatError(path, where, field, "expected an object")
        content = r.get("content", "")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise FormatError(path, where, f"{field}.content", "expected a string")
        meta = {key: v for key, v in r.items() if key not in ("source_call_id", "content")}
        if "content" not in r or r.get("content") is None:
            meta["content"] = r.get("content")
        ref = f"{where}.{field}"
        call_id = r.get("source_call_id")
        if call_id is None:
            body = {"type": "observation", "content": content, **meta}
            entries.append(ParsedEntry(kind="event", role="runtime", content=body, source_ref=ref))
            continue
        if not isinstance(call_id, str) or not call_id:
            raise FormatError(path, where, f"{field}.source_call_id", "expected a string")
        is_error = r.get("is_error", False)
        entries.append(
            tool_result(call_id, content, is_error=bool(is_error), source_ref=ref, metadata=meta)
        )
    return entries


def parse(source: Source) -> ParsedSession:
    """Parse an ATIF trajectory (canonical or corpus variant) into a :class:`ParsedSession`.

    Args:
        source: a ``kind="json"`` source accepted by :func:`detect`.

    Returns:
        The session; ``metadata`` holds ``schema_version``, ``session_id``, ``agent``,
        ``final_metrics``, ``extra``, ``notes`` (whatever the root has besides ``steps``).

    Raises:
        FormatError: naming the file, ``steps[N]`` and the field: a step that is not an
            object, a missing or unknown ``source``, a missing or null ``message``, a
            malformed tool call, a result step that names no call, a null result content.
    """
    path = source.path
    data = source.data
    if not detect(source):
        raise FormatError(path, "", "", "not an ATIF trajectory (schema_version and steps)")
    steps = data["steps"]
    where_of = [f"steps[{i}]" for i in range(len(steps))]

    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise FormatError(
                path, where_of[i], "", f"expected an object, got {type(step).__name__}"
            )
        if "source" not in step:
            raise FormatError(path, where_of[i], "source", "field is missing")
        if not isinstance(step["source"], str) or step["source"] not in SOURCES:
            raise FormatError(path, where_of[i], "source", f"unknown source {step['source']!r}")
        if "message" not in step:
            raise FormatError(path, where_of[i], "message", "field is missing")
        if step["message"] is None:
            raise FormatError(path, where_of[i], "message", "content is null")
        if not isinstance(step["message"], str):
            raise FormatError(path, where_of[i], "message", "expected a string")
    calls = [_calls_of(path, where_of[i], s) for i, s in enumerate(steps)]
    step_of_call = {c[0]: i for i, cs in enumerate(calls) for c in cs}
    emitted: set[int] = set()

    def call_entries(i: int, early: bool) -> list[ParsedEntry]:
        emitted.add(i)
        out = []
        for k, (call_id, name, arguments, meta) in enumerate(calls[i]):
            meta = dict(meta)
            if early:
                meta["listed_on"] = where_of[i]
                meta["step_timestamp"] = steps[i].get("timestamp")
            out.append(
                tool_call(
                    call_id,
                    name,
                    arguments,
                    source_ref=f"{where_of[i]}.tool_calls[{k}]",
                    metadata=meta,
                )
            )
        return out

    entries: list[ParsedEntry] = []
    early_first: dict[int, ParsedEntry] = {}
    title = ""
    for i, step in enumerate(steps):
        where = where_of[i]
        role = SOURCES[step["source"]]
        text = step["message"]
        obs = step.get("observation")
        if obs is not None and not isinstance(obs, dict):
            raise FormatError(path, where, "observation", "expected an object")
        made: list[ParsedEntry] = []
        result_obs = obs if obs is not None and obs.get("type") == "tool_result" else None
        variant_result = result_obs is not None
        if result_obs is not None:
            result = _variant_result(path, where, step, result_obs)
            owner = step_of_call.get(result.tool_call_id)
            if owner is not None and owner > i and owner not in emitted:
                hoisted = call_entries(owner, early=True)
                if hoisted:
                    early_first[owner] = hoisted[0]
                entries.extend(hoisted)
            made.append(result)
        else:
            reasoning = step.get("reasoning_content")
            if reasoning is not None:
                if not isinstance(reasoning, str):
                    raise FormatError(path, where, "reasoning_content", "expected a string")
                made.append(
                    ParsedEntry(
                        kind="reasoning",
                        role="assistant",
                        content={"text": reasoning},
                        source_ref=f"{where}.reasoning_content",
                    )
                )
            if text or not (calls[i] or obs or made):
                made.append(message(role, text, source_ref=where))
                if role == "user" and not title:
                    title = short_title(text)
            if calls[i] and i not in emitted:
                made.extend(call_entries(i, early=False))
            if obs is not None:
                if "results" in obs:
                    made.extend(_canonical_results(path, where, obs))
                else:
                    made.append(
                        ParsedEntry(
                            kind="event",
                            role="runtime",
                            content={**obs, "type": str(obs.get("type") or "observation")},
                            source_ref=f"{where}.observation",
                        )
                    )
        # The step's own fields go to its first entry; for a step whose only content were
        # calls emitted early, to the first of those.
        first = made[0] if made else early_first[i]
        step_meta = {k: v for k, v in step.items() if k not in _STEP_MODELLED}
        if not any(e.kind == "message" for e in made) and not variant_result:
            step_meta["message"] = text
        if isinstance(obs, dict) and "results" in obs and len(obs) > 1:
            step_meta["observation"] = {k: v for k, v in obs.items() if k != "results"}
        first.metadata = {**step_meta, **first.metadata}
        if isinstance(step.get("metrics"), dict):
            first.metadata["metrics"] = step["metrics"]
            first.usage = _usage(step["metrics"])
        elif "metrics" in step:
            first.metadata["metrics"] = step["metrics"]
        entries.extend(made)

    session_id = data.get("session_id")
    return ParsedSession(
        format=NAME,
        entries=entries,
        title=title,
        source_session_id=session_id if isinstance(session_id, str) else "",
        metadata={k: v for k, v in data.items() if k != "steps"},
    )
