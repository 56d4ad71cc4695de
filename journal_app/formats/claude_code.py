"""Importer for Claude Code session JSONL (``~/.claude/projects/<proj>/<session>.jsonl``).

Pure module. Rules follow ``tests/fixtures/corpus/FORMATS.md`` section 1:

* Every ``user``/``assistant`` record holds one Anthropic message (``message``); its
  ``content`` is a string or a list of blocks. Each block becomes one entry, in source
  order: ``text`` -> ``message``, ``tool_use`` -> ``tool_call``, ``tool_result`` ->
  ``tool_result``, ``thinking`` -> ``reasoning`` (``redacted_thinking`` -> reasoning with
  ``{"encrypted": data}``), ``image`` and unknown blocks -> ``message`` with
  ``content["blocks"]``.
* One API message is split over several lines sharing ``message.id``. Its usage is put on
  the first entry of that id only (so it is counted once), and it is the usage of the
  *last* line of that id: Claude Code writes a streaming snapshot per line and the last one
  has the final ``output_tokens``. A line whose own usage differs from that keeps it in
  ``metadata["record_usage"]``.
* The record envelope (``uuid``, ``parentUuid``, ``sessionId``, ``timestamp``, ``cwd``,
  ``gitBranch``, ``version``, ``isSidechain``, ``requestId``, ...) goes into every entry's
  metadata; ``message`` fields other than content/usage/role go into
  ``metadata["message"]``; the side-channel ``toolUseResult`` goes into the metadata of
  the record's first entry.
* ``isMeta`` user records (local-command caveats) stay ``role="user"`` but are marked
  ``metadata["injected"] = True``: they are system-injected text that still reached the
  model. ``[Request interrupted by user...]`` texts are kept as the user messages they are.
* ``summary`` records -> derived ``event`` ``{"type": "summary", "summary", "leafUuid"}``;
  ``system`` records -> ``event`` (``compact_boundary`` is derived); user records with
  ``isCompactSummary`` -> derived user ``message``. ``file-history-snapshot`` records are
  not conversation: they are counted in ``ParsedSession.metadata["skipped"]``. Records of
  any other type become ``event`` entries carrying the whole record.
* A record whose ``uuid`` was already read: an identical repeat (a resumed session copies
  lines) is dropped and counted in ``metadata["duplicates"]``; a different record under
  that uuid is refused naming both lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from journal_app.formats.base import (
    EntryStream,
    FormatError,
    ParsedEntry,
    ParsedSession,
    Repeats,
    collect,
    message,
    record_repeats,
    tool_call,
)
from journal_app.formats.base import tool_result as tool_result_entry
from journal_app.formats.fields import object_arguments
from journal_app.formats.source import Source
from journal_app.formats.titles import request_title

NAME = "claude-code-jsonl"

_SKIPPED_TYPES = ("file-history-snapshot",)
_DETECT_TYPES = ("user", "assistant", "system", "summary", "file-history-snapshot")
_TITLE_SKIP_PREFIXES = ("<command-", "<local-command-", "[Request interrupted", "Caveat:")


def detect(source: Source) -> bool:
    """Return True when ``source`` looks like a Claude Code session.

    Looks at the first 20 records of a JSONL source: at least one must be a Claude Code
    record (``type`` user/assistant/system with ``sessionId`` and ``uuid``; a ``summary``
    with ``leafUuid``; a ``file-history-snapshot`` with ``snapshot``) and none may be a
    record of another shape. Never raises.
    """
    if source.kind != "jsonl":
        return False
    seen = False
    for _, obj in source.head(20):
        if not isinstance(obj, dict) or obj.get("type") not in _DETECT_TYPES:
            return False
        rtype = obj["type"]
        if rtype == "summary":
            seen = seen or "leafUuid" in obj
        elif rtype == "file-history-snapshot":
            seen = seen or "snapshot" in obj
        elif "sessionId" in obj and "uuid" in obj:
            seen = True
        else:
            return False
    return seen


def parse(source: Source) -> ParsedSession:
    """Parse a Claude Code session into a :class:`ParsedSession` (:func:`stream`, collected).

    Args:
        source: a ``kind="jsonl"`` source (``data = [(line_number, record), ...]``).

    Returns:
        The session: entries in source order, ``source_session_id`` = the first
        ``sessionId``, ``title`` = the first human prompt (80 chars at most),
        ``metadata["skipped"]`` = count of skipped records per type.

    Raises:
        FormatError: the source is not JSONL, a record is not an object or has no ``type``,
            a user/assistant record lacks ``message`` or has a null or mistyped
            ``message.content``, a block is malformed (no ``id``/``name`` on ``tool_use``,
            no ``tool_use_id`` on ``tool_result``, wrong types).
    """
    return collect(stream(source))


def stream(source: Source) -> EntryStream:
    """The entries of a Claude Code session one at a time, reading the file line by line.

    Two passes over the rows: the first keeps only each assistant
    message's final usage (a few numbers per message id), the second yields the entries.
    Returns the session fields (``entries=[]``) described in :func:`parse`; raises its errors.
    """
    path = source.path
    if source.kind != "jsonl":
        raise FormatError(path, "", "", "a Claude Code session must be a JSONL file")
    final_usage, rewound = _first_pass(source.rows(first_pass=True))
    skipped: dict[str, int] = {}
    session_id = ""
    title = ""
    usage_given: set[str] = set()
    call_names: dict[str, str] = {}
    repeats = Repeats(path, "uuid", "uuid")
    rewinds: dict[str, int] = {}

    for number, obj in source.rows():
        where = f"line {number}"
        if not isinstance(obj, dict):
            raise FormatError(path, where, "", f"record is not a JSON object ({_tname(obj)})")
        if isinstance(obj.get("uuid"), str) and not repeats.new(obj["uuid"], where, obj):
            continue
        rtype = obj.get("type")
        if not isinstance(rtype, str):
            raise FormatError(path, where, "type", "record has no string 'type'")
        if not session_id and isinstance(obj.get("sessionId"), str):
            session_id = obj["sessionId"]
        new: list[ParsedEntry] = []
        if rtype in _SKIPPED_TYPES:
            skipped[rtype] = skipped.get(rtype, 0) + 1
        elif rtype in ("user", "assistant"):
            new = _message_record(path, where, obj, final_usage, usage_given)
            for e in new:
                if e.kind == "tool_call":
                    call_names[e.tool_call_id] = e.tool_name
                elif e.kind == "tool_result":
                    e.tool_name = call_names.get(e.tool_call_id, "")
            title = title or request_title(new, skip=_TITLE_SKIP_PREFIXES)
        elif rtype == "summary":
            new = [_summary_record(where, obj)]
        elif rtype == "system":
            new = [_system_record(where, obj)]
        else:
            rest = {k: v for k, v in obj.items() if k != "type"}
            new = [_event(where, {"type": rtype, **rest}, {})]
        uuid = obj.get("uuid")
        branch = rewound.get(uuid) if isinstance(uuid, str) else None
        if branch:  # a rewound branch: its own journal branch, never the live context
            for e in new:
                e.branch = branch
            rewinds[branch] = rewinds.get(branch, 0) + len(new)
        yield from new

    metadata: dict[str, Any] = {"skipped": skipped}
    if rewinds:  # entries per rewound branch (journaled on branches of their own)
        metadata["rewound_branches"] = rewinds
    record_repeats(metadata, repeats)
    return ParsedSession(
        format=NAME,
        entries=[],
        title=title,
        source_session_id=session_id,
        metadata=metadata,
    )


def _tname(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _final_usage_by_message_id(rows: Iterable[tuple[int, Any]]) -> dict[str, Any]:
    """Map each assistant ``message.id`` to the usage of its last line (the final count)."""
    return _first_pass(rows)[0]


def _first_pass(rows: Iterable[tuple[int, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    """One read of the rows: each assistant ``message.id``'s final usage, and the branch of
    every record off the live path (:func:`_abandoned`); a few strings per record."""
    usage: dict[str, Any] = {}
    parents: dict[str, str | None] = {}
    prompts: set[str] = set()
    leaf = ""
    for _, obj in rows:
        if not isinstance(obj, dict):
            continue
        uuid = obj.get("uuid")
        if isinstance(uuid, str) and not obj.get("isSidechain"):
            parent = obj.get("parentUuid") or obj.get("logicalParentUuid")
            parents.setdefault(uuid, parent if isinstance(parent, str) else None)
            if obj.get("type") in ("user", "assistant"):
                leaf = uuid
            if _is_prompt(obj):
                prompts.add(uuid)
        if obj.get("type") != "assistant":
            continue
        msg = obj.get("message")
        if isinstance(msg, dict) and isinstance(msg.get("id"), str) and "usage" in msg:
            usage[msg["id"]] = msg["usage"]
    return usage, _abandoned(parents, leaf, prompts)


def _is_prompt(obj: dict[str, Any]) -> bool:
    """A user record the human typed (text, no tool result; not a harness ``isMeta`` one):
    the only record a rewind (edit-and-resend) starts a branch with."""
    if obj.get("type") != "user" or obj.get("isMeta"):
        return False
    msg = obj.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        return bool(content.strip())
    if isinstance(content, list):
        kinds = {b.get("type") for b in content if isinstance(b, dict)}
        return "tool_result" not in kinds and bool(kinds & {"text", "image"})
    return False


def _abandoned(parents: dict[str, str | None], leaf: str, prompts: set[str]) -> dict[str, str]:
    """``uuid -> branch name`` of the records on a rewound branch.

    The live path runs from the last user/assistant record (``leaf``) up its ``parentUuid``
    links (``logicalParentUuid`` across a compaction boundary). A rewind (edit-and-resend)
    leaves a *prompt* (:func:`_is_prompt`) off that path: as a sibling of a live record (its
    ancestors reach the live path), or as a second root (no parent, like the live path's own
    root: the first message edited). That prompt and everything under it belong to the branch
    ``rewound-<first 8 of its uuid>``. Other records off the path are not rewinds and stay on
    the live branch: Claude Code writes parallel tool calls as a small tree (a result's parent
    is the first call, a sibling of the second), and a record whose ancestry leaves the file
    (a missing link) is never guessed about.
    """
    live: set[str] = set()
    node: str | None = leaf
    root_live = None
    while node and node not in live:
        live.add(node)
        root_live = node
        node = parents.get(node)
    live_root_is_true = root_live is not None and parents.get(root_live) is None
    branch_of: dict[str, str | None] = {}  # uuid -> branch name, or None (stays live)
    for uuid in parents:
        if uuid in live or uuid in branch_of:
            continue
        chain: list[str] = []
        node, branch = uuid, None
        while node and node not in live and node not in branch_of and node in parents:
            chain.append(node)
            node = parents.get(node)
        if node in branch_of:
            branch = branch_of[node]
        # chain runs child -> ancestor; the first record off the path is its last element
        reached = node in live or (node is None and live_root_is_true)
        if branch is None and reached:
            for n in reversed(chain):  # from the fork down: the first prompt starts the branch
                if n in prompts:
                    branch = f"rewound-{n[:8]}"
                    start = chain.index(n)
                    for m in chain[: start + 1]:
                        branch_of[m] = branch
                    for m in chain[start + 1 :]:
                        branch_of.setdefault(m, None)
                    break
            else:
                for m in chain:
                    branch_of[m] = None
            continue
        for n in chain:
            branch_of[n] = branch
    return {u: b for u, b in branch_of.items() if b}


def _message_record(
    path: Any,
    where: str,
    obj: dict[str, Any],
    final_usage: dict[str, Any],
    usage_given: set[str],
) -> list[ParsedEntry]:
    """Turn one user/assistant record into its entries (one per content block)."""
    rtype = obj["type"]
    msg = obj.get("message")
    if msg is None:
        raise FormatError(path, where, "message", f"{rtype} record has no 'message'")
    if not isinstance(msg, dict):
        raise FormatError(path, where, "message", f"expected an object, got {_tname(msg)}")
    content = msg.get("content")
    if content is None:
        raise FormatError(path, where, "message.content", "content is null")
    if not isinstance(content, str | list):
        raise FormatError(
            path, where, "message.content", f"expected a string or a list, got {_tname(content)}"
        )
    role = msg.get("role", rtype)
    if role not in ("user", "assistant"):
        raise FormatError(path, where, "message.role", f"unexpected role {role!r}")

    envelope = {k: v for k, v in obj.items() if k not in ("type", "message", "toolUseResult")}
    msg_extra = {k: v for k, v in msg.items() if k not in ("content", "usage", "role")}
    if msg_extra:
        envelope["message"] = msg_extra
    if rtype != role:
        envelope["record_type"] = rtype
    injected = role == "user" and bool(obj.get("isMeta"))
    derived = bool(obj.get("isCompactSummary"))
    if injected:
        envelope["injected"] = True

    if isinstance(content, str):
        entries = [message(role, content, source_ref=where, metadata=dict(envelope))]
    else:
        entries = [
            _block_entry(path, where, f"message.content[{i}]", role, block, envelope)
            for i, block in enumerate(content)
        ]
    if not entries:
        # An empty content list still happened: keep it as an empty message.
        entries = [message(role, "", source_ref=where, metadata=dict(envelope))]
    for e in entries:
        e.derived = derived

    if "toolUseResult" in obj:
        entries[0].metadata["toolUseResult"] = obj["toolUseResult"]
    if "usage" in msg:
        msg_id = msg.get("id")
        chosen = final_usage.get(msg_id, msg["usage"]) if isinstance(msg_id, str) else msg["usage"]
        if chosen != msg["usage"]:
            entries[0].metadata["record_usage"] = msg["usage"]
        if not isinstance(msg_id, str) or msg_id not in usage_given:
            entries[0].usage = chosen
            if isinstance(msg_id, str):
                usage_given.add(msg_id)
    return entries


def _block_entry(
    path: Any, where: str, field: str, role: str, block: Any, envelope: dict[str, Any]
) -> ParsedEntry:
    """Turn one content block into an entry; unknown blocks are kept whole in ``blocks``."""
    if not isinstance(block, dict):
        raise FormatError(path, where, field, f"block is not an object ({_tname(block)})")
    btype = block.get("type")
    metadata = dict(envelope)

    def extra(*known: str) -> None:
        rest = {k: v for k, v in block.items() if k not in ("type", *known)}
        if rest:
            metadata["block"] = rest

    if btype == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise FormatError(
                path, where, f"{field}.text", f"expected a string, got {_tname(text)}"
            )
        extra("text")
        return message(role, text, source_ref=where, metadata=metadata)
    if btype == "tool_use":
        call_id = _required_str(path, where, field, block, "id")
        name = _required_str(path, where, field, block, "name")
        extra("id", "name", "input")
        return tool_call(
            call_id, name, _input(block.get("input")), source_ref=where, metadata=metadata
        )
    if btype == "tool_result":
        call_id = _required_str(path, where, field, block, "tool_use_id")
        output, blocks = _result_output(path, where, f"{field}.content", block.get("content"))
        extra("tool_use_id", "content", "is_error")
        entry = tool_result_entry(
            call_id,
            output,
            is_error=bool(block.get("is_error")),
            source_ref=where,
            metadata=metadata,
        )
        if blocks:
            entry.content["blocks"] = blocks
        return entry
    if btype == "thinking":
        text = block.get("thinking", "")
        if not isinstance(text, str):
            raise FormatError(
                path, where, f"{field}.thinking", f"expected a string, got {_tname(text)}"
            )
        extra("thinking")
        return ParsedEntry(
            kind="reasoning",
            role="assistant",
            content={"text": text},
            metadata=metadata,
            source_ref=where,
        )
    if btype == "redacted_thinking":
        extra("data")
        return ParsedEntry(
            kind="reasoning",
            role="assistant",
            content={"encrypted": block.get("data", "")},
            metadata=metadata,
            source_ref=where,
        )
    # image, document and any block type the journal does not model: keep it whole.
    return ParsedEntry(
        kind="message",
        role=role,
        content={"text": "", "blocks": [block]},
        metadata=metadata,
        source_ref=where,
    )


def _required_str(path: Any, where: str, field: str, block: dict[str, Any], key: str) -> str:
    value = block.get(key)
    if not isinstance(value, str) or not value:
        raise FormatError(
            path, where, f"{field}.{key}", f"missing or not a string ({_tname(value)})"
        )
    return value


def _input(value: Any) -> Any:
    """A ``tool_use`` block's ``input``: :func:`object_arguments`, ``{}`` when null."""
    return {} if value is None else object_arguments(value)


