"""Importer for OpenCode session exports (corpus FORMATS.md section 7).

Pure module. The source is a FOLDER holding ``sessions.json``, ``messages.json`` and
``parts.json`` (and optionally ``session_messages.json``): JSON arrays exported from
OpenCode's SQLite store, where every row's ``data`` is a JSON-encoded *string*.

One export may hold several sessions. They are flattened into one journal: sessions in
``time_created`` (then id) order, each session's entries contiguous; every entry's
metadata carries ``session_id`` and ``message_id``. The session rows themselves (title,
directory, permission, model...) go to ``ParsedSession.metadata["sessions"]``.

Within a session, messages are ordered by ``time_created`` then id, and session-level
rows of ``session_messages.json`` (``agent-switched``, ``model-switched``) are merged in
by ``time_created`` (a row sorts before a message with the same time) as runtime
``event`` entries. Parts are ordered by ``time_created`` then id within their message:

* ``text`` -> ``message`` with the message's ``data.role`` (also whitespace-only text:
  nothing is dropped); ``reasoning`` -> ``reasoning``.
* ``tool`` -> a ``tool_call`` (``state.input``) then a ``tool_result`` (``state.output``,
  or ``state.error`` with ``is_error=True`` when ``state.status == "error"``). A part
  still ``pending``/``running`` gives the call only (an interrupted call).
* ``step-start`` / ``step-finish`` -> no entry; they are kept in the first entry's
  ``metadata["steps"]``. That entry's ``usage`` holds the message's tokens
  (``data.tokens``, else the sum of the step-finish tokens) and cost.
* ``compaction`` -> a derived ``event``; any other part type -> an ``event`` whose
  content is the part's data.

A row repeated under the same id (a part exported twice) is read once and counted in
``metadata["duplicates"]``; a different row under an id already used is refused naming
both: a repeated tool part never becomes a second call ``<callID>#2``.

User messages are authoritative and not marked ``injected``: OpenCode stores the typed
prompt as the text part (``synthetic`` text parts keep that flag in metadata).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from journal_app.formats.base import (
    FormatError,
    ParsedEntry,
    ParsedSession,
    Repeats,
    message,
    record_repeats,
    tool_call,
    tool_result,
)
from journal_app.formats.openai_chat import unique_call_id
from journal_app.formats.source import Source, loads, read_json_file
from journal_app.formats.titles import short_title

NAME = "opencode-export"

REQUIRED_FILES = ("sessions.json", "messages.json", "parts.json")
EVENTS_FILE = "session_messages.json"
ROLES = ("user", "assistant", "system")
_OPEN_STATUSES = ("pending", "running")


def detect(source: Source) -> bool:
    """Return True for a folder holding ``sessions.json``, ``messages.json``, ``parts.json``."""
    if source.kind != "dir":
        return False
    return all((source.path / name).is_file() for name in REQUIRED_FILES)


def _rows(path: Path, required: tuple[str, ...], decode: bool = True) -> list[dict[str, Any]]:
    """Read one export file: a list of objects with ``required`` keys; ``data`` decoded."""
    value = read_json_file(path)
    if not isinstance(value, list):
        raise FormatError(path, "", "", f"expected a JSON array, got {type(value).__name__}")
    rows = []
    for i, row in enumerate(value):
        where = f"index {i}"
        if not isinstance(row, dict):
            raise FormatError(path, where, "", f"expected an object, got {type(row).__name__}")
        for key in required:
            if key not in row:
                raise FormatError(path, where, key, "field is missing")
        for key in ("id", "session_id", "message_id"):
            if key in required and not isinstance(row[key], str):
                raise FormatError(path, where, key, "expected a string")
        if "time_created" in required and not isinstance(row["time_created"], int | float):
            raise FormatError(path, where, "time_created", "expected a number (epoch ms)")
        out = dict(row)
        out["_where"] = where
        if decode and "data" in row:
            raw = row["data"]
            if raw is None:
                raise FormatError(path, where, "data", "content is null")
            if not isinstance(raw, str):
                raise FormatError(path, where, "data", "expected a JSON-encoded string")
            try:
                data = loads(raw)
            except ValueError as exc:
                raise FormatError(path, where, "data", f"not valid JSON ({exc})") from None
            if not isinstance(data, dict):
                raise FormatError(path, where, "data", "expected a JSON object")
            out["data"] = data
        rows.append(out)
    return rows


def _row_meta(row: dict[str, Any], *skip: str) -> dict[str, Any]:
    """A row's top-level fields other than ``data`` and ``skip``, for metadata."""
    return {k: v for k, v in row.items() if k not in ("data", "_where", *skip)}


