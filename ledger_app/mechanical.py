"""Mechanical tool facts: what code can establish of tool calls without a model. Pure.

Used by the first fold and as the fallback of a fold whose model proposals were rejected
(with the pins of :mod:`ledger_app.pin_facts`, docs/design.md section 5.3):

* every tool call with a result becomes one fact about its outcome (:func:`outcome_fact`):
  a routine read at P3 (``history``), another success at P2 (``verified_state``), a failure
  at P1 as a ``blocker`` (so no later success claim may cite it as support);
* every tool call that never got a result in a closed round becomes a P1
  ``open_obligation`` "tool X was called and did not complete" ("is pending since seq N" when
  the runtime declared it pending), closed by its result when that arrives later
  (:func:`interrupted_fact`);
* :func:`fact_key` gives the command key by which a later run of the same command
  supersedes a fact, and :func:`stamp_keys` sets it on a model writer's facts too.

Every fact quotes journal text only through :mod:`ledger_app.fact_text` (redacted before it
is clipped), so no such fact copies a secret value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from journal_app.identifiers import identifiers_of
from ledger_app.consequence import is_consequential, is_test_run
from ledger_app.entry_view import EntryView, cite, command_of
from ledger_app.fact_text import clip, redact, shown_command
from ledger_app.facts import Fact
from ledger_app.outcomes import (
    QUOTE_CHARS,
    SUBMIT_COMMAND,
    SUBMIT_TOOLS,
    first_text,
    is_edit_tool,
    path_of,
    read_outcome,
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


#: Identifier kinds a tool fact lists from its entries (what the loss report counts)
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


def _call_quote(call: EntryView) -> str:
    cmd = command_of(call)
    if cmd:
        return cmd.splitlines()[0][:QUOTE_CHARS]
    args = call.content.get("arguments")
    if isinstance(args, dict):
        for key in ("file_path", "path", "filePath", "pattern", "query", "url"):
            value = args.get(key)
            if isinstance(value, str):
                return value[:QUOTE_CHARS]
    return call.tool_name


#: outcome kind -> (category, priority, outcome label) of the fact
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
    cmd = command_of(call)
    shell = "" if cmd in EDITOR_COMMANDS else cmd
    consequential = not routine and is_consequential(tool_name=call.tool_name, command=shell)
    category, priority, label = _OUTCOME_CLASS.get(
        seen.kind,
        ("history", "P3", "success") if routine else ("verified_state", "P2", "success"),
    )
    text_out = output if isinstance(output, str) else result.text
    if seen.kind == "failure":
        # docs/design.md 5.5: a lookup that found nothing, a failed read and a no-op are history;
        # a consequential action's failure and a failed test run are P1 until a later run
        # of the same command key passes; another command's failure (a probe) is P2
        if routine or _LOOKUP_MISS.search(text_out) and not consequential:
            category, priority = "history", "P3"
        elif _NO_OP.search(text_out):
            category, priority = "history", "P3"
        elif not consequential and not is_test_run(shell):
            priority = "P2"
    elif consequential and label == "success" and seen.kind not in _OUTCOME_CLASS:
        priority = "P1"
    what = _describe(call)
    if seen.kind == "failure":
        detail = _json_failure(result.text) or seen.summary.removeprefix("failed").lstrip(": ")
        text = f"FAILED: {what} failed{code}" + (f": {detail}" if detail else "")
    else:
        prefix = {"rejected": "REJECTED: ", "plan_rejected": "REJECTED: "}.get(seen.kind, "")
        text = f"{prefix}{what}{code}: {seen.summary}"
    # a failed or interrupted run's numbers are partial output, never results (docs/design.md
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
    if consequential:
        fact["consequential"] = True
    key = fact_key(call)
    if key:
        fact["command_key"] = key
    return fact


#: output of a lookup that found nothing (docs/design.md 5.5: history, never a blocker)
_LOOKUP_MISS = re.compile(
    r"No such file or directory|does not exist|cannot access|not found|No matches found|"
    r"cannot find the (?:file|path)",
    re.I,
)
#: output of a command that had nothing to do (``git commit`` with nothing to commit)
_NO_OP = re.compile(
    r"nothing to commit|nothing added to commit|no changes added to commit|"
    r"Already up[ -]to[ -]date|Everything up-to-date",
    re.I,
)


_PATCHED_FILE = re.compile(r"\*\*\* (?:Update|Add|Delete) File: ([^\n]+)")


def fact_key(call: EntryView) -> str:
    """The command key of a call's outcome fact (docs/design.md 5.5: a later fact with the same
    key supersedes it, and closes it when it was a failure and the later one a success).

    ``edit:<path>`` for an ``apply_patch`` command (the first file it changes);
    ``<tool>:<command>`` for another shell command (redacted: the same command always gives the
    same key); ``edit:<path>`` for a file edit or write by any edit tool (a later edit of
    the file supersedes the earlier, a rejected edit closes when one is applied);
    ``<tool>:<path>`` for another call naming a path; ``""`` when the call names neither.
    """
    cmd = command_of(call)
    args = call.content.get("arguments")
    args = args if isinstance(args, dict) else {}
    path = path_of(args)
    patched = _PATCHED_FILE.search(cmd) if "apply_patch" in cmd else None
    if patched:
        return f"edit:{redact(patched.group(1).strip())}"
    if cmd and cmd not in EDITOR_COMMANDS:
        return f"{call.tool_name}:{redact(cmd)}"
    if not path:
        return ""
    if cmd == "view" or is_routine_read(call):
        return f"{call.tool_name}:{redact(path)}"
    if cmd in EDITOR_COMMANDS or is_edit_tool(call.tool_name):
        return f"edit:{redact(path)}"
    return f"{call.tool_name}:{redact(path)}"


def is_submit(call: EntryView) -> bool:
    """A call that submits the run's final output (``submit``, ``finish``, mini-swe-agent's
    ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``): it ends the run, it never "did not complete"."""
    name = call.tool_name.lower().split("__")[-1]
    return name in SUBMIT_TOOLS or bool(SUBMIT_COMMAND.search(command_of(call)))


def interrupted_fact(call: EntryView) -> Fact:
    """An open obligation for a call whose result never came (docs/design.md section 4).

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
    return call_obligation(fact, call)  # "pending since seq N" when declared


