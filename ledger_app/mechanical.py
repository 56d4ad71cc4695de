"""Mechanical facts: what code can establish without a model (DESIGN.md section 5.3). Pure.

Used by the first fold and as the fallback of a fold whose model proposals were rejected:

* every authoritative system, developer and user message becomes a P0 **pin** holding its
  text verbatim (author ``code``);
* every tool call with a result becomes one fact about its outcome: a routine read at P3
  (``history``), another success at P2 (``verified_state``), a failure at P1 as a
  ``blocker`` (so no later success claim may cite it as support);
* every tool call that never got a result in a closed round becomes a P1
  ``open_obligation`` "tool X was called and did not complete".

Privacy (issue 12): a pin is the authoritative text verbatim, secrets included (validation
compares it byte for byte). Every other fact quotes journal text (a command, a path, an
error line) only through :func:`redact`, before it is clipped, so no non-pin fact copies a
secret value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from journal_app.content import is_authoritative
from journal_app.privacy import redact_secrets
from ledger_app.facts import Fact

READ_TOOLS = {
    "read",
    "read_file",
    "view",
    "glob",
    "grep",
    "ls",
    "list",
    "list_files",
    "find",
    "search",
    "cat",
    "websearch",
    "webfetch",
    "codesearch",
}
_READ_COMMAND = re.compile(
    r"^\s*(?:cd [^;&|]+(?:&&|;)\s*)?(cat|ls|head|tail|grep|rg|find|sed -n|wc|pwd|tree|less|file|stat|git (?:status|log|show|diff|branch))\b"
)
TEXT_LIMIT = 400


@dataclass
class EntryView:
    """What the mechanical rules read of one entry (built from a row by the service)."""

    seq: int
    entry_hash: str
    kind: str
    role: str
    text: str
    content: dict[str, Any]
    tool_call_id: str = ""
    tool_name: str = ""
    derived: bool = False
    is_error: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


def clip(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` with whitespace runs collapsed, cut to ``limit`` characters (``…`` at the cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact(text: str) -> str:
    """``text`` with every secret value replaced by ``[filtered: <kind>]``.

    :func:`journal_app.privacy.redact_secrets`, the one detector; deterministic, so the same
    command always gives the same redacted text (facts match repeated commands by it).
    """
    return redact_secrets(text)[0]


def redact_op(op: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``op`` with :func:`redact` applied to its reason and, unless the fact is a
    pin (verbatim by rule, DESIGN.md 5.2), to its fact's text and support quotes.

    Every op a writer proposes passes here (:func:`ledger_app.model_writer.compose`).
    """
    fact = op.get("fact")
    out = dict(op)
    if isinstance(op.get("reason"), str):
        out["reason"] = redact(op["reason"])
    if isinstance(fact, dict) and not fact.get("pin"):
        fact = dict(fact)
        if isinstance(fact.get("text"), str):
            fact["text"] = redact(fact["text"])
        if isinstance(fact.get("support"), list):
            fact["support"] = [
                {**s, "quote": redact(s["quote"])}
                if isinstance(s, dict) and isinstance(s.get("quote"), str)
                else s
                for s in fact["support"]
            ]
        out["fact"] = fact
    return out


def command_of(call: EntryView) -> str:
    """The shell command of a call, if its arguments hold one (``command``/``cmd``), else ``""``."""
    args = call.content.get("arguments")
    if isinstance(args, dict):
        for key in ("command", "cmd", "script"):
            value = args.get(key)
            if isinstance(value, list):
                value = " ".join(str(v) for v in value)
                value = value.removeprefix("bash -lc ").removeprefix("bash -c ")
            if isinstance(value, str) and value.strip():
                return value.strip()
    return ""


def is_routine_read(call: EntryView) -> bool:
    """A read-only look at files or search results (goes in at P3)."""
    name = call.tool_name.lower().split("__")[-1]
    if name in READ_TOOLS:
        return True
    args = call.content.get("arguments")
    if isinstance(args, dict) and args.get("command") == "view":
        return True
    return bool(_READ_COMMAND.match(command_of(call)))


