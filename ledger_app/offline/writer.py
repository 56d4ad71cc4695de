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
from dataclasses import dataclass, field
from typing import Any

from journal_app.privacy import filter_text
from ledger_app.facts import Fact
from ledger_app.mechanical import (
    EDITOR_COMMANDS,
    EntryView,
    cite,
    clip,
    command_of,
    interrupted_fact,
    is_pin_source,
    is_routine_read,
    mentions,
    outcome_fact,
    redact,
    shown_command,
)
from ledger_app.offline.evidence import EvidenceIndex
from ledger_app.offline.heuristics import (
    DONE,
    assistant_claims,
    plan_items,
    sentences,
    user_decisions,
)
from ledger_app.offline.testruns import (
    RunCounts,
    is_check_command,
    is_test_command,
    run_scope,
)
from ledger_app.offline.turns import (
    cancellations,
    cancelled_pin,
    completes,
    conclusion,
    instruction_parts,
    pins_of,
)
from ledger_app.outcomes import QUOTE_CHARS, path_of
from ledger_app.pending import CALL_KEY, late_result_closes


def _h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _first_exact(text: str) -> str:
    """The first non-empty line of ``text``, stripped: exact text for a support quote."""
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:QUOTE_CHARS]


def _quoted(view: EntryView, quote: str) -> dict[str, Any]:
    """A support item for ``quote`` in ``view``: byte range and chunks when the quote is exact
    text of the entry, else the quote alone (a normalised sentence)."""
    item = cite(view, quote)
    if "quote" not in item and "range" not in item and quote and not filter_text(quote).filtered:
        item["quote"] = quote
    return item


#: A step that asks for a check: a passing test run, lint, type check or build carries it out
_CHECK_STEP = re.compile(
    r"\b(?:tests?|test suite|unit tests?|lint|linters?|type ?checks?|typecheck|checks?|build)\b",
    re.I,
)


@dataclass
class _Turn:
    """One user turn as the writer reads it: the instruction, the last successful result
    that names it (completion evidence), and the assistant's closing message."""

    instruction: EntryView | None = None
    said: EntryView | None = None
    done: tuple[EntryView, EntryView, Fact] | None = None
    #: the instruction's steps (:func:`instruction_parts`) and those a result carried out
    parts: list[str] = field(default_factory=list)
    carried: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.instruction is not None:
            self.parts = instruction_parts(self.instruction.text)

    def record(self, call: EntryView, result: EntryView, fact: Fact) -> None:
        if self.instruction is None:
            return
        if fact.get("outcome") == "failure":
            # a failure after the evidence: not shown to be carried out
            self.done, self.carried = None, set()
            return
        if fact.get("result") not in ("success", None) or is_routine_read(call):
            return  # reads find: they carry nothing out
        checks = "test" in fact or is_check_command(command_of(call))
        # every step needs its own evidence: "drop X, then deploy Y" is not done by the drop;
        # a passing test run or check carries out only a step that asks for one ("run the
        # unit tests, then deploy"), never another step
        for i, part in enumerate(self.parts):
            if i in self.carried:
                continue
            if _CHECK_STEP.search(part) if checks else completes(part, call.text, result.text):
                self.carried.add(i)
        if self.parts and len(self.carried) == len(self.parts):
            self.done = (call, result, fact)

    def end(self, final: bool = False) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        if self.said is not None:
            ops.append({"op": "add", "fact": _conclusion_fact(self.said, final)})
        if self.instruction is not None and self.done is not None:
            ops.append({"op": "add", "fact": _completion_fact(self.instruction, *self.done)})
        self.said, self.done = None, None
        return ops


#: ``command_key`` of the fact holding the latest end-of-fold conclusion (one active at a time)
END_STATE_KEY = "assistant:end-state"


def _conclusion_fact(said: EntryView, final: bool) -> Fact:
    """The assistant's closing message of a turn, kept at ``reported`` (issue 15, item 4)."""
    excerpt, quote, awaits = conclusion(said.text)
    waits = " It awaits the user's reply." if awaits else ""
    fact: Fact = {
        "id": f"said:{said.entry_hash[:16]}",
        "category": "history",
        "priority": "P1" if final else "P2",
        "confidence": "reported",
        "text": f"Assistant concluded (seq {said.seq}): {redact(excerpt)}{waits}",
        "support": [_quoted(said, quote)],
        "author": "offline",
        "awaits_user": awaits,
    }
    if final:
        fact["command_key"] = END_STATE_KEY
    return fact


