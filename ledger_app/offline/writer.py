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
    fact_key,
    interrupted_fact,
    is_pin_source,
    is_routine_read,
    mentions,
    outcome_fact,
    redact,
    shown_command,
)
from ledger_app.offline.decisions import AWAIT_KEY, Approvals
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
    PartProgress,
    RequestParts,
    cancellations,
    cancelled_pin,
    conclusion,
    instruction_parts,
    numbered_items,
    part_kind,
    pin_kinds,
    pins_of,
    request_part_ids,
)
from ledger_app.outcomes import QUOTE_CHARS
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


@dataclass
class _Reading:
    """What spans the turns of one fold: the request parts still open, the approvals, and
    the ops the turns' results produced (flushed at each turn's end)."""

    parts: RequestParts
    approvals: Approvals
    #: the kind of each pin of the fold (:func:`pin_kinds`)
    kinds: dict[str, str] = field(default_factory=dict)
    ops: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, entries: Sequence[EntryView], state: dict[str, Any]) -> _Reading:
        kinds = pin_kinds(entries, state) if entries else {}
        parts = RequestParts(state, lambda m: kinds.get(f"pin:{m.entry_hash[:16]}", "governing"))
        requests = {pin for pin, kind in kinds.items() if kind == "request"}
        return cls(parts, Approvals(state, request_pins=requests), kinds)

    def pin_kind(self, message: EntryView) -> str:
        """The kind of ``message``'s pin (``"governing"`` when it has none)."""
        return self.kinds.get(f"pin:{message.entry_hash[:16]}", "governing")

    def flush(self) -> list[dict[str, Any]]:
        ops, self.ops = self.ops, []
        return ops


@dataclass
class _Turn:
    """One user turn as the writer reads it: the instruction, its parts and the evidence
    that carries each out, and the assistant's closing message (DESIGN.md 5.5).

    A request closes only when each part has completion evidence (:class:`PartProgress`:
    an edit of a named file does not carry out "add a regression test"; a test file
    written and a passing run do). Then the turn adds its ``done:`` fact and, when the pin
    is a request, a ``close`` of the pin citing the results (``seq``: the last one). The
    items of a numbered list are obligations of their own (:class:`RequestParts`)."""

    instruction: EntryView | None = None
    reading: _Reading = field(default_factory=lambda: _Reading.of([], {}))
    last_said: EntryView | None = None
    done: tuple[EntryView, EntryView, Fact] | None = None
    parts: list[PartProgress] = field(default_factory=list)
    #: the instruction is a numbered list: its parts are :class:`RequestParts` obligations
    listed: bool = False
    ended: bool = False
    #: the turn's latest successful change, and latest check with whether it passed
    last_change: EntryView | None = None
    last_check: tuple[EntryView, bool] | None = None

    def __post_init__(self) -> None:
        if self.instruction is not None:
            self.listed = numbered_items(self.instruction.text) is not None
            if not self.listed:
                self.parts = [
                    PartProgress(p, part_kind(p)) for p in instruction_parts(self.instruction.text)
                ]

    @property
    def said(self) -> EntryView | None:
        """The assistant's latest message of the turn (``None`` once a call followed it)."""
        return self.last_said

    @said.setter
    def said(self, message: EntryView | None) -> None:
        # an assistant message may name the request part the latest results carried out
        if message is not None and message is not self.last_said:
            self.reading.ops += self.reading.parts.said(message)
        self.last_said = message

    def record(self, call: EntryView, result: EntryView, fact: Fact) -> None:
        ok = fact.get("outcome") != "failure"
        if (ok and fact.get("result") not in ("success", "submitted", None)) or is_routine_read(
            call
        ):
            return  # reads find, rejections and plans are read elsewhere: they carry nothing out
        check = "test" in fact or is_check_command(command_of(call))
        if fact.get("result") == "submitted":
            self._submitted(call, result, fact)
            return
        if check:
            self.last_check = (result, ok)
        elif ok:
            self.last_change = result
        self.reading.ops += self.reading.parts.see(call, result, ok=ok, check=check)
        if ok and not check:
            self.reading.ops += self.reading.approvals.result(call, result, fact)
        if self.instruction is None or self.listed or self.ended:
            return
        for part in self.parts:
            part.see(call, result, ok=ok, check=check)
        if not self.parts or not all(p.done for p in self.parts):
            self.done = None
        elif self.done is None:
            self.done = (call, result, fact)

    def _submitted(self, call: EntryView, result: EntryView, fact: Fact) -> None:
        """A run that submits its output (SWE-agent ``submit``) after a change and a passing
        check has carried out its request: the change, the check and the submission are
        the evidence of every part still open. Without both, a submission proves nothing."""
        if self.instruction is None or self.listed or self.ended:
            return
        check = self.last_check
        if self.last_change is None or check is None or not check[1]:
            return
        for part in self.parts:
            if not part.done:
                part.evidence = [self.last_change, check[0], result]
        if self.parts and all(p.done for p in self.parts) and self.done is None:
            self.done = (call, result, fact)

    def end(self, final: bool = False) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        if self.said is not None:
            ops.append({"op": "add", "fact": _conclusion_fact(self.said, final)})
        if final:
            ops += self.reading.approvals.end(self.said)
        ops += self.reading.flush()
        if self.instruction is not None and self.done is not None and not self.ended:
            ops.append({"op": "add", "fact": _completion_fact(self.instruction, *self.done)})
            pin = f"pin:{self.instruction.entry_hash[:16]}"
            closed = self.reading.approvals.closed_pins
            if self.reading.pin_kind(self.instruction) == "request" and pin not in closed:
                closed.add(pin)
                ops.append(_close_request(self.instruction, self.parts))
            self.ended = True
        self.said, self.done = None, None
        return ops


