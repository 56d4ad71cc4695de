"""The request's parts and their assembly in a target format (docs/design.md section 6).

Pure module: no Django, no database. A :class:`Part` is one unit of the request, neutral to
the format; :func:`round_parts` turns one API round of the journal into parts (verbatim);
:func:`assemble` turns parts into OpenAI Chat Completions messages or Anthropic Messages
(``system`` apart, ``tool_use``/``tool_result`` blocks), recording which journal entries
each message came from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from journal_app.rounds import Round
from ledger_app.context.entry_text import args_text
from ledger_app.entry_view import EntryView
from ledger_app.pin_facts import is_pin_source

EMPTY_OUTPUT = "(empty output)"
#: The user turn an Anthropic request opens with when the journal's first kept turn is the
#: assistant's (the Messages API requires a user turn first).
CONTINUED = "[the conversation continues from the journal; earlier turns are not shown]"


@dataclass
class Part:
    """One unit of the request, neutral to the target format.

    ``kind``: ``text`` (a message's text, with ``blocks`` for images), ``call``,
    ``result`` or ``thinking`` (an Anthropic block in ``blocks``, verbatim). ``form`` says
    how a result is shown: ``verbatim``, ``receipt`` or ``shrunk``. ``pin`` marks an authoritative message (never changed, never redacted).
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


def anthropic_ids(entries: Sequence[EntryView]) -> dict[str, str]:
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
            if p.kind == "thinking":
                continue  # Anthropic's blocks only (ledger_app.context.thinking)
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
            out.system += [{"type": "text", "text": t} for t in system_texts(p)]
            continue
        if p.kind == "thinking" and p.blocks:
            add("assistant", dict(p.blocks[0]), p)  # verbatim, signature included
        elif p.kind == "call":
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


def system_texts(p: Part) -> list[str]:
    """The Anthropic ``system`` blocks of a system or developer part: one per text block the
    client sent (the journal keeps them in ``content["blocks"]``, its text their join with
    ``"\n"``), so each keeps its place and its ``cache_control`` marker can go back on it
    (:mod:`proxy_app.caching`); one block when the part's text is not that join (a pin
    shown otherwise) or a block is empty."""
    blocks = p.entry.content.get("blocks") if p.entry is not None else None
    if not isinstance(blocks, list) or len(blocks) < 2:
        return [p.text]
    texts: list[str] = []
    for b in blocks:
        if not isinstance(b, dict) or b.get("type") != "text":
            return [p.text]
        text = b.get("text")
        if not isinstance(text, str) or not text:
            return [p.text]
        texts.append(text)
    return texts if "\n".join(texts) == p.text else [p.text]


def starts_with_assistant(parts: Sequence[Part]) -> bool:
    """Whether the first turn after system/developer text is not the user's (Anthropic
    needs a user turn first)."""
    first = next(
        (p for p in parts if not (p.kind == "text" and p.role in ("system", "developer"))), None
    )
    return first is not None and first.role in ("assistant", "tool") and first.kind != "result"


def round_notes(r: Round, by_seq: Mapping[int, EntryView]) -> list[str]:
    """Notes on what :func:`round_parts` leaves out of round ``r``: derived records (a summary
    is never a source) and results with no call in their round. Reads the entries' kind,
    call id and ``derived`` flag only (a round of the folded prefix read as metadata has its
    notes without its text)."""
    notes: list[str] = []
    calls = {by_seq[s].tool_call_id for s in r.seqs if by_seq[s].kind == "tool_call"}
    for s in r.seqs:
        e = by_seq[s]
        if e.derived:
            notes.append(f"seq {s}: derived record left out (a summary is never a source)")
        elif e.kind == "tool_result" and e.tool_call_id not in calls:
            notes.append(f"seq {s}: tool result with no call in its round left out")
    return notes


def round_parts(
    r: Round, by_seq: Mapping[int, EntryView], interrupted: set[str]
) -> tuple[list[Part], list[str]]:
    """The verbatim parts of one round, and notes on what was left out (:func:`round_notes`)."""
    parts: list[Part] = []
    notes = round_notes(r, by_seq)
    calls = {by_seq[s].tool_call_id for s in r.seqs if by_seq[s].kind == "tool_call"}
    for s in r.seqs:
        e = by_seq[s]
        if e.derived:
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
                    text=args_text(e),
                    entry=e,
                    call_id=e.tool_call_id,
                    name=e.tool_name or "tool",
                )
            )
        elif e.kind == "tool_result":
            if e.tool_call_id not in calls:
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