def _json_failure(text: str) -> str:
    """``status interrupted, signal SIGTERM, exit_code null`` for a JSON-object result."""
    if not text.startswith("{"):
        return ""
    try:
        value = json.loads(text)
    except ValueError:
        return ""
    if not isinstance(value, dict):
        return ""
    parts = [
        f"{key} {json.dumps(value[key]) if not isinstance(value[key], str) else value[key]}"
        for key in ("status", "signal", "exit_code", "error")
        if key in value
    ]
    return ", ".join(parts)


def _first_error_line(text: str) -> str:
    compact = _json_failure(text)
    if compact:
        return compact
    for line in text.splitlines():
        if re.search(r"(?i)error|fail|denied|not found|exception|traceback", line):
            return line.strip()
    return text.strip().splitlines()[0] if text.strip() else ""


def _describe(call: EntryView) -> str:
    cmd = command_of(call)
    if cmd:
        return f"`{call.tool_name}` command `{clip(redact(cmd), 160)}`"
    args = call.content.get("arguments")
    if isinstance(args, dict):
        for key in ("file_path", "path", "filePath", "pattern", "query", "url"):
            if isinstance(args.get(key), str):
                return f"`{call.tool_name}` on `{clip(redact(args[key]), 160)}`"
    return f"`{call.tool_name}`"


def pin_fact(entry: EntryView) -> Fact:
    """The P0 pin of one authoritative message: its text verbatim, cited by its hash."""
    return {
        "id": f"pin:{entry.entry_hash[:16]}",
        "category": "constraint" if entry.role in ("system", "developer") else "objective",
        "priority": "P0",
        "lifecycle": "active",
        "confidence": "verified",
        "text": entry.text,
        "support": [{"entry": entry.entry_hash}],
        "pin": True,
        "author": "code",
    }


def is_pin_source(entry: EntryView) -> bool:
    """Authoritative message (:func:`journal_app.content.is_authoritative`) with non-empty text."""
    return is_authoritative(entry.kind, entry.role, entry.derived, entry.meta) and entry.text != ""


def outcome_fact(call: EntryView, result: EntryView) -> Fact:
    """One fact stating the outcome of ``call`` as shown by ``result``."""
    exit_code = result.content.get("exit_code")
    code = f" (exit {exit_code})" if exit_code is not None else ""
    what = _describe(call)
    if result.is_error:
        detail = clip(redact(_first_error_line(result.text)), 200)
        return {
            "id": f"tool:{result.entry_hash[:16]}",
            "category": "blocker",
            "priority": "P1",
            "lifecycle": "active",
            "confidence": "verified",
            "text": f"FAILED: {what} failed{code}" + (f": {detail}" if detail else ""),
            "support": [{"entry": call.entry_hash}, {"entry": result.entry_hash}],
            "author": "code",
            "outcome": "failure",
        }
    routine = is_routine_read(call)
    return {
        "id": f"tool:{result.entry_hash[:16]}",
        "category": "history" if routine else "verified_state",
        "priority": "P3" if routine else "P2",
        "lifecycle": "active",
        "confidence": "verified",
        "text": f"{what} ran{code}; output {len(result.text)} characters",
        "support": [{"entry": call.entry_hash}, {"entry": result.entry_hash}],
        "author": "code",
        "outcome": "success",
    }


def interrupted_fact(call: EntryView) -> Fact:
    """An open obligation for a call whose result never came (DESIGN.md section 4)."""
    return {
        "id": f"tool:{call.entry_hash[:16]}",
        "category": "open_obligation",
        "priority": "P1",
        "lifecycle": "active",
        "confidence": "inferred",
        "text": f"{_describe(call)} was called and did not complete (no result in the journal)",
        "support": [{"entry": call.entry_hash}],
        "author": "code",
        "outcome": "interrupted",
    }


def required_pins(entries: Sequence[EntryView]) -> list[dict[str, str]]:
    """``[{"entry": hex, "text": verbatim}]`` for every pin source in ``entries``."""
    return [{"entry": e.entry_hash, "text": e.text} for e in entries if is_pin_source(e)]
