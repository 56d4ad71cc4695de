"""Mechanical facts: what code can establish without a model (DESIGN.md section 5.3). Pure.

Used by the first fold and as the fallback of a fold whose model proposals were rejected:

* every authoritative system, developer and user message becomes a P0 **pin** holding its
  text verbatim (author ``code``);
* every tool call with a result becomes one fact about its outcome: a routine read at P3
  (``history``), another success at P2 (``verified_state``), a failure at P1 as a
  ``blocker`` (so no later success claim may cite it as support);
* every tool call that never got a result in a closed round becomes a P1
  ``open_obligation`` "tool X was called and did not complete" ("is pending since seq N" when
  the runtime declared it pending), closed by its result when that arrives later.

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

from journal_app.chunking import DEFAULT_CHUNK_BYTES
from journal_app.content import is_authoritative
from journal_app.identifiers import COMMAND_LIMIT, Identifier, identifiers_of
from journal_app.privacy import redact_secrets
from ledger_app.facts import Fact
from ledger_app.outcomes import (
    QUOTE_CHARS,
    SUBMIT_COMMAND,
    SUBMIT_TOOLS,
    first_text,
    read_outcome,
    support_item,
)
from ledger_app.pending import call_obligation

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
    #: the journal's chunk size in bytes (support items name the chunks of their quote)
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    #: the entry's stored identifiers (:class:`journal_app.models.EntryIdentifiers`, the
    #: same :func:`journal_app.identifiers.identifiers_of` reading), when the service read
    #: them; ``None``: :func:`mentions` extracts them itself (issue 18: once per entry)
    identifiers: tuple[Identifier, ...] | None = None


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


def shown_command(cmd: str) -> str:
    """A command as a fact shows it: redacted, whitespace collapsed, cut after
    :data:`journal_app.identifiers.COMMAND_LIMIT` characters (the loss report's command
    identifier, so a fact keeps it whole)."""
    flat = " ".join(redact(cmd).split())
    return flat if len(flat) <= COMMAND_LIMIT else flat[:COMMAND_LIMIT].rstrip() + "…"


#: Identifier kinds a tool fact lists from its entries (issue 15, item 9: the loss report)
MENTION_KINDS = ("path", "url", "number", "hash", "id", "migration")
#: Most identifiers one fact lists; the rest stay recoverable from the cited entry
MENTION_LIMIT = 100


def mentions(text: str, *views: EntryView, kinds: tuple[str, ...] = MENTION_KINDS) -> str:
    """``"; mentions: a.py, 5 files, ..."``: identifiers of ``views`` (paths, URLs, numbers
    with units, hashes, ids; ``kinds`` of :data:`MENTION_KINDS`) that ``text`` lacks, at most
    :data:`MENTION_LIMIT`, read from the filtered text
    (:func:`journal_app.identifiers.identifiers_of`: never a secret; a view's stored
    ``identifiers`` when it carries them); ``""`` when there are none."""
    found: list[str] = []
    for v in views:
        stored = v.identifiers if not v.derived else None
        for ident in (
            stored
            if stored is not None
            else identifiers_of(
                kind=v.kind, text=v.text, content=v.content, tool_call_id=v.tool_call_id
            )
        ):
            if ident.kind in kinds and ident.value not in text and ident.value not in found:
                found.append(ident.value)
    if not found:
        return ""
    more = len(found) - MENTION_LIMIT
    return (
        "; mentions: "
        + ", ".join(found[:MENTION_LIMIT])
        + (f" (+{more} more in the entry)" if more > 0 else "")
    )


#: ``command`` values of file-editor tools (OpenHands/SWE-agent ``str_replace_editor``): a
#: sub-command, not a shell command
EDITOR_COMMANDS = ("view", "create", "str_replace", "insert", "undo_edit")


def _describe(call: EntryView) -> str:
    cmd = command_of(call)
    args = call.content.get("arguments")
    path = args.get("path") if isinstance(args, dict) else None
    if cmd in EDITOR_COMMANDS and isinstance(path, str):
        return f"`{call.tool_name}` {cmd} on `{clip(redact(path), 160)}`"
    if cmd:
        return f"`{call.tool_name}` command `{shown_command(cmd)}`"
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
    return entry.text != "" and is_authoritative(
        entry.kind, entry.role, entry.derived, entry.meta, text=entry.text
    )


def cite(view: EntryView, quote: str = "") -> dict[str, Any]:
    """A support item citing ``view``, with the byte range and chunks of ``quote`` when the
    quote is exact text of the entry (:func:`ledger_app.outcomes.support_item`)."""
    return support_item(
        entry_hash=view.entry_hash, content=view.content, quote=quote, chunk_bytes=view.chunk_bytes
    )


def _call_quote(call: EntryView) -> str:
    cmd = command_of(call)
    if cmd:
        return cmd.splitlines()[0][:QUOTE_CHARS]
    args = call.content.get("arguments")
    if isinstance(args, dict):
        for key in ("file_path", "path", "filePath", "pattern", "query", "url"):
            if isinstance(args.get(key), str):
                return args[key][:QUOTE_CHARS]
    return call.tool_name


#: outcome kind -> (category, priority, outcome label) of the fact (issue 15, item 5)
_OUTCOME_CLASS = {
    "failure": ("blocker", "P1", "failure"),
    "rejected": ("blocker", "P1", "failure"),
    "plan_rejected": ("blocker", "P1", "failure"),
    "no_match": ("history", "P3", "no_match"),
    "read": ("history", "P3", "success"),
    "search": ("history", "P3", "success"),
    "plan_approved": ("decision", "P1", "success"),
    "answered": ("decision", "P1", "success"),
    "submitted": ("verified_state", "P1", "success"),
}


def outcome_fact(call: EntryView, result: EntryView) -> Fact:
    """One fact stating what ``result`` showed of ``call`` (:func:`ledger_app.outcomes.read_outcome`).

    A failure, a rejected edit and a rejected plan are P1 blockers (``outcome`` failure, so
    no success claim may cite them); a search with no match is P3 history; an approved plan
    and a question's answer are P1 decisions; a submission is P1 verified state; a routine
    read is P3 history and any other success P2 verified state. Support: the call (quoting
    its command or path) and the result (quoting the decisive text), with byte ranges.
    """
    args = call.content.get("arguments")
    output = result.content.get("output")
    seen = read_outcome(
        tool_name=call.tool_name,
        arguments=args if isinstance(args, dict) else {},
        command=command_of(call),
        output=output if isinstance(output, str) else result.text,
        is_error=result.is_error,
        result_content=result.content,
    )
    exit_code = result.content.get("exit_code")
    code = f" (exit {exit_code})" if exit_code is not None else ""
    routine = is_routine_read(call)
    category, priority, label = _OUTCOME_CLASS.get(
        seen.kind,
        ("history", "P3", "success") if routine else ("verified_state", "P2", "success"),
    )
    what = _describe(call)
    if seen.kind == "failure":
        detail = _json_failure(result.text) or seen.summary.removeprefix("failed").lstrip(": ")
        text = f"FAILED: {what} failed{code}" + (f": {detail}" if detail else "")
    else:
        prefix = {"rejected": "REJECTED: ", "plan_rejected": "REJECTED: "}.get(seen.kind, "")
        text = f"{prefix}{what}{code}: {seen.summary}"
    # a failed or interrupted run's numbers are partial output, never results (DESIGN.md
    # case 05): its fact names paths, URLs and ids, not numbers
    kinds = (
        tuple(k for k in MENTION_KINDS if k != "number")
        if seen.kind == "failure"
        else MENTION_KINDS
    )
    text += mentions(text, call, result, kinds=kinds)
    support = [
        cite(call, seen.quote if seen.quote_in_call else _call_quote(call)),
        cite(
            result,
            "" if seen.quote_in_call else seen.quote or first_text(result.text)[:QUOTE_CHARS],
        ),
    ]
    fact: Fact = {
        "id": f"tool:{result.entry_hash[:16]}",
        "category": category,
        "priority": priority,
        "lifecycle": "active",
        "confidence": "verified",
        "text": text,
        "support": support,
        "author": "code",
        "outcome": label,
        "result": seen.kind,
    }
    if seen.path:
        fact["path"] = redact(seen.path)
    return fact


def is_submit(call: EntryView) -> bool:
    """A call that submits the run's final output (``submit``, ``finish``, mini-swe-agent's
    ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``): it ends the run, it never "did not complete"."""
    name = call.tool_name.lower().split("__")[-1]
    return name in SUBMIT_TOOLS or bool(SUBMIT_COMMAND.search(command_of(call)))


def interrupted_fact(call: EntryView) -> Fact:
    """An open obligation for a call whose result never came (DESIGN.md section 4).

    A submit call with no result is the run's end, not an interruption: it is recorded as
    submitted (P1 verified state, confidence ``reported``: no result shows what happened).
    """
    if is_submit(call):
        return {
            "id": f"tool:{call.entry_hash[:16]}",
            "category": "verified_state",
            "priority": "P1",
            "lifecycle": "active",
            "confidence": "reported",
            "text": f"{_describe(call)}: the run ended by submitting its final output",
            "support": [cite(call, _call_quote(call))],
            "author": "code",
            "outcome": "success",
            "result": "submitted",
        }
    fact: Fact = {
        "id": f"tool:{call.entry_hash[:16]}",
        "category": "open_obligation",
        "priority": "P1",
        "lifecycle": "active",
        "confidence": "inferred",
        "text": f"{_describe(call)} was called and did not complete (no result in the journal)",
        "support": [cite(call, _call_quote(call))],
        "author": "code",
        "outcome": "interrupted",
    }
    return call_obligation(fact, call)  # "pending since seq N" when declared (issue 15)


def required_pins(entries: Sequence[EntryView]) -> list[dict[str, str]]:
    """``[{"entry": hex, "text": verbatim}]`` for every pin source in ``entries``."""
    return [{"entry": e.entry_hash, "text": e.text} for e in entries if is_pin_source(e)]
