"""The offline writer: deterministic rules over the journal, no model (DESIGN.md 5.3). Pure.

The embedded default when no model is configured. It reads the covered entries with rules
that go beyond the mechanical fallback:

* **plans and todos** (:func:`~ledger_app.offline.heuristics.plan_items`): every item not yet
  done becomes a P1 ``open_obligation``; an item later marked ``completed`` closes it, citing
  the plan call's successful result. An item that silently disappears, or that the agent
  marks cancelled, stays open (DESIGN.md 5.2: silence does not close an obligation, and only
  an authoritative entry cancels one);
* **test runs** become ``verified_state`` (all passed) or a ``blocker`` (anything failed),
  with the counts and scope parsed by :mod:`ledger_app.offline.testruns`;
* **failed commands** become P1 blockers with their exit code and first error line; runtime
  error events become blockers too;
* **decisions stated by the user** become P1 ``decision`` facts quoting the sentence;
* **assistant success claims** ("All tests pass") are kept at ``reported`` confidence citing
  the checks that ran since the last user message, and are then judged by the same rules as
  a model writer's facts (:func:`ledger_app.offline.rules.check_item`);
* a later run of the same command **supersedes** the fact of the earlier run, so the
  active ledger shows the latest outcome while the earlier failure stays in the history.

Privacy: every piece of journal text a fact quotes (commands, output lines, sentences, plan
items) goes through :func:`ledger_app.mechanical.redact` first (:mod:`journal_app.privacy`),
so no non-pin fact copies a secret verbatim.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from ledger_app.facts import Fact
from ledger_app.mechanical import (
    EntryView,
    clip,
    command_of,
    interrupted_fact,
    is_pin_source,
    is_routine_read,
    outcome_fact,
    redact,
)
from ledger_app.offline.evidence import EvidenceIndex
from ledger_app.offline.heuristics import DONE, assistant_claims, plan_items, user_decisions
from ledger_app.offline.testruns import (
    ANSI,
    RunCounts,
    is_check_command,
    is_test_command,
    run_scope,
)


def _h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _first_line(text: str) -> str:
    for line in ANSI.sub("", text).splitlines():
        if line.strip():
            return line.strip()
    return ""


class OfflineWriter:
    """Deterministic rules, no model (see the module docstring). Labelled offline everywhere."""

    id = "offline"
    label = "offline writer (deterministic rules, no model)"
    prompt_version = None
    calls_models = False

    def propose(self, entries: Sequence[EntryView], state: dict[str, Any]) -> list[dict[str, Any]]:
        """Ops (``add``, ``supersede``, ``close``) for the covered ``entries`` (no pins).

        Args:
            entries: the fold's covered entries in seq order.
            state: the ledger state before the fold (to close and supersede earlier facts).

        Returns:
            The ops, in journal order. Assistant claims are included; :func:`check_item`
            decides which of them stand.
        """
        j = EvidenceIndex(entries)
        facts: dict[str, Fact] = state.get("facts", {})
        ops: list[dict[str, Any]] = []
        # latest active fact per repeated command, and per plan item
        by_command: dict[str, str] = {
            f["command_key"]: fid
            for fid, f in facts.items()
            if f.get("lifecycle") == "active" and f.get("command_key")
        }
        todo_state: dict[str, str] = {
            fid: f["lifecycle"] for fid, f in facts.items() if fid.startswith("todo:")
        }
        checks_since_user: dict[str, EntryView] = {}

        for e in j.entries:
            if e.kind == "message" and e.role == "user" and is_pin_source(e):
                checks_since_user = {}
                for n, sentence in enumerate(user_decisions(e)):
                    ops.append(
                        {
                            "op": "add",
                            "fact": {
                                "id": f"decision:{e.entry_hash[:16]}.{n}",
                                "category": "decision",
                                "priority": "P1",
                                "confidence": "reported",
                                "text": f"User decided: {sentence}",
                                "support": [{"entry": e.entry_hash, "quote": sentence}],
                                "author": "offline",
                            },
                        }
                    )
            elif e.kind == "message" and e.role == "assistant":
                for n, sentence in enumerate(assistant_claims(e)):
                    cited = [r.entry_hash for r in checks_since_user.values()]
                    ops.append(
                        {
                            "op": "add",
                            "fact": {
                                "id": f"claim:{e.entry_hash[:16]}.{n}",
                                "category": "verified_state",
                                "priority": "P2",
                                "confidence": "reported",
                                "text": f"Assistant reported: {sentence}",
                                "support": [{"entry": e.entry_hash, "quote": sentence}]
                                + [{"entry": h} for h in cited],
                                "author": "offline",
                            },
                        }
                    )
            elif e.kind == "event" and not e.derived and _is_error_event(e):
                detail = clip(
                    redact(str(e.content.get("error") or e.content.get("text") or "")), 300
                )
                ops.append(
                    {
                        "op": "add",
                        "fact": {
                            "id": f"event:{e.entry_hash[:16]}",
                            "category": "blocker",
                            "priority": "P1",
                            "confidence": "reported",
                            "text": f"FAILED: the runtime reported an error: {detail}",
                            "support": [{"entry": e.entry_hash}],
                            "author": "offline",
                            "outcome": "failure",
                        },
                    }
                )
            elif e.kind == "tool_call":
                result = j.results.get(e.tool_call_id)
                items = plan_items(e)
                if items is not None and result is not None and not result.is_error:
                    ops += _plan_ops(e, result, items, todo_state)
                    continue
                if result is None:
                    fact = interrupted_fact(e)
                    fact["author"] = "offline"
                    ops.append({"op": "add", "fact": fact})
                    continue
                fact = self._outcome(j, e, result)
                key = fact.get("command_key")
                previous = by_command.get(key) if key else None
                if previous is not None:
                    ops.append({"op": "supersede", "id": previous, "fact": fact})
                else:
                    ops.append({"op": "add", "fact": fact})
                if key:
                    by_command[key] = fact["id"]
                cmd = command_of(e)
                if cmd and is_check_command(cmd):
                    checks_since_user[cmd] = result
        return ops

    def _outcome(self, j: EvidenceIndex, call: EntryView, result: EntryView) -> Fact:
        cmd = command_of(call)
        run = j.test_run(result)
        if run is not None or (cmd and is_test_command(cmd)):
            return _test_fact(call, result, cmd, run)
        fact = outcome_fact(call, result)
        fact["author"] = "offline"
        if result.is_error:
            detail = redact(_error_line(str(result.content.get("output") or result.text)))
            head = fact["text"].split("): ", 1)[0] + ")" if "): " in fact["text"] else ""
            if detail and head and detail not in fact["text"]:
                fact["text"] = f"{head}: {clip(detail, 200)}"
        if cmd:
            fact["command"] = redact(cmd)
            fact["command_key"] = f"{call.tool_name}:{fact['command']}"
        output = result.content.get("output")
        if not result.is_error and not is_routine_read(call) and isinstance(output, str):
            first = clip(redact(_first_line(output)), 160)
            if first:
                fact["text"] += f"; output begins: {first}"
        return fact


_ERROR_LINE = re.compile(
    r"(?i)\berror\b|\bfail|denied|not found|unable to|cannot|exception|traceback|^E: |fatal"
)


def _error_line(output: str) -> str:
    """The line of a failed command's output that says what went wrong (else the last one)."""
    lines = [ln.strip() for ln in ANSI.sub("", output).splitlines() if ln.strip()]
    for line in lines:
        if _ERROR_LINE.search(line):
            return line
    return lines[-1] if lines else ""


