"""Active task state: what is still open in a session (docs/design.md sections 4 and 6, case 05).

Pure module: no Django, no database. Reads the journal's entries (and the ledger's open
obligations) for the current user goal, calls that did not complete, results that report an
interruption, pending approvals and the latest plan/todo list, and renders the task state
message the context ends with.

Issue 15, item 4 (task state that tells the truth): a call the runtime declared pending
(``metadata.pending``, :mod:`ledger_app.pending`) is "pending since seq N", never "did not
complete", and once its result is in the journal nothing calls it pending; an instruction the
ledger records as carried out (:func:`instructions_done`) is listed as done with its evidence,
so an agent does not carry out a completed (possibly destructive) instruction again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from journal_app.harness import harness_kind
from ledger_app.context.entry_text import args_text, short
from ledger_app.entry_view import EntryView, metadata_only
from ledger_app.fact_text import clip
from ledger_app.mechanical import is_submit
from ledger_app.offline import plan_items
from ledger_app.pending import is_pending
from ledger_app.validation import TASK_STATE_MARK

#: Characters of a call's arguments quoted in the task state.
ARGS_CHARS = 300
#: Interruption results listed in the task state (the latest ones).
MAX_INTERRUPTIONS = 10
#: Words one of which a tool name holds for its call to be a plan/todo list (:func:`task_list`;
#: a superset: the service reads in full every call of the folded prefix so named,
#: docs/design.md 6, "The folded prefix")
TASK_LIST_WORDS = ("todo", "plan", "task", "track")
#: How the task state names a call the runtime declared pending.
PENDING = (
    "is pending since seq {seq} (declared pending by the runtime): its result has not arrived "
    "yet; wait for it, do not call it again"
)


def _injected(e: EntryView) -> bool:
    return bool(isinstance(e.meta, dict) and e.meta.get("injected"))


def current_goal(entries: Sequence[EntryView]) -> EntryView | None:
    """The latest user message that is neither derived, injected nor a harness record
    (:func:`journal_app.harness.harness_kind`: a caveat or an interrupt marker is not what
    the user asked for), with text (the goal)."""
    for e in reversed(entries):
        if (
            e.kind == "message"
            and e.role == "user"
            and not e.derived
            and not _injected(e)
            and e.text.strip()
            and not harness_kind(kind=e.kind, role=e.role, text=e.text, meta=e.meta)
        ):
            return e
    return None


_APPROVAL_REQUEST = re.compile(r"approval.*(request|required|pending)|(request|await).*approval")
_APPROVAL_DONE = re.compile(
    r"approval.*(response|decision|granted|denied|approved|rejected|resolved)|"
    r"(approved|denied|rejected)"
)


def _approval_key(content: Mapping[str, Any]) -> str:
    for key in ("call_id", "approval_id", "id", "tool_call_id", "request_id"):
        value = content.get(key)
        if isinstance(value, str | int) and str(value):
            return str(value)
    return ""


def pending_approvals(entries: Sequence[EntryView]) -> list[tuple[str, EntryView]]:
    """``[(approval id, event)]`` of approval requests with no later decision.

    A runtime ``event`` whose ``type`` names an approval request (``exec_approval_request``,
    ``approval_required``...) is pending until a later event of an approval decision type
    with the same id (``call_id``/``approval_id``/``id``), or a result of that call, arrives.
    """
    pending: dict[str, EntryView] = {}
    results = set()
    for e in entries:
        if e.kind == "tool_result":
            results.add(e.tool_call_id)
            pending.pop(e.tool_call_id, None)
        if e.kind != "event" or metadata_only(e):
            continue  # (the service reads every event of the folded prefix in full)
        kind = str(e.content.get("type", "")).lower()
        key = _approval_key(e.content) or f"seq-{e.seq}"
        if _APPROVAL_REQUEST.search(kind):
            if key not in results:
                pending[key] = e
        elif "approv" in kind and _APPROVAL_DONE.search(kind):
            pending.pop(key, None)
    return sorted(pending.items(), key=lambda kv: kv[1].seq)


_INTERRUPTED_STATUS = {
    "interrupted",
    "killed",
    "timeout",
    "timed_out",
    "cancelled",
    "canceled",
    "aborted",
}
_INTERRUPTED_EXIT = {124: "timed out", 130: "SIGINT", 137: "SIGKILL", 143: "SIGTERM"}
_INTERRUPTED_TEXT = re.compile(
    r"^\s*(?:\[?request interrupted by user|the user doesn't want to proceed with this tool use|"
    r"(?:error:\s*)?(?:command |process )?(?:timed out|was interrupted|interrupted|was killed|killed|aborted)\b)",
    re.IGNORECASE,
)


def interruption_of(result: EntryView) -> str:
    """What a tool result says about the call being interrupted, or ``""`` (case 05).

    A JSON output with ``status`` interrupted/killed/timeout/aborted or a ``signal``; an
    exit code of a signal (130, 137, 143) or of ``timeout`` (124); an output that opens with
    "interrupted", "timed out", "killed" or a user's refusal of the call.
    """
    parts: list[str] = []
    output = result.text
    value: Any = None
    if output.lstrip().startswith("{"):
        try:
            value = json.loads(output)
        except ValueError:
            value = None
    if isinstance(value, dict):
        status = str(value.get("status", "")).lower()
        signal = value.get("signal")
        if status in _INTERRUPTED_STATUS or signal:
            parts.append(f"status {status or 'unknown'}")
            if signal:
                parts.append(f"signal {signal}")
            if "exit_code" in value:
                parts.append(f"exit code {json.dumps(value.get('exit_code'))}")
    code = result.content.get("exit_code")
    if not parts and isinstance(code, int) and code in _INTERRUPTED_EXIT:
        parts.append(f"exit code {code} ({_INTERRUPTED_EXIT[code]})")
    if not parts and _INTERRUPTED_TEXT.match(output):
        parts.append("the output reports an interruption")
    return ", ".join(parts)


def task_list(call: EntryView) -> list[tuple[str, str]] | None:
    """``[(text, status)]`` of a plan/todo tool call (TodoWrite, update_plan, OpenHands'
    task_tracker ...), or ``None`` when the call is not one."""
    items = plan_items(call)
    if items is not None:
        return items
    # OpenHands task_tracker: {"command": "plan", "tasks": [{"title", "status"}]}
    args = call.content.get("arguments")
    name = call.tool_name.lower()
    if not isinstance(args, dict) or not isinstance(args.get("tasks"), list):
        return None
    if not any(w in name for w in TASK_LIST_WORDS):
        return None
    out = []
    for item in args["tasks"]:
        if isinstance(item, dict):
            text = item.get("title") or item.get("content") or item.get("description")
            if isinstance(text, str) and text.strip():
                out.append((" ".join(text.split()), str(item.get("status", "todo")).lower()))
    return out


def _interruptions(entries: Sequence[EntryView], redact: Callable[[str], str]) -> list[str]:
    """A line per tool result reporting an interruption, unless retried with the same args.

    Results of the folded prefix read as metadata only (:func:`metadata_only`) are not read
    (reading every result of a long session was most of a build; docs/design.md 6, "The
    folded prefix"): the fold's fact of each is what the request carries of it (a killed or
    timed-out run's exit code, or its error flag, makes it a failed call's fact). A retry is
    looked for among the calls read whole (every call after the prefix)."""
    out = []
    later_calls: dict[tuple[str, str], int] = {}
    calls_by_id = {e.tool_call_id: e for e in entries if e.kind == "tool_call"}
    for e in entries:
        if e.kind == "tool_call" and not metadata_only(e):
            later_calls[(e.tool_name, args_text(e))] = e.seq
    for e in entries:
        if e.kind != "tool_result" or metadata_only(e):
            continue
        how = interruption_of(e)
        if not how:
            continue
        call = calls_by_id.get(e.tool_call_id)
        if call is not None and later_calls.get((call.tool_name, args_text(call)), 0) > call.seq:
            continue  # retried later with the same arguments
        what = f"`{call.tool_name}` {redact(clip(args_text(call), 160))}" if call else "a call"
        out.append(
            f"- interrupted: {what} (call {e.tool_call_id}, seq {e.seq}) did not complete "
            f"({how}); its output: {redact(clip(e.text, ARGS_CHARS))}"
        )
    return out


def instructions_done(
    facts: Iterable[Mapping[str, Any]], pins: Mapping[str, Mapping[str, Any]]
) -> dict[str, tuple[Mapping[str, Any], list[str]]]:
    """Instructions (pins) the ledger records as carried out, with the evidence (a completed
    instruction must not look pending).

    A record of completion is either a closed ``open_obligation`` whose support cites the
    pin's entry (not a ``part:`` obligation: one item of a list is not the instruction) (its ``ended_by.evidence``: the tool results the reducer accepted as
    completion, docs/design.md 5.2), or a fact naming the pin in ``completes`` (the pin's id or
    entry hex) with verified confidence (its support other than the pin is the evidence).

    Args:
        facts: every fact of the ledger, any lifecycle.
        pins: entry hex -> pin fact (:attr:`Checkpoint.pins`).

    Returns:
        ``{pin entry hex: (the fact recording completion, [evidence entry hex, ...])}``; the
        first record of each pin wins.
    """
    by_id = {str(p.get("id")): h for h, p in pins.items()}
    out: dict[str, tuple[Mapping[str, Any], list[str]]] = {}
    for f in facts:
        cited = [str(s.get("entry", "")) for s in f.get("support", []) if isinstance(s, dict)]
        target = f.get("completes")
        if isinstance(target, str) and target:
            pin = by_id.get(target) or (target if target in pins else None)
            if pin is None or pin in out or f.get("confidence") != "verified":
                continue
            evidence = [h for h in cited if h != pin]
            if evidence and f.get("lifecycle", "active") in ("active", "closed"):
                out[pin] = (f, evidence)
            continue
        if f.get("category") != "open_obligation" or f.get("lifecycle") != "closed":
            continue
        if str(f.get("id", "")).startswith("part:"):
            continue  # one item of the user's list is done, not the instruction (docs/design.md 5.5)
        ended = f.get("ended_by")
        evidence = (
            [str(h) for h in (ended.get("evidence") or [])] if isinstance(ended, dict) else []
        )
        if not evidence:
            continue
        for h in cited:
            if h in pins and h not in out:
                out[h] = (f, evidence)
    return out


def _done_lines(
    done: Mapping[str, tuple[Mapping[str, Any], list[str]]],
    by_hash: Mapping[str, EntryView],
) -> list[str]:
    rows = []
    for pin, (fact, evidence) in done.items():
        instruction = by_hash.get(pin)
        if instruction is None:
            continue  # the pin's entry is past the revision
        proof = [by_hash[h] for h in evidence if h in by_hash]
        proof.sort(key=lambda e: (e.kind != "tool_result", e.seq))
        if not proof:
            continue
        first = proof[0]
        rows.append(
            (
                instruction.seq,
                f"- done: the instruction at seq {instruction.seq} (entry {short(pin)}) was "
                f"carried out at seq {first.seq}, evidence {short(first.entry_hash)} "
                f"(ledger fact {fact.get('id')}); do not carry it out again",
            )
        )
    return [line for _, line in sorted(rows)]


def task_state_text(
    *,
    entries: Sequence[EntryView],
    interrupted: Sequence[tuple[str, EntryView, bool]],
    unfinished_results: Sequence[EntryView],
    approvals: Sequence[tuple[str, EntryView]],
    obligations: Sequence[Mapping[str, Any]],
    goal: EntryView | None,
    redact: Callable[[str], str],
    fact_line: Callable[[Mapping[str, Any]], str],
    done: Mapping[str, tuple[Mapping[str, Any], list[str]]] | None = None,
    by_hash: Mapping[str, EntryView] | None = None,
    end_status: str = "",
) -> str:
    """The task state message, or ``""`` when nothing is open (docs/design.md 4 and 6, step 1).

    Args:
        entries: the journal's entries as of the revision, in seq order.
        interrupted: ``[(call id, call, at tail)]`` of calls with no result; ``at tail``
            when the call is in the unfinished round the run stopped in.
        unfinished_results: results already returned inside that unfinished round.
        approvals: :func:`pending_approvals` of ``entries``.
        obligations: the ledger's active open obligations (fact dicts, not pins).
        goal: :func:`current_goal` of ``entries``.
        redact: removes secret values from quoted arguments and outputs.
        fact_line: renders one fact with its support hashes.
        done: :func:`instructions_done` of the ledger: each becomes a "done: the instruction
            at seq N ... was carried out at seq M, evidence sha256:..." line.
        by_hash: entry hex -> entry of ``entries`` (built when not given).
        end_status: the source's own end status of the run (``exit_status submitted``);
            stated as the run's end (docs/design.md 6, end states), ``""`` for none.

    Returns:
        The text, opening with ``[task state`` (``TASK_STATE_MARK``), one line per item.
    """
    lines: list[str] = []
    for cid, call, at_tail in interrupted:
        if is_submit(call):
            # a submit call ends the run: its final output was delivered (docs/design.md 6, end
            # states), never "did not complete"
            head = (
                f"submitted {cid}: `{call.tool_name}` ended the run by submitting its final "
                "output; it is the run's end, not pending and not failed"
            )
        elif is_pending(call):
            head = f"pending call {cid}: `{call.tool_name}` {PENDING.format(seq=call.seq)}"
        elif at_tail:
            head = (
                f"interrupted call {cid}: `{call.tool_name}` was called and has no result yet: "
                "the run stopped before it completed"
            )
        else:
            head = (
                f"interrupted call {cid}: `{call.tool_name}` was called and did not complete "
                "(no result in the journal)"
            )
        lines.append(
            f"- {head}; seq {call.seq}, entry {short(call.entry_hash)}; arguments: "
            f"{redact(clip(args_text(call), ARGS_CHARS))}"
        )
    for res in unfinished_results:
        lines.append(
            f"- call {res.tool_call_id} of that unfinished round returned (seq {res.seq}, entry "
            f"{short(res.entry_hash)}); its result is left out with the round"
        )
    interruptions = _interruptions(entries, redact)
    if len(interruptions) > MAX_INTERRUPTIONS:
        lines.append(
            f"- ({len(interruptions) - MAX_INTERRUPTIONS} earlier interruptions not listed)"
        )
    lines += interruptions[-MAX_INTERRUPTIONS:]
    for key, ev in approvals:
        lines.append(
            f"- pending approval {key}: `{ev.content.get('type')}` at seq {ev.seq} (entry "
            f"{short(ev.entry_hash)}) has no decision yet"
        )
    stopped = {c for c, _, _ in interrupted}
    plan = None
    for e in reversed(entries):
        if e.kind == "tool_call" and e.tool_call_id not in stopped:
            if metadata_only(e):
                continue  # not a plan tool: the prefix's plan tools are read whole
            items = task_list(e)
            if items:
                plan = (e, items)
                break
    if plan is not None:
        e, items = plan
        lines.append(
            f"- task list (latest `{e.tool_name}` call, seq {e.seq}); keep it up to date with `{e.tool_name}`:"
        )
        lines += [f"  - [{status}] {text}" for text, status in items]
    listed = {call.entry_hash for _, call, _ in interrupted}
    results = {e.tool_call_id: e for e in entries if e.kind == "tool_result"}
    for f in obligations:
        support = [s.get("entry") for s in f.get("support", [])]
        if len(support) == 1 and support[0] in listed:
            continue
        result = results.get(str(f.get("call_id", ""))) if f.get("call_id") else None
        if result is not None and not result.is_error:
            continue  # the result arrived: the pair is restored, the next fold closes it
        if result is not None:
            lines.append(
                f"- call {result.tool_call_id} returned an error at seq {result.seq} (entry "
                f"{short(result.entry_hash)}): " + fact_line(f)
            )
            continue
        lines.append("- open obligation: " + fact_line(f))
    if done:
        lines += _done_lines(done, by_hash or {e.entry_hash: e for e in entries})
    if end_status:
        lines.append(
            f"- the run has ended: the source recorded {end_status}; its final output was "
            "delivered, nothing of it is pending"
        )
    if not lines:
        return ""
    said = ""
    if goal is not None:
        said = f" The current user goal is the user message at seq {goal.seq} (entry {short(goal.entry_hash)}), shown verbatim above."
    return (
        f"{TASK_STATE_MARK}: what is still open in this session, from the journal and the ledger.{said}]\n"
        + "\n".join(lines)
    )
