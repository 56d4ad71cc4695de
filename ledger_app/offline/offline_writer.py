"""The offline writer: deterministic rules over the journal, no model (docs/design.md 5.3). Pure.

The embedded default when no model is configured. It reads the covered entries with rules
that go beyond the mechanical fallback:

* **plans and todos** (:func:`~ledger_app.offline.heuristics.plan_items`): every item not yet
  done becomes a P1 ``open_obligation``; an item later marked ``completed`` closes it, citing
  the plan call's successful result. An item that silently disappears, or that the agent
  marks cancelled, stays open (docs/design.md 5.2: silence does not close an obligation, and only
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
items) goes through :func:`ledger_app.fact_text.redact` first (:mod:`journal_app.privacy`),
so no non-pin fact copies a secret verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ledger_app.entry_view import EntryView, cite, command_of
from ledger_app.fact_text import clip, redact, shown_command
from ledger_app.facts import Fact
from ledger_app.mechanical import (
    EDITOR_COMMANDS,
    fact_key,
    interrupted_fact,
    mentions,
    outcome_fact,
)
from ledger_app.offline.decisions import AWAIT_KEY
from ledger_app.offline.evidence import EvidenceIndex
from ledger_app.offline.heuristics import (
    DONE,
    assistant_claims,
    plan_items,
    user_decisions,
)
from ledger_app.offline.request_parts import request_part_ids
from ledger_app.offline.testruns import (
    RunCounts,
    is_check_command,
    is_test_command,
    run_scope,
)
from ledger_app.offline.turn_state import (
    END_STATE_KEY,
    FoldReading,
    Turn,
    first_line,
    quoted,
    retirements,
    short_hash,
)
from ledger_app.offline.turns import (
    pins_of,
)
from ledger_app.outcomes import QUOTE_CHARS
from ledger_app.pending import CALL_KEY, late_result_closes
from ledger_app.pin_facts import is_pin_source


class OfflineWriter:
    """Deterministic rules, no model (see the module docstring). Labelled offline everywhere."""

    id = "offline"
    label = "offline writer (deterministic rules, no model)"
    #: Id prefixes of the active facts a fold reads besides :meth:`state_keys` (request
    #: parts still open, approvals not yet used; both end on evidence): the fold service
    #: loads them with the active pins, and the ``part:`` ids of the active request pins
    #: whatever their lifecycle (:func:`ledger_app.offline.request_parts.request_part_ids`)
    state_prefixes = ("part:", "approval:")

    @staticmethod
    def state_pin_ids(pins: dict[str, Fact]) -> set[str]:
        """The ``part:`` ids of the active request pins among ``pins``, whatever their
        lifecycle (:func:`ledger_app.offline.request_parts.request_part_ids`): what the fold service
        loads besides :meth:`state_keys` so a request's close can cite every part."""
        return request_part_ids(pins)

    prompt_version = None
    calls_models = False

    def state_keys(self, entries: Sequence[EntryView]) -> tuple[set[str], set[str]]:
        """What :meth:`propose` may look up in the state for ``entries``: ``(command keys,
        fact ids)``: the keys of the covered calls (repeated commands, plans, the end
        state), the covered results' call obligations, and the covered plan items' ids.
        The fold service loads only those facts (and the active pins), so a fold reads a
        few rows whatever the ledger's size. Keep it in step with the keys
        :meth:`propose` builds (tests/ledger_app/test_fold_scaling.py compares both)."""
        keys, ids = {END_STATE_KEY, AWAIT_KEY}, set()
        for e in entries:
            if e.kind == "tool_call":
                key = fact_key(e)
                if key:
                    keys.add(key)
                keys.add(f"{e.tool_name}:{TEST_OUTPUT}")
                keys.add(f"{e.tool_name}:plan")
                keys.add(f"{e.tool_name}:{PLAN_LIST}")
                ids |= {f"todo:{short_hash(text.lower())}" for text, _ in plan_items(e) or []}
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
        reading = FoldReading.of(j.entries, state)
        turn = Turn(reading=reading)

        for e in j.entries:
            if e.kind == "message" and e.role in ("user", "developer") and is_pin_source(e):
                proposal = turn.said  # the assistant's message this one answers, if any
                ops += turn.end()
                ops += retirements(e, pins)
                if e.role == "developer":
                    continue
                turn = Turn(instruction=e, reading=reading)
                ops += reading.parts.open_request(e)
                ops += reading.approvals.user(e, proposal)
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
                                "support": [quoted(e, sentence)],
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
                                "support": [quoted(e, sentence)]
                                + [cite(r, first_line(r.text)) for r in cited],
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
                            "support": [cite(e, first_line(detail_raw))],
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
                    plan_key = f"{e.tool_name}:{PLAN_LIST}"
                    previous = by_command.get(plan_key)
                    held = facts.get(previous, {}).get("plan_items", []) if previous else []
                    plan_ops, plan = _plan_ops(e, result, items, todo_state, held)
                    ops += plan_ops
                    by_command[plan_key] = plan["id"]
                    facts = {**facts, plan["id"]: plan}
                    continue
                if result is None:
                    fact = interrupted_fact(e)
                    fact["author"] = "offline"
                    ops.append({"op": "add", "fact": fact})
                    continue
                fact = self._outcome(j, e, result)
                # the reducer ends the earlier fact of the same command key (a later run
                # supersedes it; a success closes a failure; docs/design.md 5.5)
                ops.append({"op": "add", "fact": fact})
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
        if fact.get("result") in ("plan_approved", "plan_rejected"):
            # a later approved plan supersedes the rejected one
            fact["command_key"] = f"{call.tool_name}:plan"
        return fact