def stamp_keys(ops: Sequence[dict[str, Any]], entries: Sequence[EntryView]) -> list[dict[str, Any]]:
    """``ops`` with the command key and the consequential flag set on every model writer's
    fact that cites one tool call and nothing else (the call, its result) and has no key yet.

    What makes the reducer's lifecycles (docs/design.md 5.5) the same for every writer: a model
    writer's fact about a command is superseded by a later run of it like a mechanical one.
    Pins and facts citing no call, or several, are left as they are. Returns new op dicts
    (the given ones are not modified).
    """
    calls = {e.entry_hash: e for e in entries if e.kind == "tool_call"}
    by_id = {e.tool_call_id: e for e in calls.values() if e.tool_call_id}
    result_call = {
        e.entry_hash: by_id[e.tool_call_id]
        for e in entries
        if e.kind == "tool_result" and e.tool_call_id in by_id
    }
    out: list[dict[str, Any]] = []
    for op in ops:
        fact = op.get("fact")
        if (
            not isinstance(fact, dict)
            or fact.get("pin")
            or fact.get("command_key")
            or fact.get("author", "writer") in ("code", "offline")  # they key their own facts
        ):
            out.append(op)
            continue
        support = [s.get("entry", "") for s in fact.get("support") or [] if isinstance(s, dict)]
        cited = {
            call.entry_hash: call
            for h in support
            if (call := calls.get(h) or result_call.get(h)) is not None
        }
        # about the call alone: a fact that also cites a message (a claim, a decision) is not
        # the call's outcome, and a later run must not end it
        alone = all(h in calls or h in result_call for h in support)
        key = fact_key(next(iter(cited.values()))) if len(cited) == 1 and alone else ""
        if not key:
            out.append(op)
            continue
        call = next(iter(cited.values()))
        cmd = command_of(call)
        stamped = {**fact, "command_key": key}
        if not is_routine_read(call) and is_consequential(
            tool_name=call.tool_name, command="" if cmd in EDITOR_COMMANDS else cmd
        ):
            stamped["consequential"] = True
        out.append({**op, "fact": stamped})
    return out
