"""The request for the next model call, built in a controlled order (DESIGN.md section 6, seed 001).

Pure module: no Django, no database. Input: the journal's entries as plain views
(:class:`ledger_app.mechanical.EntryView`, as of one revision), the ledger state with the
last seq its folds cover, the artifact receipts of oversized tool results, budgets in tokens
and a target format (``"openai"``: Chat Completions messages; ``"anthropic"``: Messages).

What the request holds, in order:

1. the pins: every authoritative system, developer and user message, byte for byte, in
   journal order (a system message stays the first message, case 08; Anthropic puts system
   and developer text in ``system``). They are never folded, shrunk or redacted;
2. a ledger checkpoint message (only when rounds were folded out of the verbatim part): the
   facts about the folded rounds, rendered by :func:`ledger_app.budget.render_fact` with their
   support hashes so the model can ask for the source;
3. the kept API rounds verbatim (oversized results as artifact receipts, old results shrunk
   when the budget needed it), ending with the protected recent tail;
4. a task state message when there is active task state: calls that did not complete,
   results that report an interruption, pending approvals, the latest plan/todo list and
   the ledger's open obligations.

The order of compaction (seed 001, "Compress in a controlled order"), each step only while
the request is still over the working budget:

1. protect the pins, the active task state and the recent tail of complete API rounds
   (``tail_tokens``; at least the last complete round). An interrupted tail round (a call
   with no result) is never presented as history: the context ends with the last complete
   round and the interrupted calls are stated in the task state (DESIGN.md section 4);
2. project oversized tool results into their artifact receipts, oldest first, outside the
   tail, then inside it;
3. shrink old, already-consumed tool results (a result the model has answered after) to a
   deterministic head/errors/tail excerpt that says how much was cut and names the entry;
4. fold the oldest complete API rounds into the ledger: a round leaves the verbatim part only
   when a fold covers it; when none does yet, the ``fold`` callback is asked (once) to fold up
   to the tail. A whole round leaves or stays, never part of it (parallel calls together);
5. rebuild and validate (:func:`ledger_app.validation.validate_request`);
6. when validation fails on a budget or an artifact: one controlled recovery compaction
   (the tail shrinks to the last complete round, every tool result may be shrunk, a broken
   receipt falls back to the journal's own text) and validate again;
7. still failing: an explicit failure state, no request (never the same oversized request
   again). The service writes the checkpoint.

Three views, built separately (seed 001, "Keep model context separate from frontend
history"): :func:`build_context` returns the model view and the debug trace (the final
request, each decision with its reason and token effect); :func:`frontend_view` builds the
user-safe history from the entries on its own.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from journal_app.artifacts import (
    PREVIEW_HEAD_LINES,
    PREVIEW_MAX_CHARS,
    PREVIEW_TAIL_LINES,
    make_preview,
    media_type_of,
)
from journal_app.rounds import Round, complete_prefix_end, group_rounds
from ledger_app import reducer
from ledger_app.budget import SUPPORT_PREFIX, render_fact
from ledger_app.facts import priority_rank
from ledger_app.mechanical import EntryView, is_pin_source, pin_fact, required_pins
from ledger_app.offline import plan_items
from ledger_app.validation import (
    ARTIFACT_CHECKS,
    BUDGET_CHECKS,
    RECEIPT_MARK,
    TASK_STATE_MARK,
    ArtifactInfo,
    Expectations,
    Meter,
    Scanner,
    ValidationReport,
    budget_problems,
    memo_counter,
    memo_scanner,
    redact,
    validate_request,
)
from ledger_app.writers import MechanicalWriter

TARGETS = {"openai": "openai-chat", "anthropic": "anthropic-messages"}
#: Default protected tail: a quarter of the working budget.
TAIL_SHARE = 4
#: Characters of a call's arguments quoted in the task state.
ARGS_CHARS = 300
#: Interruption results listed in the task state (the latest ones).
MAX_INTERRUPTIONS = 10
CHECKPOINT_MARK = "[ledger checkpoint"
#: Said in the checkpoint when P2/P3 facts did not fit (they stay in the ledger).
OMITTED = "(+{n} P2/P3 facts in the ledger, not shown)"
#: Tokens kept back when filling the checkpoint with P2/P3 facts.
FILL_MARGIN = 8
EMPTY_OUTPUT = "(empty output)"
#: The user turn an Anthropic request opens with when the journal's first kept turn is the
#: assistant's (the Messages API requires a user turn first).
CONTINUED = "[the conversation continues from the journal; earlier turns are not shown]"

FoldCallback = Callable[[int], tuple[Mapping[str, Any], int]]
ArtifactResolver = Callable[[str], ArtifactInfo | None]


class ContextInputError(ValueError):
    """Budgets or options that cannot describe a request (a budget below one, unknown format)."""


# ----------------------------------------------------------------------------- helpers


def _short(h: str) -> str:
    return f"sha256:{h[:SUPPORT_PREFIX]}"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_ARGS: dict[str, str] = {}


def _args_text(call: EntryView) -> str:
    """A call's arguments as the JSON text a request carries (the source's own text when
    the journal kept it). Remembered by entry hash: an entry's arguments never change."""
    cached = _ARGS.get(call.entry_hash)
    if cached is not None:
        return cached
    raw = call.meta.get("raw_arguments") if isinstance(call.meta, dict) else None
    args = call.content.get("arguments")
    if isinstance(raw, str):
        text = raw
    elif isinstance(args, str):
        text = args
    else:
        text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    if len(_ARGS) > 50_000:
        _ARGS.clear()
    _ARGS[call.entry_hash] = text
    return text


def _injected(e: EntryView) -> bool:
    return bool(isinstance(e.meta, dict) and e.meta.get("injected"))


def current_goal(entries: Sequence[EntryView]) -> EntryView | None:
    """The latest user message that is neither derived nor injected, with text (the goal)."""
    for e in reversed(entries):
        if (
            e.kind == "message"
            and e.role == "user"
            and not e.derived
            and not _injected(e)
            and e.text.strip()
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
        if e.kind != "event":
            continue
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


def _task_list(call: EntryView) -> list[tuple[str, str]] | None:
    items = plan_items(call)
    if items is not None:
        return items
    # OpenHands task_tracker: {"command": "plan", "tasks": [{"title", "status"}]}
    args = call.content.get("arguments")
    name = call.tool_name.lower()
    if not isinstance(args, dict) or not isinstance(args.get("tasks"), list):
        return None
    if not any(w in name for w in ("task", "todo", "plan", "track")):
        return None
    out = []
    for item in args["tasks"]:
        if isinstance(item, dict):
            text = item.get("title") or item.get("content") or item.get("description")
            if isinstance(text, str) and text.strip():
                out.append((" ".join(text.split()), str(item.get("status", "todo")).lower()))
    return out


# ------------------------------------------------------------------------------ parts


@dataclass
class Part:
    """One unit of the request, neutral to the target format.

    ``kind``: ``text`` (a message's text, with ``blocks`` for images), ``call`` or
    ``result``. ``form`` says how a result is shown: ``verbatim``, ``receipt`` or
    ``shrunk``. ``pin`` marks an authoritative message (never changed, never redacted).
    """

    role: str
    kind: str
    text: str
    entry: EntryView | None = None
    call_id: str = ""
    name: str = ""
    is_error: bool = False
    blocks: list[Any] | None = None
    form: str = "verbatim"
    pin: bool = False
    reference: str = ""


def _image_blocks(blocks: Any, fmt: str) -> list[Any]:
    """The non-text parts of a message that the target format can carry (images), verbatim
    when they are already in its shape, converted when they are in the other's."""
    out: list[Any] = []
    if not isinstance(blocks, list):
        return out
    for b in blocks:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if fmt == "openai":
            if kind in ("image_url", "input_audio", "file"):
                out.append(b)
            elif kind == "image" and isinstance(b.get("source"), dict):
                src = b["source"]
                if src.get("type") == "base64":
                    url = f"data:{src.get('media_type', 'image/png')};base64,{src.get('data', '')}"
                    out.append({"type": "image_url", "image_url": {"url": url}})
                elif src.get("type") == "url":
                    out.append({"type": "image_url", "image_url": {"url": src.get("url", "")}})
        else:
            if kind in ("image", "document"):
                out.append(b)
            elif kind == "image_url" and isinstance(b.get("image_url"), dict):
                url = str(b["image_url"].get("url", ""))
                m = re.match(r"data:([^;,]+);base64,(.*)", url, re.DOTALL)
                if m:
                    out.append(
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": m.group(1),
                                "data": m.group(2),
                            },
                        }
                    )
                else:
                    out.append({"type": "image", "source": {"type": "url", "url": url}})
    return out