def _completion_fact(
    instruction: EntryView, call: EntryView, result: EntryView, tool: Fact
) -> Fact:
    """An instruction carried out, with its evidence (issue 15, item 4).

    Fields for the context's task state: ``completes`` (the pin id), ``evidence_entry``
    (hex hash of the result that shows it) and ``evidence_seq``.
    """
    return {
        "id": f"done:{instruction.entry_hash[:16]}",
        "category": "verified_state",
        "priority": "P1",
        "confidence": "inferred",
        "text": (
            f"The instruction at seq {instruction.seq} was carried out at seq {result.seq} "
            f"(evidence sha256:{result.entry_hash}): {tool['text']}"
        ),
        "support": [_quoted(instruction, _first_exact(instruction.text)), *tool["support"]],
        "author": "offline",
        "completes": f"pin:{instruction.entry_hash[:16]}",
        "evidence_entry": result.entry_hash,
        "evidence_seq": result.seq,
    }


def _retirements(message: EntryView, pins: dict[str, Fact]) -> list[dict[str, Any]]:
    """``retire`` ops for the earlier pins an authoritative message cancels (issue 15, item 7).

    The reducer holds each as a pending retirement for the review queue (DESIGN.md 5.2).
    """
    ops: list[dict[str, Any]] = []
    for sentence in cancellations(sentences(message.text)):
        target = cancelled_pin(sentence, pins)
        if target is None:
            continue
        ops.append(
            {
                "op": "retire",
                "id": target,
                "evidence": [message.entry_hash],
                "reason": f"a later {message.role} message (seq {message.seq}) cancels it: "
                f"{clip(redact(sentence), 200)}",
            }
        )
        pins = {k: v for k, v in pins.items() if k != target}
    return ops


class OfflineWriter:
    """Deterministic rules, no model (see the module docstring). Labelled offline everywhere."""

    id = "offline"
    label = "offline writer (deterministic rules, no model)"
    prompt_version = None
    calls_models = False

    def state_keys(self, entries: Sequence[EntryView]) -> tuple[set[str], set[str]]:
        """What :meth:`propose` may look up in the state for ``entries``: ``(command keys,
        fact ids)``: the keys of the covered calls (repeated commands, plans, the end
        state), the covered results' call obligations, and the covered plan items' ids.
        The fold service loads only those facts (and the active pins), so a fold reads a
        few rows whatever the ledger's size (issue 18). Keep it in step with the keys
        :meth:`propose` builds (tests/ledger_app/test_fold_scaling.py compares both)."""
        keys, ids = {END_STATE_KEY}, set()
        for e in entries:
            if e.kind == "tool_call":
                cmd = command_of(e)
                if cmd:
                    keys.add(f"{e.tool_name}:{redact(cmd)}")
                keys.add(f"{e.tool_name}:plan")
                path = _edit_path(e)
                if path:
                    keys.add(f"edit:{redact(path)}")
                ids |= {f"todo:{_h(text.lower())}" for text, _ in plan_items(e) or []}
            elif e.kind == "tool_result":
                keys.add(CALL_KEY + e.tool_call_id)
        return keys, ids

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
        pins = pins_of(state)
        turn = _Turn()

        for e in j.entries:
            if e.kind == "message" and e.role in ("user", "developer") and is_pin_source(e):
                ops += turn.end()
                ops += _retirements(e, pins)
                if e.role == "developer":
                    continue
                turn = _Turn(instruction=e)
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
                                "support": [_quoted(e, sentence)],
                                "author": "offline",
                            },
                        }
                    )
            elif e.kind == "message" and e.role == "assistant":
                if e.text.strip() and not e.derived:
                    turn.said = e
                for n, sentence in enumerate(assistant_claims(e)):
                    cited = list(checks_since_user.values())
                    ops.append(
                        {
                            "op": "add",
                            "fact": {
                                "id": f"claim:{e.entry_hash[:16]}.{n}",
                                "category": "verified_state",
                                "priority": "P2",
                                "confidence": "reported",
                                "text": f"Assistant reported: {sentence}",
                                "support": [_quoted(e, sentence)]
                                + [cite(r, _first_exact(r.text)) for r in cited],
                                "author": "offline",
                            },
                        }
                    )
            elif e.kind == "event" and not e.derived and _is_error_event(e):
                detail_raw = str(e.content.get("error") or e.content.get("text") or "")
                detail = clip(redact(detail_raw), 300)
                ops.append(
                    {
                        "op": "add",
                        "fact": {
                            "id": f"event:{e.entry_hash[:16]}",
                            "category": "blocker",
                            "priority": "P1",
                            "confidence": "reported",
                            "text": f"FAILED: the runtime reported an error: {detail}",
                            "support": [cite(e, _first_exact(detail_raw))],
                            "author": "offline",
                            "outcome": "failure",
                        },
                    }
                )
            elif e.kind == "tool_call":
                # the turn went on: a message before a call narrates it, it concludes nothing
                turn.said = None
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
                fixed = _edit_key(fact) if fact.get("result") == "success" else None
                # an applied edit of a file supersedes the rejected edit of it (issue 15)
                previous = by_command.get(key) if key else by_command.pop(fixed or "", None)
                if previous is not None:
                    ops.append({"op": "supersede", "id": previous, "fact": fact})
                else:
                    ops.append({"op": "add", "fact": fact})
                if key:
                    by_command[key] = fact["id"]
                cmd = command_of(e)
                if cmd and is_check_command(cmd):
                    checks_since_user[cmd] = result
                turn.record(e, result, fact)
        ops += _end_state(turn.end(final=True), by_command)
        return ops + late_result_closes(j.entries, state)

    def _outcome(self, j: EvidenceIndex, call: EntryView, result: EntryView) -> Fact:
        cmd = command_of(call)
        if cmd in EDITOR_COMMANDS:
            cmd = ""  # a file editor's sub-command (str_replace), not a shell command
        run = j.test_run(result)
        if run is not None or (cmd and is_test_command(cmd)):
            return _test_fact(call, result, cmd, run)
        fact = outcome_fact(call, result)
        fact["author"] = "offline"
        if cmd:
            fact["command"] = redact(cmd)
            fact["command_key"] = f"{call.tool_name}:{fact['command']}"
        elif fact.get("result") == "rejected" and _edit_key(fact):
            fact["command_key"] = _edit_key(fact)
        elif fact.get("result") in ("plan_approved", "plan_rejected"):
            # a later approved plan supersedes the rejected one (issue 15, item 5)
            fact["command_key"] = f"{call.tool_name}:plan"
        return fact