def _end_state(ops: list[dict[str, Any]], by_command: dict[str, str]) -> list[dict[str, Any]]:
    """The fold's final conclusion supersedes the previous fold's end state (one active)."""
    previous = by_command.get(END_STATE_KEY)
    if previous is None:
        return ops
    return [
        {"op": "supersede", "id": previous, "fact": op["fact"]}
        if op.get("fact", {}).get("command_key") == END_STATE_KEY
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
    # the same test command run again supersedes the earlier run (a pass closes a failure);
    # output read as a test run from a command no runner names ("./ci.sh") has one key per
    # tool: its latest run stands for the earlier ones (docs/design.md 5.5)
    if cmd and is_test_command(cmd):
        fact["command_key"] = f"{call.tool_name}:{fact['command']}"
    else:
        fact["command_key"] = f"{call.tool_name}:{TEST_OUTPUT}"
    return fact


#: ``command_key`` suffix of a test run read from the output of a command no runner names
TEST_OUTPUT = "test-output"


#: ``command_key`` suffix of a plan tool's latest plan (``<tool>:plan-list``)
PLAN_LIST = "plan-list"


def _plan_ops(
    call: EntryView,
    result: EntryView,
    items: list[tuple[str, str]],
    todo_state: dict[str, str],
    held: list[str],
) -> tuple[list[dict[str, Any]], Fact]:
    """Ops for one plan/todo call (docs/design.md 5.5: the latest call is the plan).

    Each item not yet known opens a P1 obligation (``todo:<hash of its text>``); an item the
    plan marks done closes it, citing the call and its result; the plan itself is one fact
    (``<tool>:plan-list`` key, so the next call supersedes it) listing its open items; an item of
    the previous plan (``held``) that this plan no longer holds, or marks cancelled, is
    superseded by it (the agent changed its plan: not a cancellation by the user, not a
    completion). A call with malformed items supersedes nothing (they are counted in the
    plan's text) and closes only what it marks done.

    Returns:
        ``(ops, plan fact)``.
    """
    ops: list[dict[str, Any]] = []
    args = call.content.get("arguments")
    raw = args.get("todos") or args.get("plan") if isinstance(args, dict) else None
    malformed = (len(raw) - len(items)) if isinstance(raw, list) else 0
    plan_id = f"plan:{result.entry_hash[:16]}"
    ids: list[str] = []
    open_ids: list[str] = []
    counts: dict[str, int] = {}
    dropped: list[str] = []
    for text, status in items:
        fid = f"todo:{short_hash(text.lower())}"
        counts[status] = counts.get(status, 0) + 1
        if status in _DROPPED:
            dropped.append(fid)
            continue
        ids.append(fid)
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
                        "support": [quoted(call, text)],
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
                    "reason": f"marked {status} in {call.tool_name} at seq {call.seq}",
                    "seq": result.seq,
                }
            )
            todo_state[fid] = "closed"
        elif status not in DONE:
            open_ids.append(fid)
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    bad = f"; {malformed} malformed item(s) ignored" if malformed else ""
    plan: Fact = {
        "id": plan_id,
        "category": "verified_state",
        "priority": "P2",
        "confidence": "reported",
        "text": (
            f"Plan ({call.tool_name} at seq {call.seq}): {len(items)} item(s)"
            + (f": {summary}" if summary else "")
            + bad
        ),
        "support": [cite(call, call.tool_name), cite(result, first_line(result.text))],
        "author": "offline",
        "command_key": f"{call.tool_name}:{PLAN_LIST}",
        "plan_items": open_ids,
    }
    if malformed:
        plan["malformed"] = malformed
    ops.append({"op": "add", "fact": plan})
    if not malformed:
        for fid in [*(h for h in held if h not in ids), *dropped]:
            # an item of the previous plan is active unless this fold ended it: that plan
            # listed its open items, and no plan came between
            if todo_state.get(fid, "active" if fid in held else None) == "active":
                ops.append(
                    {
                        "op": "supersede",
                        "id": fid,
                        "by": plan_id,
                        "reason": f"not an open item of the latest plan (seq {call.seq})",
                    }
                )
                todo_state[fid] = "superseded"
    return ops, plan


#: plan statuses that take an item out of the plan (said by the agent: not a user's cancel)
_DROPPED = {"cancelled", "canceled", "removed", "skipped", "obsolete"}