def _anthropic_ids(entries: Sequence[EntryView]) -> dict[str, str]:
    """Journal call id -> an id Anthropic accepts (``^[A-Za-z0-9_-]+$``), unique."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for e in entries:
        if e.kind != "tool_call" or e.tool_call_id in out:
            continue
        base = re.sub(r"[^A-Za-z0-9_-]", "_", e.tool_call_id) or "call"
        sid, n = base, 1
        while sid in used:
            n += 1
            sid = f"{base}_{n}"
        used.add(sid)
        out[e.tool_call_id] = sid
    return out


def _input_object(text: str) -> dict[str, Any]:
    """A call's arguments as the JSON object Anthropic's ``tool_use.input`` must be."""
    try:
        value = json.loads(text)
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": value}


@dataclass
class Assembled:
    """A request in the target format plus which entries each message came from."""

    messages: list[dict[str, Any]]
    system: list[dict[str, Any]]
    sources: list[list[str]]
    calls: dict[str, str]
    results: dict[str, str]


def assemble(parts: Sequence[Part], fmt: str, ids: Mapping[str, str] | None = None) -> Assembled:
    """Turn parts into OpenAI Chat Completions or Anthropic Messages.

    OpenAI: one message per text part; consecutive calls join the assistant message before
    them (its text becomes their ``content``); each result is a ``tool`` message.
    Anthropic: system and developer text goes to ``system``; consecutive parts of one role
    merge into one message; calls are ``tool_use`` blocks, results ``tool_result`` blocks in
    the next user message (results first, as the API requires).
    """
    ids = ids or {}
    out = Assembled([], [], [], {}, {})

    def entry_hex(p: Part) -> list[str]:
        return [p.entry.entry_hash] if p.entry is not None else []

    if fmt == "openai":
        open_assistant = False
        for p in parts:
            if p.kind == "call":
                call = {
                    "id": p.call_id,
                    "type": "function",
                    "function": {"name": p.name, "arguments": p.text},
                }
                if open_assistant:
                    out.messages[-1].setdefault("tool_calls", []).append(call)
                    out.sources[-1] += entry_hex(p)
                else:
                    out.messages.append(
                        {"role": "assistant", "content": None, "tool_calls": [call]}
                    )
                    out.sources.append(entry_hex(p))
                    open_assistant = True
                if p.entry is not None:
                    out.calls[p.call_id] = p.entry.entry_hash
                continue
            open_assistant = False
            if p.kind == "result":
                out.messages.append({"role": "tool", "tool_call_id": p.call_id, "content": p.text})
                out.sources.append(entry_hex(p))
                if p.entry is not None:
                    out.results[p.call_id] = p.entry.entry_hash
                continue
            images = _image_blocks(p.blocks, "openai")
            if images:
                content: Any = ([{"type": "text", "text": p.text}] if p.text else []) + images
            else:
                content = p.text
            out.messages.append({"role": p.role, "content": content})
            out.sources.append(entry_hex(p))
            open_assistant = p.role == "assistant"
        return out

    def add(role: str, block: dict[str, Any], p: Part) -> None:
        if out.messages and out.messages[-1]["role"] == role:
            out.messages[-1]["content"].append(block)
            out.sources[-1] += entry_hex(p)
        else:
            out.messages.append({"role": role, "content": [block]})
            out.sources.append(entry_hex(p))

    for p in parts:
        if p.kind == "text" and p.role in ("system", "developer"):
            out.system.append({"type": "text", "text": p.text})
            continue
        if p.kind == "call":
            sid = ids.get(p.call_id, p.call_id)
            add(
                "assistant",
                {"type": "tool_use", "id": sid, "name": p.name, "input": _input_object(p.text)},
                p,
            )
            if p.entry is not None:
                out.calls[sid] = p.entry.entry_hash
        elif p.kind == "result":
            sid = ids.get(p.call_id, p.call_id)
            add(
                "user",
                {
                    "type": "tool_result",
                    "tool_use_id": sid,
                    "content": p.text,
                    "is_error": p.is_error,
                },
                p,
            )
            if p.entry is not None:
                out.results[sid] = p.entry.entry_hash
        else:
            role = "assistant" if p.role == "assistant" else "user"
            if p.text:
                add(role, {"type": "text", "text": p.text}, p)
            for block in _image_blocks(p.blocks, "anthropic"):
                add(role, block, p)
    return out


# ------------------------------------------------------------------------------ rounds


@dataclass
class _Plan:
    """One round of the body and how it is shown."""

    round: Round
    parts: list[Part]
    position: int = -1  # position among droppable API rounds, -1 for others
    dropped: bool = False
    protected: bool = False
    cost: int = 0


def _receipt_text(receipt: Mapping[str, Any], seq: int) -> str:
    size = receipt.get("original_size") or {}
    return "\n".join(
        [
            f"{RECEIPT_MARK}: the result of this call (seq {seq}) is stored outside the context; "
            "ask for the reference to read it in full]",
            f"reference: {receipt.get('reference', '')}",
            f"media_type: {receipt.get('media_type', '')}",
            f"original_size: {size.get('tokens', '?')} tokens, {size.get('bytes', '?')} bytes",
            f"content_hash: {receipt.get('content_hash', '')}",
            f"source_tool: {receipt.get('source_tool', '')}",
            "preview:",
            str(receipt.get("preview", "")),
        ]
    )


def _receipt_again(receipt: Mapping[str, Any], seq: int, first_seq: int) -> str:
    return "\n".join(
        [
            f"{RECEIPT_MARK}: the result of this call (seq {seq}) is the same content as the "
            f"result at seq {first_seq}, whose receipt is above]",
            f"reference: {receipt.get('reference', '')}",
            f"content_hash: {receipt.get('content_hash', '')}",
        ]
    )


_ERROR_WORD = re.compile(
    r"(?i)\b(error|exception|traceback|failed|failure|fatal|panic|denied|not found|FAIL)\b"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _starts_with_assistant(parts: Sequence[Part]) -> bool:
    first = next(
        (p for p in parts if not (p.kind == "text" and p.role in ("system", "developer"))), None
    )
    return first is not None and first.role in ("assistant", "tool") and first.kind != "result"


def _cut(line: str, width: int = 200) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def excerpt(text: str) -> str:
    """The sections of :func:`journal_app.artifacts.make_preview` (JSON keys, 8 head lines,
    up to 8 error lines from the middle, 6 tail lines, a size footer), found with a few
    scans of the whole text instead of a pass per line, so shrinking a long output is cheap.
    Bounded to ``PREVIEW_MAX_CHARS`` characters."""
    parts: list[str] = []
    mtype = media_type_of(text)
    if mtype == "application/json":
        value = json.loads(text)
        if isinstance(value, dict):
            parts.append("keys: " + ", ".join(list(value)[:40]))
        elif isinstance(value, list):
            parts.append(f"array of {len(value)} items")
    clean = _ANSI.sub("", text) if "\x1b" in text else text
    lines = clean.count("\n") + 1 - (1 if clean.endswith("\n") else 0)
    head_lines = clean.split("\n", PREVIEW_HEAD_LINES)[:PREVIEW_HEAD_LINES]
    head_end = sum(len(x) + 1 for x in head_lines)
    tail_lines = (
        clean.rstrip("\n").rsplit("\n", PREVIEW_TAIL_LINES)[-PREVIEW_TAIL_LINES:]
        if lines > PREVIEW_HEAD_LINES
        else []
    )
    tail_start = len(clean) - sum(len(x) + 1 for x in tail_lines) if tail_lines else len(clean)
    errors, pos = [], head_end
    while len(errors) < PREVIEW_HEAD_LINES and pos < tail_start:
        m = _ERROR_WORD.search(clean, pos, tail_start)
        if m is None:
            break
        start = clean.rfind("\n", 0, m.start()) + 1
        end = clean.find("\n", m.end())
        end = len(clean) if end < 0 else end
        errors.append(clean[start:end])
        pos = end + 1
    parts.append("head:\n" + "\n".join(_cut(x) for x in head_lines))
    if errors:
        parts.append("errors:\n" + "\n".join(_cut(x) for x in errors))
    if tail_lines:
        parts.append("tail:\n" + "\n".join(_cut(x) for x in tail_lines))
    parts.append(f"[{lines} lines, {len(text)} characters]")
    out = "\n".join(parts)
    return out if len(out) <= PREVIEW_MAX_CHARS else out[: PREVIEW_MAX_CHARS - 1] + "…"


def shrink_text(text: str, entry: EntryView, original_tokens: int) -> str:
    """A deterministic excerpt of a tool output (head, error lines, tail; JSON keys) that
    states how much was cut and names the journal entry holding the whole output."""
    preview = excerpt(text)
    cut = max(0, len(text) - len(preview))
    return (
        f"[shrunk by the context builder: about {cut} of {len(text)} characters cut "
        f"({original_tokens} tokens originally); the full output is journal entry "
        f"{_short(entry.entry_hash)} (seq {entry.seq})]\n{preview}"
    )


def _round_parts(
    r: Round, by_seq: Mapping[int, EntryView], interrupted: set[str]
) -> tuple[list[Part], list[str]]:
    """The verbatim parts of one round, and notes on what was left out (orphans, events)."""
    parts: list[Part] = []
    notes: list[str] = []
    calls = {by_seq[s].tool_call_id for s in r.seqs if by_seq[s].kind == "tool_call"}
    for s in r.seqs:
        e = by_seq[s]
        if e.derived:
            notes.append(f"seq {s}: derived record left out (a summary is never a source)")
            continue
        if e.kind == "message":
            blocks = e.content.get("blocks")
            if (
                not e.text
                and not _image_blocks(blocks, "openai")
                and not _image_blocks(blocks, "anthropic")
            ):
                continue
            parts.append(
                Part(
                    role=e.role,
                    kind="text",
                    text=e.text,
                    entry=e,
                    blocks=blocks,
                    pin=is_pin_source(e),
                )
            )
        elif e.kind == "tool_call":
            if e.tool_call_id in interrupted:
                continue
            parts.append(
                Part(
                    role="assistant",
                    kind="call",
                    text=_args_text(e),
                    entry=e,
                    call_id=e.tool_call_id,
                    name=e.tool_name or "tool",
                )
            )
        elif e.kind == "tool_result":
            if e.tool_call_id not in calls:
                notes.append(f"seq {s}: tool result with no call in its round left out")
                continue
            parts.append(
                Part(
                    role="tool",
                    kind="result",
                    text=e.text or EMPTY_OUTPUT,
                    entry=e,
                    call_id=e.tool_call_id,
                    name=e.tool_name,
                    is_error=e.is_error,
                )
            )
    # a result must come after every call of its round (OpenAI and Anthropic pairing)
    calls_p = [p for p in parts if p.kind == "call"]
    if calls_p:
        last_call = max(i for i, p in enumerate(parts) if p.kind == "call")
        before = [p for p in parts[:last_call] if p.kind == "result"]
        if before:
            rest = [p for p in parts if p.kind != "result"]
            results = [p for p in parts if p.kind == "result"]
            parts = rest + results
    return parts, notes


# ------------------------------------------------------------------------------ facts


class _Facts:
    """The ledger's active facts, by how they are rendered."""

    def __init__(self, ledger: Mapping[str, Any], position_of: Mapping[str, int]) -> None:
        facts = [
            f for f in ledger.get("facts", {}).values() if f.get("lifecycle", "active") == "active"
        ]
        self.pins = {
            f["support"][0]["entry"]: f
            for f in ledger.get("facts", {}).values()
            if f.get("pin") and f.get("support")
        }
        self.obligations = [
            f for f in facts if not f.get("pin") and f.get("category") == "open_obligation"
        ]
        self.ranked: list[tuple[int, dict[str, Any]]] = []
        for f in facts:
            if f.get("pin") or f.get("category") == "open_obligation":
                continue
            positions = [position_of.get(s.get("entry", ""), -2) for s in f.get("support", [])]
            known = [p for p in positions if p >= 0]
            if not known and all(p == -1 for p in positions):
                continue  # about kept material only (pins, tail)
            self.ranked.append((min(known) if known else -1, f))

    def eligible(self, dropped: int) -> list[dict[str, Any]]:
        """Facts with support in one of the first ``dropped`` droppable rounds."""
        return [f for pos, f in self.ranked if pos < dropped]