def _result_output(path: Any, where: str, field: str, value: Any) -> tuple[str, list[Any]]:
    """``tool_result.content`` as text: a string, or text blocks joined with newlines.

    Returns ``(text, non_text_blocks)``; non-text blocks (images) are kept separately.
    """
    if value is None:
        return "", []
    if isinstance(value, str):
        return value, []
    if not isinstance(value, list):
        raise FormatError(path, where, field, f"expected a string or a list, got {_tname(value)}")
    texts: list[str] = []
    others: list[Any] = []
    for i, item in enumerate(value):
        if isinstance(item, dict) and item.get("type") == "text":
            if not isinstance(item.get("text"), str):
                raise FormatError(path, where, f"{field}[{i}].text", "expected a string")
            texts.append(item["text"])
        else:
            others.append(item)
    return "\n".join(texts), others


def _summary_record(where: str, obj: dict[str, Any]) -> ParsedEntry:
    content = {
        "type": "summary",
        "summary": obj.get("summary", ""),
        "leafUuid": obj.get("leafUuid"),
    }
    rest = {k: v for k, v in obj.items() if k not in ("type", "summary", "leafUuid")}
    entry = _event(where, content, rest)
    entry.derived = True
    return entry


def _system_record(where: str, obj: dict[str, Any]) -> ParsedEntry:
    """``system`` records: ``compact_boundary`` (derived) and other runtime notices."""
    subtype = obj.get("subtype") or "system"
    content: dict[str, Any] = {"type": subtype}
    for key in ("content", "level", "compactMetadata"):
        if key in obj:
            content[key] = obj[key]
    rest = {k: v for k, v in obj.items() if k not in ("type", "subtype", *content)}
    entry = _event(where, content, rest)
    entry.derived = subtype == "compact_boundary"
    return entry


def _event(where: str, content: dict[str, Any], metadata: dict[str, Any]) -> ParsedEntry:
    return ParsedEntry(
        kind="event", role="runtime", content=content, metadata=metadata, source_ref=where
    )