def _close_request(instruction: EntryView, parts: list[PartProgress]) -> dict[str, Any]:
    """The ``close`` of a request's pin: evidence the results that carried its parts out,
    ``seq`` the last of them (DESIGN.md 5.2, 5.5)."""
    shown = sorted(
        {v.entry_hash: v for p in parts for v in p.evidence or []}.values(), key=lambda v: v.seq
    )
    return {
        "op": "close",
        "id": f"pin:{instruction.entry_hash[:16]}",
        "evidence": [v.entry_hash for v in shown],
        "reason": f"every part of the request ({len(parts)}) carried out; the last at seq "
        f"{shown[-1].seq}",
        "seq": shown[-1].seq,
    }


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
    #: Id prefixes of the active facts a fold reads besides :meth:`state_keys` (request
    #: parts still open, approvals not yet used; both end on evidence): the fold service
    #: loads them with the active pins, and the ``part:`` ids of the active request pins
    #: whatever their lifecycle (:func:`ledger_app.offline.turns.request_part_ids`)
    state_prefixes = ("part:", "approval:")

    @staticmethod
    def state_pin_ids(pins: dict[str, Fact]) -> set[str]:
        """The ``part:`` ids of the active request pins among ``pins``, whatever their
        lifecycle (:func:`ledger_app.offline.turns.request_part_ids`): what the fold service
        loads besides :meth:`state_keys` so a request's close can cite every part."""
        return request_part_ids(pins)

    prompt_version = None
    calls_models = False

    def state_keys(self, entries: Sequence[EntryView]) -> tuple[set[str], set[str]]:
        """What :meth:`propose` may look up in the state for ``entries``: ``(command keys,
        fact ids)``: the keys of the covered calls (repeated commands, plans, the end
        state), the covered results' call obligations, and the covered plan items' ids.
        The fold service loads only those facts (and the active pins), so a fold reads a
        few rows whatever the ledger's size (issue 18). Keep it in step with the keys
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
        reading = _Reading.of(j.entries, state)
        turn = _Turn(reading=reading)

        for e in j.entries:
            if e.kind == "message" and e.role in ("user", "developer") and is_pin_source(e):
                proposal = turn.said  # the assistant's message this one answers, if any
                ops += turn.end()
                ops += _retirements(e, pins)
                if e.role == "developer":
                    continue
                turn = _Turn(instruction=e, reading=reading)
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
                # supersedes it; a success closes a failure; DESIGN.md 5.5)
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
            # a later approved plan supersedes the rejected one (issue 15, item 5)
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
    # tool: its latest run stands for the earlier ones (DESIGN.md 5.5)
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
    """Ops for one plan/todo call (DESIGN.md 5.5: the latest call is the plan).

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
        fid = f"todo:{_h(text.lower())}"
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
        "support": [cite(call, call.tool_name), cite(result, _first_exact(result.text))],
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