def _fact_line(f: Mapping[str, Any], scan: Scanner | None = None) -> str:
    return redact(render_fact(dict(f)), scan)[0]


# ------------------------------------------------------------------------------ result


@dataclass
class ContextBuild:
    """Output of :func:`build_context`.

    Attributes:
        status: ``"ok"`` (``model_view`` validated) or ``"failed"`` (no request).
        model_view: ``{"format", "messages"}`` (OpenAI) or ``{"format", "system",
            "messages"}`` (Anthropic); ``None`` on failure.
        debug_trace: the final request (a separate copy), every decision with its reason and
            token effect, the budgets, token figures and the validation reports.
        failure: on failure, ``{"reason", "problems", "figures"}``.
        report: the last validation report of the model view.
        ledger / covered_upto: the ledger the build ended with (after any fold).
    """

    status: str
    model_view: dict[str, Any] | None
    debug_trace: dict[str, Any]
    failure: dict[str, Any] | None
    report: ValidationReport
    ledger: Mapping[str, Any] = field(default_factory=dict)
    covered_upto: int = 0


class _Builder:
    def __init__(
        self,
        *,
        entries: Sequence[EntryView],
        ledger: Mapping[str, Any],
        covered_upto: int,
        receipts: Mapping[str, Mapping[str, Any]],
        resolve: ArtifactResolver | None,
        working: int,
        hard: int,
        reserve: int,
        tail_tokens: int,
        fmt: str,
        fold: FoldCallback | None,
        meter: Meter,
    ) -> None:
        self.entries = list(entries)
        self.ledger = ledger
        self.covered_upto = covered_upto
        self.receipts = receipts
        self.resolve = resolve
        self.working = working
        self.hard = hard
        self.reserve = reserve
        self.limit = min(working, hard - reserve)
        self.tail_tokens = tail_tokens
        self.fmt = fmt
        self.fold = fold
        self.meter = meter
        self.decisions: list[dict[str, Any]] = []
        self.fold_attempts: list[dict[str, Any]] = []
        self.by_seq = {e.seq: e for e in self.entries}
        self.by_hash = {e.entry_hash: e for e in self.entries}
        self.ids = _anthropic_ids(self.entries) if fmt == "anthropic" else {}
        self._redacted: dict[str, str] = {}
        self.redactions = 0
        self.scan = memo_scanner()
        self._prepare()

    # ---------------------------------------------------------------- setup

    def _prepare(self) -> None:
        rounds = group_rounds(self.entries)
        self.tail_round: Round | None = None
        if (
            rounds
            and rounds[-1].at_tail
            and rounds[-1].kind == "api"
            and rounds[-1].status == "interrupted"
        ):
            self.tail_round = rounds.pop()
        self.interrupted: list[tuple[str, EntryView, bool]] = []  # (call id, call, at tail)
        for r in rounds:
            for cid in r.interrupted_call_ids:
                call = next(
                    self.by_seq[s]
                    for s in r.seqs
                    if self.by_seq[s].kind == "tool_call" and self.by_seq[s].tool_call_id == cid
                )
                self.interrupted.append((cid, call, False))
        if self.tail_round is not None:
            for cid in self.tail_round.interrupted_call_ids:
                call = next(
                    self.by_seq[s]
                    for s in self.tail_round.seqs
                    if self.by_seq[s].kind == "tool_call" and self.by_seq[s].tool_call_id == cid
                )
                self.interrupted.append((cid, call, True))
        mid = {cid for cid, _, at_tail in self.interrupted if not at_tail}
        self.notes: list[str] = []
        self.plans: list[_Plan] = []
        for r in rounds:
            parts, notes = _round_parts(r, self.by_seq, mid)
            self.notes += notes
            self.plans.append(_Plan(round=r, parts=parts))
        for p in self.plans:
            p.cost = self._cost(p.parts)
        # the protected tail: complete rounds from the end within tail_tokens, at least one
        total = 0
        for p in reversed(self.plans):
            if total > 0 and total + p.cost > self.tail_tokens:
                break
            p.protected = True
            total += p.cost
        self.droppable = [p for p in self.plans if p.round.kind == "api" and not p.protected]
        for i, p in enumerate(self.droppable):
            p.position = i
        self.position_of = {}
        for p in self.plans:
            for s in p.round.seqs:
                self.position_of[self.by_seq[s].entry_hash] = p.position
        self.last_assistant = max(
            (
                e.seq
                for e in self.entries
                if e.role == "assistant" and e.kind in ("message", "tool_call")
            ),
            default=0,
        )
        self.goal = current_goal(self.entries)
        self.approvals = pending_approvals(self.entries)
        self._facts_from(self.ledger)
        self.task_text = self._task_state()

    def _facts_from(self, ledger: Mapping[str, Any]) -> None:
        self.facts = _Facts(ledger, self.position_of)
        self._lines: dict[int, str] = {}
        self._ckpt: dict[tuple[int, int | None], tuple[str, list[str], int]] = {}
        self._ckpt_costs: dict[int, int] = {}
        self.inactive_pins = {
            h for h, f in self.facts.pins.items() if f.get("lifecycle", "active") != "active"
        }

    # ---------------------------------------------------------------- costs

    def _cost(self, parts: Sequence[Part]) -> int:
        a = assemble(parts, self.fmt, self.ids)
        return sum(self.meter.message(m) for m in a.messages) + sum(
            self.meter.per_message + self.meter.text(b["text"]) for b in a.system
        )

    def _text_cost(self, text: str) -> int:
        return self.meter.per_message + self.meter.text(text) if text else 0

    def _line(self, f: Mapping[str, Any]) -> str:
        line = self._lines.get(id(f))
        if line is None:
            line = self._lines[id(f)] = _fact_line(f, self.scan)
        return line

    def checkpoint_text(self, dropped: int, fill: int | None) -> tuple[str, list[str], int]:
        """The checkpoint message for the first ``dropped`` droppable rounds, with P2/P3 facts
        newest first while they fit in ``fill`` tokens (``None``: all). Returns the text, the
        ids of facts left out, and the number of facts shown."""
        if dropped == 0:
            return "", [], 0
        key = (dropped, fill)
        if key not in self._ckpt:
            self._ckpt[key] = self._checkpoint_text(dropped, fill)
        return self._ckpt[key]

    def _checkpoint_text(self, dropped: int, fill: int | None) -> tuple[str, list[str], int]:
        eligible = self.facts.eligible(dropped)
        must = [f for f in eligible if f.get("priority") in ("P0", "P1")]
        optional = [f for f in eligible if f.get("priority") not in ("P0", "P1")]
        optional.sort(key=lambda f: (-int(f.get("origin_fold", 0) or 0), str(f.get("id"))))
        first = self.droppable[0].round.first_seq
        last = self.droppable[dropped - 1].round.last_seq
        head = (
            f"{CHECKPOINT_MARK}: rounds seq {first}-{last} are folded out; each fact cites the "
            "journal entries it rests on]"
        )
        lines = [head] + [
            self._line(f)
            for f in sorted(
                must, key=lambda f: (priority_rank(f.get("priority", "")), str(f.get("id")))
            )
        ]
        shown: list[str] = []
        left: list[str] = [str(f.get("id")) for f in optional]
        if fill is None or fill > 0:
            note = self.meter.text(OMITTED.format(n=len(optional))) + self.meter.text("\n")
            budget = None if fill is None else fill - note
            left = []
            for f in optional:
                line = self._line(f)
                cost = self.meter.text(line) + self.meter.text("\n")
                if budget is None or cost <= budget:
                    shown.append(line)
                    if budget is not None:
                        budget -= cost
                else:
                    left.append(str(f.get("id")))
            lines += shown
            if left:
                lines.append(OMITTED.format(n=len(left)))
        return "\n".join(lines), left, len(must) + len(shown)

    def _ckpt_cost(self, dropped: int) -> int:
        """Tokens of the checkpoint with its P0/P1 facts only, summed per line (an upper bound
        of the joined text in practice; the built request is counted exactly anyway)."""
        if dropped == 0:
            return 0
        cached = self._ckpt_costs.get(dropped)
        if cached is None:
            text, _, _ = self.checkpoint_text(dropped, 0)
            lines = text.split("\n")
            cached = (
                self.meter.per_message
                + sum(self.meter.text(x) for x in lines)
                + (len(lines) - 1) * self.meter.text("\n")
            )
            self._ckpt_costs[dropped] = cached
        return cached

    def body_cost(self) -> int:
        return sum(p.cost for p in self.plans if not p.dropped)

    def total(self, dropped: int | None = None) -> int:
        """The request's tokens as planned (P2/P3 facts not counted: they only fill room)."""
        k = self.dropped_count() if dropped is None else dropped
        return (
            self.meter.per_request
            + self.body_cost()
            + self._ckpt_cost(k)
            + self._text_cost(self.task_text)
        )

    # ---------------------------------------------------------------- task state

    def _task_state(self) -> str:
        lines: list[str] = []
        for cid, call, at_tail in self.interrupted:
            state = (
                "was called and has no result yet: the run stopped before it completed"
                if at_tail
                else "was called and did not complete (no result in the journal)"
            )
            lines.append(
                f"- interrupted call {cid}: `{call.tool_name}` {state}; seq {call.seq}, entry "
                f"{_short(call.entry_hash)}; arguments: {redact(_clip(_args_text(call), ARGS_CHARS), self.scan)[0]}"
            )
        if self.tail_round is not None:
            answered = [
                self.by_seq[s] for s in self.tail_round.seqs if self.by_seq[s].kind == "tool_result"
            ]
            for res in answered:
                lines.append(
                    f"- call {res.tool_call_id} of that unfinished round returned (seq {res.seq}, entry "
                    f"{_short(res.entry_hash)}); its result is left out with the round"
                )
        interruptions = []
        later_calls: dict[tuple[str, str], int] = {}
        calls_by_id = {e.tool_call_id: e for e in self.entries if e.kind == "tool_call"}
        for e in self.entries:
            if e.kind == "tool_call":
                later_calls[(e.tool_name, _args_text(e))] = e.seq
        for e in self.entries:
            if e.kind != "tool_result":
                continue
            how = interruption_of(e)
            if not how:
                continue
            call = calls_by_id.get(e.tool_call_id)
            if (
                call is not None
                and later_calls.get((call.tool_name, _args_text(call)), 0) > call.seq
            ):
                continue  # retried later with the same arguments
            what = (
                f"`{call.tool_name}` {redact(_clip(_args_text(call), 160), self.scan)[0]}"
                if call
                else "a call"
            )
            interruptions.append(
                f"- interrupted: {what} (call {e.tool_call_id}, seq {e.seq}) did not complete "
                f"({how}); its output: {redact(_clip(e.text, ARGS_CHARS), self.scan)[0]}"
            )
        if len(interruptions) > MAX_INTERRUPTIONS:
            lines.append(
                f"- ({len(interruptions) - MAX_INTERRUPTIONS} earlier interruptions not listed)"
            )
        lines += interruptions[-MAX_INTERRUPTIONS:]
        for key, ev in self.approvals:
            lines.append(
                f"- pending approval {key}: `{ev.content.get('type')}` at seq {ev.seq} (entry "
                f"{_short(ev.entry_hash)}) has no decision yet"
            )
        plan = None
        for e in reversed(self.entries):
            if e.kind == "tool_call" and e.tool_call_id not in {c for c, _, _ in self.interrupted}:
                items = _task_list(e)
                if items:
                    plan = (e, items)
                    break
        if plan is not None:
            e, items = plan
            lines.append(
                f"- task list (latest `{e.tool_name}` call, seq {e.seq}); keep it up to date with `{e.tool_name}`:"
            )
            lines += [f"  - [{status}] {text}" for text, status in items]
        listed = {call.entry_hash for _, call, _ in self.interrupted}
        for f in self.facts.obligations:
            support = [s.get("entry") for s in f.get("support", [])]
            if len(support) == 1 and support[0] in listed:
                continue
            lines.append("- open obligation: " + _fact_line(f))
        if not lines:
            return ""
        goal = ""
        if self.goal is not None:
            goal = f" The current user goal is the user message at seq {self.goal.seq} (entry {_short(self.goal.entry_hash)}), shown verbatim above."
        return (
            f"{TASK_STATE_MARK}: what is still open in this session, from the journal and the ledger.{goal}]\n"
            + "\n".join(lines)
        )

    # ---------------------------------------------------------------- decisions

    def decide(
        self, step: int, action: str, reason: str, before: int, after: int, **extra: Any
    ) -> None:
        self.decisions.append(
            {
                "step": step,
                "action": action,
                "reason": reason,
                "tokens_before": before,
                "tokens_after": after,
                "effect": after - before,
                **extra,
            }
        )

    def _project(self, plans: Iterable[_Plan], step: int, target: int) -> None:
        for p in plans:
            for part in p.parts:
                if self.total() <= target:
                    return
                if part.kind != "result" or part.form != "verbatim" or part.entry is None:
                    continue
                receipt = self.receipts.get(part.entry.entry_hash)
                if receipt is None:
                    continue
                before = self.total()
                part.text = _receipt_text(receipt, part.entry.seq)
                part.form = "receipt"
                part.reference = str(receipt.get("reference", ""))
                p.cost = self._cost(p.parts)
                self.decide(
                    step,
                    "project",
                    f"tool result at seq {part.entry.seq} is oversized: replaced by its artifact receipt {part.reference}",
                    before,
                    self.total(),
                    seqs=[part.entry.seq],
                    entry=part.entry.entry_hash,
                )

    def _shrink(self, plans: Iterable[_Plan], step: int, target: int, consumed_only: bool) -> None:
        for p in plans:
            for part in p.parts:
                if self.total() <= target:
                    return
                if part.kind != "result" or part.form == "shrunk" or part.entry is None:
                    continue
                if consumed_only and part.entry.seq >= self.last_assistant:
                    continue
                source = part.entry.text
                original = self.meter.text(source)
                new = shrink_text(source, part.entry, original)
                if self.meter.text(new) >= self.meter.text(part.text):
                    continue
                before = self.total()
                was = part.form
                part.text, part.form, part.reference = new, "shrunk", ""
                p.cost = self._cost(p.parts)
                why = (
                    "an old result the model has already answered"
                    if consumed_only
                    else "recovery compaction"
                )
                self.decide(
                    step,
                    "shrink",
                    f"tool result at seq {part.entry.seq} ({was}) shrunk to a deterministic excerpt: {why}",
                    before,
                    self.total(),
                    seqs=[part.entry.seq],
                    entry=part.entry.entry_hash,
                )

    def _ask_fold(self, upto: int, step: int) -> bool:
        if self.fold is None:
            self.fold_attempts.append(
                {"upto": upto, "outcome": "no fold callback: the ledger cannot grow here"}
            )
            return False
        try:
            ledger, covered = self.fold(upto)
        except Exception as exc:  # the writer, the verifier or the store failed: keep the rounds
            self.fold_attempts.append(
                {"upto": upto, "outcome": f"fold failed: {type(exc).__name__}: {exc}"}
            )
            self.decide(
                step,
                "fold",
                f"asked the ledger to fold up to seq {upto}; the fold failed ({type(exc).__name__}), so the rounds stay verbatim",
                self.total(),
                self.total(),
            )
            return False
        grew = covered > self.covered_upto
        self.fold_attempts.append(
            {
                "upto": upto,
                "outcome": "folded" if grew else "nothing new folded",
                "covered_upto": covered,
            }
        )
        if grew:
            self.ledger, self.covered_upto = ledger, covered
            self._facts_from(ledger)
            self.task_text = self._task_state()
        self.decide(
            step,
            "fold",
            f"asked the ledger to fold the complete API rounds up to seq {upto}: it now covers up to seq {covered}",
            self.total(),
            self.total(),
            covered_upto=covered,
        )
        return grew

    def dropped_count(self) -> int:
        return sum(1 for p in self.droppable if p.dropped)

    def _register(self, plans: Sequence[_Plan]) -> None:
        """Make tail rounds droppable (recovery): they take the next positions, in order."""
        for p in plans:
            if p.position < 0:
                p.position = len(self.droppable)
                self.droppable.append(p)
                for s in p.round.seqs:
                    self.position_of[self.by_seq[s].entry_hash] = p.position
        self._facts_from(self.ledger)

    def _drop(self, step: int, target: int, fold_upto: int) -> None:
        """Leave out the oldest covered droppable rounds: the fewest that bring the request
        within ``target``; when none does, the number that makes it smallest (possibly none:
        a fold whose facts cost more than its rounds is not worth it)."""
        asked = False
        while True:
            base = self.dropped_count()
            rest = self.droppable[base:]
            covered = 0
            for p in rest:
                if p.round.last_seq > self.covered_upto:
                    break
                covered += 1
            body = self.body_cost()
            fixed = self.meter.per_request + self._text_cost(self.task_text)
            best_j, best_total, fits = 0, self.total(base), False
            saved = 0
            for j in range(1, covered + 1):
                saved += rest[j - 1].cost
                t = fixed + body - saved + self._ckpt_cost(base + j)
                if t <= target:
                    best_j, best_total, fits = j, t, True
                    break
                if t < best_total:
                    best_j, best_total = j, t
            if not fits and covered < len(rest) and not asked:
                asked = True
                if self._ask_fold(fold_upto, step):
                    continue
            break
        if covered < len(rest) and not fits:
            p = rest[covered]
            self.decide(
                step,
                "keep",
                f"API round seq {p.round.first_seq}-{p.round.last_seq} and later are not covered "
                "by any fold: they stay verbatim",
                self.total(),
                self.total(),
            )
        for p in rest[:best_j]:
            before = self.total()
            p.dropped = True
            self.decide(
                step,
                "fold",
                f"API round seq {p.round.first_seq}-{p.round.last_seq} is covered by the ledger: "
                "left out of the verbatim part, its facts go in the checkpoint",
                before,
                self.total(),
                seqs=[p.round.first_seq, p.round.last_seq],
            )

    # ---------------------------------------------------------------- assembly

    def _redact(self, text: str) -> str:
        out = self._redacted.get(text)
        if out is None:
            out, kinds = redact(text, self.scan)
            self._redacted[text] = out
            self.redactions += len(kinds)
        return out

    def final_parts(self, fill: int | None) -> tuple[list[Part], list[str]]:
        k = self.dropped_count()
        ckpt, left, _ = self.checkpoint_text(k, fill)
        last_dropped = max((i for i, p in enumerate(self.plans) if p.dropped), default=-1)
        parts: list[Part] = []
        first_receipt: dict[str, int] = {}
        for i, p in enumerate(self.plans):
            if not p.dropped:
                for part in p.parts:
                    if (
                        part.pin
                        and part.entry is not None
                        and part.entry.entry_hash in self.inactive_pins
                        and i < last_dropped
                    ):
                        continue
                    q = copy.copy(part)
                    if not q.pin:
                        q.text = self._redact(q.text)
                    if q.form == "receipt" and q.entry is not None:
                        receipt = self.receipts[q.entry.entry_hash]
                        if q.reference in first_receipt:
                            q.text = self._redact(
                                _receipt_again(receipt, q.entry.seq, first_receipt[q.reference])
                            )
                        else:
                            first_receipt[q.reference] = q.entry.seq
                    parts.append(q)
            if i == last_dropped and ckpt:
                parts.append(Part(role="user", kind="text", text=ckpt))
        if self.task_text:
            parts.append(Part(role="user", kind="text", text=self.task_text))
        return parts, left

    def expectations(self, a: Assembled) -> Expectations:
        pins: list[tuple[str, str, str]] = []
        for e in self.entries:
            if not is_pin_source(e) or e.entry_hash in self.inactive_pins:
                continue
            fid = pin_fact(e)["id"]
            pins.append((fid, e.entry_hash, e.text))
            ledger_pin = self.facts.pins.get(e.entry_hash)
            if ledger_pin is not None and ledger_pin.get("text") != e.text:
                pins.append((str(ledger_pin.get("id")), e.entry_hash, str(ledger_pin.get("text"))))
        goal = (self.goal.entry_hash, self.goal.text) if self.goal is not None else None
        return Expectations(
            pins=pins,
            goal=goal,
            interrupted=[(cid, call.entry_hash) for cid, call, _ in self.interrupted],
            approvals=[(key, ev.entry_hash) for key, ev in self.approvals],
            sources=a.sources,
            calls=a.calls,
            results=a.results,
            secrets_exempt=frozenset(text for _, _, text in pins),
        )

    def resolver(self) -> ArtifactResolver:
        if self.resolve is not None:
            return self.resolve
        known = {
            str(r.get("reference")): ArtifactInfo(
                str(r.get("content_hash", "")).removeprefix("sha256:")
            )
            for r in self.receipts.values()
        }
        return known.get

    def request(self, fill: int | None) -> tuple[dict[str, Any], Assembled, list[str]]:
        parts, left = self.final_parts(fill)
        if self.fmt == "anthropic" and _starts_with_assistant(parts):
            # the Messages API requires a user turn first; say why there is none
            parts.insert(0, Part(role="user", kind="text", text=CONTINUED))
        a = assemble(parts, self.fmt, self.ids)
        if self.fmt == "anthropic":
            view: dict[str, Any] = {"format": TARGETS["anthropic"], "messages": a.messages}
            if a.system:
                view["system"] = a.system
        else:
            view = {"format": TARGETS["openai"], "messages": a.messages}
        return view, a, left

    def validate(self, view: Mapping[str, Any], a: Assembled) -> ValidationReport:
        return validate_request(
            {k: v for k, v in view.items() if k != "format"},
            fmt=self.fmt,
            working_budget=self.working,
            hard_limit=self.hard,
            output_reserve=self.reserve,
            meter=self.meter,
            expect=self.expectations(a),
            resolve_artifact=self.resolver(),
            check_secrets=True,
            scan=self.scan,
        )

    def rebuild(self) -> tuple[dict[str, Any] | None, Assembled, list[str], ValidationReport]:
        """Build and validate the request; a plan already over the limit is not built (its
        validation can only fail on the budget, and redacting it would be wasted work)."""
        planned = self.total()
        if planned > self.limit:
            report = ValidationReport(
                view="model",
                format=self.fmt,
                problems=budget_problems(planned, self.working, self.hard, self.reserve),
                checks=list(BUDGET_CHECKS),
                tokens=planned,
                token_source=self.meter.label + " (planned, not built)",
            )
            return None, Assembled([], [], [], {}, {}), [], report
        view, a, left = self.request(self.fill_room())
        return view, a, left, self.validate(view, a)

    def _restore(self, step: int, target: int) -> None:
        """After recovery shrank what it could, bring back the newest folded rounds that fit."""
        while True:
            dropped = [p for p in self.droppable if p.dropped]
            if not dropped:
                return
            p = dropped[-1]
            before = self.total()
            p.dropped = False
            if self.total() > target:
                p.dropped = True
                return
            self.decide(
                step,
                "restore",
                f"API round seq {p.round.first_seq}-{p.round.last_seq} fits again after the "
                "recovery compaction: shown verbatim",
                before,
                self.total(),
                seqs=[p.round.first_seq, p.round.last_seq],
            )

    def fill_room(self) -> int:
        """Tokens left for P2/P3 facts (a few kept back: the omission note changes length)."""
        return max(0, self.limit - self.total() - FILL_MARGIN)