def _is_error_event(e: EntryView) -> bool:
    kind = str(e.content.get("type", ""))
    return bool(e.is_error or e.content.get("is_error") or kind in ("error", "run_error"))


def _test_fact(call: EntryView, result: EntryView, cmd: str, run: RunCounts | None) -> Fact:
    scope = run_scope(cmd) if cmd else None
    scope = redact(scope) if scope else scope
    where = f" (scope: {scope})" if scope else " (whole suite)" if cmd else ""
    exit_code = result.content.get("exit_code")
    code = f", exit {exit_code}" if exit_code is not None else ""
    what = f"`{clip(redact(cmd), 160)}`" if cmd else f"`{call.tool_name}`"
    failed = result.is_error or (run is not None and not run.ok)
    counts = run.summary() if run is not None else "no test summary in the output"
    fact: Fact = {
        "id": f"test:{result.entry_hash[:16]}",
        "category": "blocker" if failed else "verified_state",
        "priority": "P1",
        "lifecycle": "active",
        "confidence": "verified",
        "text": ("FAILED: " if failed else "") + f"test run {what}{where}: {counts}{code}",
        "support": [{"entry": call.entry_hash}, {"entry": result.entry_hash}],
        "author": "offline",
        "outcome": "failure" if failed else "success",
        "test": {**(run.to_dict() if run else {}), "scope": scope},
    }
    if cmd:
        fact["command"] = redact(cmd)
        fact["command_key"] = f"{call.tool_name}:{fact['command']}"
    return fact


def _plan_ops(
    call: EntryView, result: EntryView, items: list[tuple[str, str]], todo_state: dict[str, str]
) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for text, status in items:
        fid = f"todo:{_h(text.lower())}"
        known = todo_state.get(fid)
        if known is None:
            ops.append(
                {
                    "op": "add",
                    "fact": {
                        "id": fid,
                        "category": "open_obligation",
                        "priority": "P1",
                        "confidence": "reported",
                        "text": f"Planned ({call.tool_name}): {redact(text)}",
                        "support": [{"entry": call.entry_hash}],
                        "author": "offline",
                        "plan_status": status,
                    },
                }
            )
            todo_state[fid] = "active"
            known = "active"
        if status in DONE and known == "active":
            ops.append(
                {
                    "op": "close",
                    "id": fid,
                    "evidence": [call.entry_hash, result.entry_hash],
                    "reason": f"marked {status} in {call.tool_name}",
                }
            )
            todo_state[fid] = "closed"
    return ops