def _usage(data: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Provider usage of one message: its ``tokens`` (or the step-finish sum) and cost."""
    tokens = data.get("tokens")
    cost = data.get("cost")
    if not isinstance(tokens, dict):
        finishes = [s for s in steps if isinstance(s.get("tokens"), dict)]
        if not finishes:
            return None
        tokens = {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
        cost = 0
        for s in finishes:
            t = s["tokens"]
            for key in ("input", "output", "reasoning"):
                tokens[key] += t.get(key) or 0
            for key in ("read", "write"):
                tokens["cache"][key] += (t.get("cache") or {}).get(key) or 0
            cost += s.get("cost") or 0
    raw_cache = tokens.get("cache")
    cache: dict[str, Any] = raw_cache if isinstance(raw_cache, dict) else {}
    usage = {
        "input_tokens": tokens.get("input"),
        "output_tokens": tokens.get("output"),
        "reasoning_tokens": tokens.get("reasoning"),
        "cache_read_tokens": cache.get("read"),
        "cache_write_tokens": cache.get("write"),
        "cost": cost,
    }
    return {k: v for k, v in usage.items() if v is not None}


def _tool_entries(
    path: Path,
    part: dict[str, Any],
    base: dict[str, Any],
    used: dict[str, int],
) -> list[ParsedEntry]:
    where = part["_where"]
    data = part["data"]
    call_id = data.get("callID")
    if not isinstance(call_id, str) or not call_id:
        raise FormatError(path, where, "data.callID", "tool part has no callID")
    name = data.get("tool")
    if not isinstance(name, str) or not name:
        raise FormatError(path, where, "data.tool", "tool part has no tool name")
    state = data.get("state")
    if not isinstance(state, dict):
        raise FormatError(path, where, "data.state", "expected an object")
    status = state.get("status")
    if not isinstance(status, str):
        raise FormatError(path, where, "data.state.status", "expected a string")
    journal_id = unique_call_id(call_id, used)
    ids = {} if journal_id == call_id else {"source_tool_call_id": call_id}
    part_extra = {k: v for k, v in data.items() if k not in ("type", "callID", "tool", "state")}
    call_meta = {**base, **ids, **part_extra, "status": status}
    state_rest = {k: v for k, v in state.items() if k not in ("status", "input", "output", "error")}
    call = tool_call(journal_id, name, state.get("input", {}), source_ref=where, metadata=call_meta)
    if "input" not in state:
        call_meta["input_missing"] = True
    if status in _OPEN_STATUSES:
        call_meta["interrupted"] = True
        call_meta["state"] = {k: v for k, v in state.items() if k not in ("status", "input")}
        return [call]
    is_error = status == "error"
    key = "error" if is_error else "output"
    if status not in ("completed", "error"):
        raise FormatError(path, where, "data.state.status", f"unknown tool status {status!r}")
    output = state.get(key)
    if output is None:
        raise FormatError(path, where, f"data.state.{key}", "content is null")
    if not isinstance(output, str):
        raise FormatError(path, where, f"data.state.{key}", "expected a string")
    result_meta = {**base, **ids, "status": status, **state_rest}
    for other in ("output", "error"):
        if other != key and other in state:
            result_meta[other] = state[other]
    result = tool_result(
        journal_id, output, is_error=is_error, name=name, source_ref=where, metadata=result_meta
    )
    return [call, result]


def _message_entries(
    folder: Path,
    msg: dict[str, Any],
    parts: list[dict[str, Any]],
    used: dict[str, int],
) -> list[ParsedEntry]:
    """Entries of one message row and its parts (already in order)."""
    mpath = folder / "messages.json"
    ppath = folder / "parts.json"
    data = msg["data"]
    role = data.get("role")
    if role is None:
        raise FormatError(mpath, msg["_where"], "data.role", "field is missing")
    if role not in ROLES:
        raise FormatError(mpath, msg["_where"], "data.role", f"unknown role {role!r}")
    entries: list[ParsedEntry] = []
    steps: list[dict[str, Any]] = []
    for part in parts:
        pdata = part["data"]
        ptype = pdata.get("type")
        where = part["_where"]
        if not isinstance(ptype, str):
            raise FormatError(ppath, where, "data.type", "part has no type")
        base = {
            "session_id": msg["session_id"],
            "message_id": msg["id"],
            "part_id": part["id"],
            "time_created": part.get("time_created"),
            "time_updated": part.get("time_updated"),
            **_row_meta(part, "id", "session_id", "message_id", "time_created", "time_updated"),
        }
        ref = f"parts.json {where}"
        if ptype in ("text", "reasoning"):
            text = pdata.get("text")
            if text is None:
                raise FormatError(ppath, where, "data.text", "content is null")
            if not isinstance(text, str):
                raise FormatError(ppath, where, "data.text", "expected a string")
            meta = {**base, **{k: v for k, v in pdata.items() if k not in ("type", "text")}}
            if ptype == "text":
                entry = message(role, text, source_ref=ref, metadata=meta)
            else:
                entry = ParsedEntry(
                    kind="reasoning",
                    role="assistant",
                    content={"text": text},
                    source_ref=ref,
                    metadata=meta,
                )
            entries.append(entry)
        elif ptype == "tool":
            made = _tool_entries(ppath, part, base, used)
            for e in made:
                e.source_ref = ref
            entries.extend(made)
        elif ptype in ("step-start", "step-finish"):
            steps.append({**_row_meta(part, "session_id", "message_id"), **pdata})
        else:
            entries.append(
                ParsedEntry(
                    kind="event",
                    role="runtime",
                    content=dict(pdata),
                    derived=ptype == "compaction",
                    source_ref=ref,
                    metadata=base,
                )
            )
    msg_meta = {
        "message": {k: v for k, v in data.items() if k not in ("role", "error")},
        "message_time_created": msg["time_created"],
        **{
            f"message_{k}": v for k, v in _row_meta(msg, "id", "session_id", "time_created").items()
        },
    }
    if not entries:
        entries.append(
            ParsedEntry(
                kind="event",
                role="runtime",
                content={"type": "empty-message", "role": role},
                source_ref=f"messages.json {msg['_where']}",
                metadata={"session_id": msg["session_id"], "message_id": msg["id"]},
            )
        )
    first = entries[0]
    first.metadata.update(msg_meta)
    if steps:
        first.metadata["steps"] = steps
    first.usage = _usage(data, steps)
    if "error" in data:
        entries.append(
            ParsedEntry(
                kind="event",
                role="runtime",
                content={"type": "message-error", "error": data["error"]},
                source_ref=f"messages.json {msg['_where']}",
                metadata={"session_id": msg["session_id"], "message_id": msg["id"]},
            )
        )
    return entries


def _session_event(row: dict[str, Any]) -> ParsedEntry:
    content = {"type": row.get("type") if isinstance(row.get("type"), str) else "session-event"}
    content.update({k: v for k, v in row["data"].items() if k != "type"})
    if "type" in row["data"]:
        content["data_type"] = row["data"]["type"]
    return ParsedEntry(
        kind="event",
        role="runtime",
        content=content,
        source_ref=f"{EVENTS_FILE} {row['_where']}",
        metadata={"event_id": row["id"], **_row_meta(row, "id", "type")},
    )


def _sort_key(row: dict[str, Any]) -> tuple[Any, str]:
    return (row["time_created"], row["id"])


_LANE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _lane_names(session_rows: list[dict[str, Any]]) -> dict[str, str]:
    """One lane per OpenCode session of a multi-session export: its slug, else its id.

    An export bundles separate conversations; each keeps its own chain and ledger (one lane
    each) so that no conversation's instructions are pinned into another's ledger.
    """
    slugs = [str(s.get("slug") or "") for s in session_rows]
    usable = len(set(slugs)) == len(slugs) and all(_LANE.match(x) for x in slugs)
    return {
        s["id"]: (slug if usable else str(s["id"]))
        for s, slug in zip(session_rows, slugs, strict=True)
    }


def parse(source: Source) -> ParsedSession:
    """Parse an OpenCode export folder into one flattened :class:`ParsedSession`.

    Args:
        source: a ``kind="dir"`` source (see :func:`detect`).

    Returns:
        The session: entries of all sessions in session time order;
        ``metadata["sessions"]`` lists the session rows (``permission``/``model`` decoded
        from their JSON strings into ``permission_decoded``/``model_decoded`` when they
        parse); ``source_session_id`` is the session id when the export holds one session,
        else ``""``; ``title`` is the first user text, short.

    Raises:
        FormatError: naming the file (e.g. ``parts.json``), ``index N`` and the field: a
            missing file, a row that is not an object or lacks ``id``/``session_id``/
            ``data``/``time_created``, a ``data`` string that is not JSON, an unknown
            role, a part whose message is not in ``messages.json``, a tool part without
            ``callID``/``tool``/``state``, a finished tool part without its output.
    """
    folder = source.path
    if source.kind != "dir":
        raise FormatError(folder, "", "", "an OpenCode export is a folder")
    for name in REQUIRED_FILES:
        if not (folder / name).is_file():
            raise FormatError(folder / name, "", "", "no such file in the export folder")
    sessions = _rows(folder / "sessions.json", ("id", "time_created"), decode=False)
    messages = _rows(folder / "messages.json", ("id", "session_id", "time_created", "data"))
    parts = _rows(folder / "parts.json", ("id", "message_id", "session_id", "time_created", "data"))
    events: list[dict[str, Any]] = []
    if (folder / EVENTS_FILE).is_file():
        events = _rows(folder / EVENTS_FILE, ("id", "session_id", "time_created", "data"))
    repeats = []
    for name, what in (
        ("messages.json", "message id"),
        ("parts.json", "part id"),
        (EVENTS_FILE, "event id"),
    ):
        rows = {"messages.json": messages, "parts.json": parts, EVENTS_FILE: events}[name]
        seen = Repeats(folder / name, what, "id")
        kept = [
            r for r in rows if seen.new(r["id"], r["_where"], _row_meta(r) | {"data": r["data"]})
        ]
        rows[:] = kept
        seen.dropped = [f"{name} {x}" for x in seen.dropped]
        repeats.append(seen)

    msg_ids = {m["id"] for m in messages}
    parts_of: dict[str, list[dict[str, Any]]] = {}
    for p in parts:
        if p["message_id"] not in msg_ids:
            raise FormatError(
                folder / "parts.json", p["_where"], "message_id", "no such message in messages.json"
            )
        parts_of.setdefault(p["message_id"], []).append(p)

    known = {s["id"] for s in sessions}
    session_rows = [_row_meta(s) for s in sessions]
    for row in messages + events:
        if row["session_id"] not in known:  # rows of a session missing from sessions.json
            known.add(row["session_id"])
            session_rows.append(
                {"id": row["session_id"], "time_created": row["time_created"], "missing": True}
            )
    for s in session_rows:
        for key in ("permission", "model"):
            if isinstance(s.get(key), str):
                try:
                    s[f"{key}_decoded"] = loads(s[key])
                except ValueError:
                    pass
    session_rows.sort(key=_sort_key)

    entries: list[ParsedEntry] = []
    used: dict[str, int] = {}
    title = ""
    lanes = _lane_names(session_rows)
    for s in session_rows:
        timeline = [
            (m["time_created"], 1, m["id"], m) for m in messages if m["session_id"] == s["id"]
        ]
        timeline += [
            (e["time_created"], 0, e["id"], e) for e in events if e["session_id"] == s["id"]
        ]
        timeline.sort(key=lambda t: t[:3])
        for _, rank, _, row in timeline:
            if rank == 0:
                entries.append(_session_event(row))
                continue
            made = _message_entries(
                folder, row, sorted(parts_of.get(row["id"], []), key=_sort_key), used
            )
            if not title and row["data"].get("role") == "user":
                text = next((e.content["text"] for e in made if e.kind == "message"), "")
                title = short_title(text)
            entries.extend(made)
        if len(session_rows) > 1:
            for e in entries:
                if not e.lane:
                    e.lane = lanes[s["id"]]
    return ParsedSession(
        format=NAME,
        entries=entries,
        title=title,
        source_session_id=session_rows[0]["id"] if len(session_rows) == 1 else "",
        metadata=_with_repeats({"sessions": session_rows}, repeats),
    )


def _with_repeats(metadata: dict[str, Any], repeats: list[Repeats]) -> dict[str, Any]:
    record_repeats(metadata, *repeats)
    return metadata