# ------------------------------------------------------------------------------- entry


def build_context(
    *,
    entries: Sequence[EntryView],
    ledger: Mapping[str, Any] | None = None,
    covered_upto: int = 0,
    working_budget: int,
    hard_limit: int,
    tail_tokens: int | None = None,
    target_format: str = "openai",
    output_reserve: int = 0,
    receipts: Mapping[str, Mapping[str, Any]] | None = None,
    resolve_artifact: ArtifactResolver | None = None,
    fold: FoldCallback | None = None,
    meter: Meter | None = None,
    revision: int | None = None,
    token_counts: Mapping[str, int] | None = None,
) -> ContextBuild:
    """Build the request for the next model call (module docstring: contents and order).

    Args:
        entries: the journal's entries with ``seq <= revision``, in seq order.
        ledger: the reducer state to render (``{"facts": {...}}``); empty when ``None``.
        covered_upto: the last seq covered by the ledger's folds (0: none).
        working_budget: tokens the request should fit in (the compaction target).
        hard_limit: the model's context window, tokens; the request must fit in
            ``hard_limit - output_reserve`` (case 14).
        tail_tokens: the protected recent tail, tokens (default a quarter of the budget).
        target_format: ``"openai"`` or ``"anthropic"``.
        output_reserve: tokens kept free for the reply.
        receipts: entry hash -> artifact receipt (``Artifact.receipt()``) of oversized results.
        resolve_artifact: ``reference -> ArtifactInfo | None`` (the store; default: the
            receipts themselves are trusted).
        fold: ``fold(upto) -> (ledger, covered_upto)``: grows the ledger over the complete
            API rounds up to ``upto`` (the service runs ``ledger_fold``). An exception from it
            is recorded and the rounds stay verbatim (case 18: a failed summary never
            replaces history).
        meter: token counting (default tiktoken ``o200k_base``); memoized per build.
        revision: the revision the entries are as of (for the trace; default the last seq).
        token_counts: entry hash -> the entry's stored token count (``Entry.token_count``,
            counted by the same encoding as ``meter`` when the entry was appended): the text of
            a message or a result is then not counted again.

    Returns:
        :class:`ContextBuild`. Deterministic for equal inputs.

    Raises:
        ContextInputError: a budget below 1, a hard limit not above the output reserve, an
            unknown target format.
    """
    if target_format not in TARGETS:
        raise ContextInputError(
            f"target_format must be one of {', '.join(TARGETS)}, got {target_format!r}"
        )
    if working_budget < 1 or hard_limit < 1:
        raise ContextInputError("working_budget and hard_limit must be at least 1 token")
    if output_reserve < 0 or output_reserve >= hard_limit:
        raise ContextInputError(
            f"output_reserve must be between 0 and hard_limit - 1, got {output_reserve}"
        )
    base = meter or Meter()
    seed: dict[str, int] = {}
    if token_counts:
        for e in entries:
            n = token_counts.get(e.entry_hash)
            if n is not None and e.kind in ("message", "tool_result"):
                seed[e.text] = n
    meter = Meter(
        count=memo_counter(base.count, seed),
        per_message=base.per_message,
        per_request=base.per_request,
        per_image=base.per_image,
        label=base.label,
    )
    tail = tail_tokens if tail_tokens is not None else max(1, working_budget // TAIL_SHARE)
    if tail < 0:
        raise ContextInputError("tail_tokens must be at least 0")
    b = _Builder(
        entries=entries,
        ledger=ledger or copy.deepcopy(reducer.EMPTY_STATE),
        covered_upto=covered_upto,
        receipts=receipts or {},
        resolve=resolve_artifact,
        working=working_budget,
        hard=hard_limit,
        reserve=output_reserve,
        tail_tokens=tail,
        fmt=target_format,
        fold=fold,
        meter=meter,
    )
    limit = b.limit
    journal_tokens = b.total()
    tail_plans = [p for p in b.plans if p.protected]
    b.decide(
        1,
        "protect",
        f"{sum(1 for e in b.entries if is_pin_source(e))} pins, the task state and the recent tail "
        f"({len(tail_plans)} rounds, {sum(p.cost for p in tail_plans)} tokens, limit {tail}) are "
        "never folded"
        + (
            f"; the unfinished round at seq {b.tail_round.first_seq}-{b.tail_round.last_seq} is left "
            "out and its calls are stated as task state"
            if b.tail_round is not None
            else ""
        ),
        journal_tokens,
        journal_tokens,
    )
    tail_start = min(
        (p.round.first_seq for p in tail_plans), default=(b.entries[-1].seq + 1 if b.entries else 1)
    )
    outside = [p for p in b.plans if not p.protected]
    if b.total() > limit:
        b._project(outside, 2, limit)
        b._project(tail_plans, 2, limit)
    if b.total() > limit:
        b._shrink(outside, 3, limit, consumed_only=True)
    if b.total() > limit:
        b._drop(4, limit, tail_start - 1)
    if len(b.decisions) == 1:
        b.decide(
            1,
            "none",
            f"the request is {b.total()} tokens, within {limit}: nothing to compact",
            b.total(),
            b.total(),
        )
    planned = b.total()
    view, a, left, report = b.rebuild()
    reports = [report.to_dict()]
    b.decide(
        5,
        "validate",
        ("rebuilt and validated: " if view is not None else "not rebuilt: ")
        + ("ok" if report.ok else "; ".join(p.check for p in report.problems)),
        planned,
        report.tokens or 0,
    )
    recovered = False
    if not report.ok and all(p.check in BUDGET_CHECKS + ARTIFACT_CHECKS for p in report.problems):
        recovered = True
        before = report.tokens or 0
        bad = {p.ref for p in report.problems if p.check in ARTIFACT_CHECKS}
        for plan in b.plans:
            for part in plan.parts:
                if part.form == "receipt" and part.reference in bad and part.entry is not None:
                    was = b.total()
                    part.text = shrink_text(
                        part.entry.text, part.entry, b.meter.text(part.entry.text)
                    )
                    part.form, part.reference = "shrunk", ""
                    plan.cost = b._cost(plan.parts)
                    b.decide(
                        6,
                        "unproject",
                        f"the receipt of seq {part.entry.seq} does not verify: the journal's own "
                        "text is shown instead, shrunk",
                        was,
                        b.total(),
                    )
        kept = [p for p in b.plans if not p.dropped]
        b._project(kept, 6, limit)
        body = [p for p in b.plans if not p.dropped]
        last = body[-1] if body else None
        tail_api = [p for p in body if p.protected and p is not last and p.round.kind == "api"]
        if b.total() > limit and tail_api:
            b._register(tail_api)
            b._drop(6, limit, (last.round.first_seq - 1) if last else tail_start - 1)
        b._shrink([p for p in b.plans if not p.dropped], 6, limit, consumed_only=False)
        b._restore(6, limit)
        view, a, left, report = b.rebuild()
        reports.append(report.to_dict())
        b.decide(
            6,
            "recovery",
            "one controlled recovery compaction, validated again: "
            + ("ok" if report.ok else "; ".join(p.check for p in report.problems)),
            before,
            report.tokens or 0,
        )
    failure = None
    status = "ok" if report.ok else "failed"
    if not report.ok:
        mandatory = (
            b.meter.per_request
            + sum(p.cost for p in b.plans if not p.dropped and p.round.kind == "message")
            + b._text_cost(b.task_text)
        )
        failure = {
            "reason": "the request cannot be made valid: "
            + "; ".join(p.message for p in report.problems[:5])
            + (
                ""
                if recovered
                else " (not a budget or artifact problem: no recovery compaction applies)"
            ),
            "problems": [p.to_dict() for p in report.problems],
            "figures": {
                "request_tokens": report.tokens,
                "working_budget": b.working,
                "hard_limit": b.hard,
                "output_reserve": b.reserve,
                "pins_and_task_state_tokens": mandatory,
                "last_round_tokens": next((p.cost for p in reversed(b.plans) if not p.dropped), 0),
            },
        }
        b.decide(
            7,
            "fail",
            "validation still fails: explicit failure state, no request is returned",
            report.tokens or 0,
            0,
        )
        view = None
    trace = {
        "revision": revision if revision is not None else (b.entries[-1].seq if b.entries else 0),
        "target_format": TARGETS[target_format],
        "status": status,
        "budgets": {
            "working_budget": working_budget,
            "hard_limit": hard_limit,
            "output_reserve": output_reserve,
            "tail_tokens": tail,
            "effective_limit": limit,
        },
        "tokens": {
            "journal_uncompacted": journal_tokens,
            "request": report.tokens,
            "source": f"{meter.label}, counted on the built request (a request not yet sent has no provider figure)",
            "provider_last_call": provider_usage(b.entries),
        },
        "rounds": {
            "total": len(b.plans) + (1 if b.tail_round is not None else 0),
            "protected_tail": [p.round.first_seq for p in b.plans if p.protected][:1]
            + [p.round.last_seq for p in b.plans if p.protected][-1:],
            "folded_out": [[p.round.first_seq, p.round.last_seq] for p in b.plans if p.dropped],
            "unfinished_tail": [b.tail_round.first_seq, b.tail_round.last_seq]
            if b.tail_round is not None
            else None,
            "covered_upto": b.covered_upto,
        },
        "ledger": {"facts_left_out": left, "folds_asked": b.fold_attempts},
        "artifacts": sorted(
            {
                p.reference
                for p in (part for plan in b.plans if not plan.dropped for part in plan.parts)
                if p.form == "receipt"
            }
        ),
        "redactions": b.redactions,
        "notes": b.notes,
        "decisions": b.decisions,
        "validation": reports,
        "request": copy.deepcopy(view),
        "sources": [[_short(h) for h in s] for s in a.sources] if view is not None else [],
    }
    return ContextBuild(status, view, trace, failure, report, b.ledger, b.covered_upto)


def provider_usage(entries: Sequence[EntryView]) -> dict[str, Any] | None:
    """The provider-reported usage of the journal's last model call that carries one
    (``input_tokens``/``prompt_tokens``), labelled as such; ``None`` when none does."""
    for e in reversed(entries):
        usage = e.meta.get("usage") if isinstance(e.meta, dict) else None
        if isinstance(usage, dict):
            inp = usage.get("input_tokens", usage.get("prompt_tokens"))
            out = usage.get("output_tokens", usage.get("completion_tokens"))
            if isinstance(inp, int):
                return {
                    "input_tokens": inp,
                    "output_tokens": out if isinstance(out, int) else None,
                    "seq": e.seq,
                    "source": "provider-reported usage of that call (the uncompacted request then)",
                }
    return None


# ------------------------------------------------------------------------- frontend view


def frontend_view(
    entries: Sequence[EntryView],
    *,
    receipts: Mapping[str, Mapping[str, Any]] | None = None,
    preview_tokens_over: int = 2000,
    count: Callable[[str], int] | None = None,
) -> dict[str, Any]:
    """The user-safe history (seed 001: "the frontend should receive only user-safe messages
    and approved execution details"), built from the entries on its own.

    Kept: user and assistant messages, tool calls (name and arguments) and their results.
    Left out: system and developer messages (runtime instructions), hidden reasoning,
    runtime events, derived records, ids, hashes, references and metadata. Every text has
    its secrets redacted (pins included: this view is for display, not for the model). A
    result with a receipt, or over ``preview_tokens_over`` tokens, shows its preview.

    Returns:
        ``{"items": [{"seq", "role", "kind", "text", "tool"?, "is_error"?, "attachments"?,
        "truncated"?}], "interrupted": [seq, ...], "redactions": n}``.
    """
    receipts = receipts or {}
    items: list[dict[str, Any]] = []
    redactions = 0
    calls = {e.tool_call_id for e in entries if e.kind == "tool_result"}

    def clean(text: str) -> str:
        nonlocal redactions
        out, kinds = redact(text)
        redactions += len(kinds)
        return out

    for e in entries:
        if e.derived or e.kind in ("reasoning", "event") or e.role in ("system", "developer"):
            continue
        if e.kind == "message":
            item: dict[str, Any] = {
                "seq": e.seq,
                "role": e.role,
                "kind": "message",
                "text": clean(e.text),
            }
            blocks = e.content.get("blocks")
            images = (
                [
                    b
                    for b in blocks
                    if isinstance(b, dict)
                    and b.get("type") in ("image", "image_url", "document", "file")
                ]
                if isinstance(blocks, list)
                else []
            )
            if images:
                item["attachments"] = [str(b.get("type")) for b in images]
            if item["text"] or images:
                items.append(item)
        elif e.kind == "tool_call":
            items.append(
                {
                    "seq": e.seq,
                    "role": "assistant",
                    "kind": "tool_call",
                    "tool": e.tool_name,
                    "text": clean(_clip(_args_text(e), 2000)),
                    "status": "returned" if e.tool_call_id in calls else "did not complete",
                }
            )
        elif e.kind == "tool_result":
            receipt = receipts.get(e.entry_hash)
            text = e.text
            item = {
                "seq": e.seq,
                "role": "tool",
                "kind": "tool_result",
                "tool": e.tool_name,
                "is_error": e.is_error,
            }
            if receipt is not None:
                item["text"] = clean(str(receipt.get("preview", "")))
                item["truncated"] = {"tokens": (receipt.get("original_size") or {}).get("tokens")}
            elif count is not None and count(text) > preview_tokens_over:
                item["text"] = clean(make_preview(text, media_type_of(text)))
                item["truncated"] = {"tokens": count(text)}
            else:
                item["text"] = clean(text)
            items.append(item)
    interrupted = [e.seq for e in entries if e.kind == "tool_call" and e.tool_call_id not in calls]
    return {"items": items, "interrupted": interrupted, "redactions": redactions}


# ----------------------------------------------------------------------- offline ledger


def offline_fold(
    entries: Sequence[EntryView], *, upto: int | None = None
) -> tuple[dict[str, Any], int]:
    """The ledger one mechanical fold over the complete rounds up to ``upto`` would give.

    For pure callers with no database (benchmarks, tests, previews): the same pins and
    mechanical tool outcomes that :func:`ledger_app.services.ledger_fold` writes, judged by
    the reducer, in one delta. Returns ``(state, covered_upto)``; ``(empty, 0)`` when no
    complete round ends at or before ``upto``.
    """
    limit = upto if upto is not None else (entries[-1].seq if entries else 0)
    head = entries[-1].seq if entries else 0
    rounds = [r for r in group_rounds(entries) if r.last_seq <= limit]
    if rounds:
        rounds[-1].at_tail = rounds[-1].last_seq == head
    end = complete_prefix_end(rounds)
    if end is None:
        return copy.deepcopy(reducer.EMPTY_STATE), 0
    covered = [e for e in entries if e.seq <= end]
    ops = [{"op": "add", "fact": pin_fact(v)} for v in covered if is_pin_source(v)]
    ops += MechanicalWriter().propose(covered, reducer.EMPTY_STATE)
    evidence = {
        e.entry_hash: {
            "seq": e.seq,
            "kind": e.kind,
            "role": e.role,
            "is_error": e.is_error,
            "derived": e.derived,
            "fold": 1,
        }
        for e in covered
    }
    delta = {
        "fold": 1,
        "revision": head,
        "evidence": evidence,
        "required_pins": required_pins(covered),
        "ops": ops,
    }
    return reducer.apply_delta(copy.deepcopy(reducer.EMPTY_STATE), delta).state, end
