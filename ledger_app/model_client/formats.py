"""Structured-output modes and what a server's refusal means (docs/design.md 5.3). Pure.

The three modes (:data:`FORMATS`), the per-process memory of the mode each server accepted
(:data:`FORMAT_MEMORY`), the answer-format hint added to the system message when the server
does not enforce the schema, and the readings of a refused request: the format refused
(:func:`format_refused`) or the prompt over the window (:func:`context_overflow`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import openai

#: Structured-output modes, strongest first; a refused mode steps down to the next.
FORMATS = ("json_schema", "json_object", "none")

#: base URL -> the mode its server accepted after refusing a stronger one (per process).
FORMAT_MEMORY: dict[str, str] = {}
_MEMORY_LOCK = threading.Lock()


#: Words of an error message that say the server refused the requested output format.
_FORMAT_WORDS = ("response_format", "json_schema", "json schema", "grammar", "not supported")


def format_refused(exc: openai.APIStatusError) -> bool:
    """True when ``exc`` is the server refusing the output format, not the request: HTTP
    400, 422 or 500 whose message names ``response_format``, ``json_schema`` or a grammar
    (llama-cpp-python's server answers 500, vLLM 400, others 422)."""
    if exc.status_code not in (400, 422, 500):
        return False
    text = str(exc).lower()
    return any(w in text for w in _FORMAT_WORDS)


def context_overflow(exc: BaseException) -> bool:
    """True when ``exc`` says the prompt does not fit the model's window (HTTP 400 or 413
    ``context_length_exceeded``, "maximum context length", "exceeds the context window")."""
    if getattr(exc, "status_code", None) not in (400, 413, 422, 500):
        return False
    text = str(exc).lower()
    return any(
        w in text
        for w in (
            "context_length_exceeded",
            "maximum context length",
            "context window",
            "context length",
            "too many tokens",
            "exceeds the available context",
        )
    )


def format_hint(schema: Mapping[str, Any], example: Any = None) -> str:
    """What the system message carries when the server does not enforce the schema: one
    compact example of the answer (when given) and the JSON schema, minified."""
    lines = [
        "",
        "## Answer format",
        "Answer with one JSON object and nothing else: no prose, no Markdown fence.",
    ]
    if example is not None:
        lines += [
            "An example answer (use these field names exactly):",
            json.dumps(example, ensure_ascii=False, separators=(",", ":")),
        ]
    lines += [
        "The JSON schema every answer follows:",
        json.dumps(schema, ensure_ascii=False, separators=(",", ":")),
    ]
    return "\n".join(lines)


def with_format_hint(
    messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any], example: Any = None
) -> list[dict[str, str]]:
    """``messages`` with :func:`format_hint` appended to the first system message (a new
    system message first when there is none)."""
    hint = format_hint(schema, example)
    out = [dict(m) for m in messages]
    for m in out:
        if m.get("role") == "system":
            m["content"] = str(m.get("content", "")) + "\n" + hint
            return out
    return [{"role": "system", "content": hint.strip()}, *out]


def remembered_format(base_url: str, configured: str) -> str:
    """The mode to ask ``base_url`` for: ``configured``, or the weaker one it accepted after
    refusing a stronger one in this process (:data:`FORMAT_MEMORY`)."""
    with _MEMORY_LOCK:
        known = FORMAT_MEMORY.get(base_url, configured)
    return max(configured, known, key=FORMATS.index)


def remember_format(base_url: str, mode: str) -> None:
    """Remember that ``base_url`` accepted ``mode`` after a refusal (never a stronger one)."""
    with _MEMORY_LOCK:
        FORMAT_MEMORY[base_url] = max(mode, FORMAT_MEMORY.get(base_url, mode), key=FORMATS.index)