def _edit_path(call: EntryView) -> str:
    args = call.content.get("arguments")
    return path_of(args) if isinstance(args, dict) else ""


def _edit_key(fact: Fact) -> str | None:
    """``edit:<path>``: the key a rejected edit of a file is found by (no shell command)."""
    return f"edit:{fact['path']}" if fact.get("path") and not fact.get("command") else None


def _end_state(ops: list[dict[str, Any]], by_command: dict[str, str]) -> list[dict[str, Any]]:
    """The fold's final conclusion supersedes the previous fold's end state (one active)."""
    previous = by_command.get(END_STATE_KEY)
    if previous is None:
        return ops
    return [
        {"op": "supersede", "id": previous, "fact": op["fact"]}
        if op["fact"].get("command_key") == END_STATE_KEY
        else op
        for op in ops
    ]


def _is_error_event(e: EntryView) -> bool:
    kind = str(e.content.get("type", ""))
    return bool(e.is_error or e.content.get("is_error") or kind in ("error", "run_error"))


_SUMMARY = re.compile(r"(?i)\b(?:passed|failed|ran \d+ tests?|tests?:|ok\b|errors?)\b")


def _summary_line(result: EntryView) -> str:
    """The last line of a test run's output that states counts (exact text, for the quote)."""
    lines = [ln.strip() for ln in result.text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if _SUMMARY.search(line) and "\x1b" not in line:
            return line[:QUOTE_CHARS]
    return lines[-1][:QUOTE_CHARS] if lines and "\x1b" not in lines[-1] else ""


def _test_fact(call: EntryView, result: EntryView, cmd: str, run: RunCounts | None) -> Fact:
    scope = run_scope(cmd) if cmd else None
    scope = redact(scope) if scope else scope
    where = f" (scope: {scope})" if scope else " (whole suite)" if cmd else ""
    exit_code = result.content.get("exit_code")
    code = f", exit {exit_code}" if exit_code is not None else ""
    what = f"`{shown_command(cmd)}`" if cmd else f"`{call.tool_name}`"
    failed = result.is_error or (run is not None and not run.ok)
    counts = run.summary() if run is not None else "no test summary in the output"
    text = ("FAILED: " if failed else "") + f"test run {what}{where}: {counts}{code}"
    fact: Fact = {
        "id": f"test:{result.entry_hash[:16]}",
        "category": "blocker" if failed else "verified_state",
        "priority": "P1",
        "lifecycle": "active",
        "confidence": "verified",
        "text": text + mentions(text, call, result),
        "support": [
            cite(call, cmd.splitlines()[0][:QUOTE_CHARS] if cmd else ""),
            cite(result, _summary_line(result)),
        ],
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
                        "support": [_quoted(call, text)],
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
