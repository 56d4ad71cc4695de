"""OpenCode export importer (FORMATS.md section 7): corpus folder counts, synthetic folders."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from journal_app.formats import FormatError, parse_path
from journal_app.formats import opencode as fmt
from journal_app.formats.source import read_source

FOLDER = "opencode-export/khala-sessions"


def _load(folder: Path, name: str) -> list[dict]:
    rows = json.loads((folder / name).read_text(encoding="utf-8"))
    for row in rows:
        if isinstance(row.get("data"), str):
            row["data"] = json.loads(row["data"])
    return rows


def test_corpus_counts_match_the_raw_files(corpus):
    folder = corpus / FOLDER
    sessions = _load(folder, "sessions.json")
    messages = _load(folder, "messages.json")
    parts = _load(folder, "parts.json")
    events = _load(folder, "session_messages.json")
    types = Counter(p["data"]["type"] for p in parts)
    tools = [p["data"] for p in parts if p["data"]["type"] == "tool"]
    statuses = Counter(t["state"]["status"] for t in tools)
    assert len(sessions) == 5 and len(messages) == 44
    assert types == {"tool": 110, "text": 44, "step-start": 39, "step-finish": 39}
    assert statuses == {"completed": 108, "error": 2}
    raw_unanswered = sum(1 for t in tools if t["state"]["status"] in ("pending", "running"))

    s = parse_path(folder)
    assert s.format == "opencode-export"
    kinds = Counter(e.kind for e in s.entries)
    assert kinds == {
        "message": types["text"],
        "tool_call": types["tool"],
        "tool_result": types["tool"] - raw_unanswered,
        "event": len(events),
    }
    role_of = {m["id"]: m["data"]["role"] for m in messages}
    texts = [e for e in s.entries if e.kind == "message"]
    assert Counter(e.role for e in texts) == Counter(
        role_of[p["message_id"]] for p in parts if p["data"]["type"] == "text"
    )
    assert Counter(e.role for e in texts) == {"user": 5, "assistant": 39}

    errors = [e for e in s.entries if e.kind == "tool_result" and e.content["is_error"]]
    raw_errors = [t["state"]["error"] for t in tools if t["state"]["status"] == "error"]
    assert sorted(e.content["output"] for e in errors) == sorted(raw_errors)
    assert all(e.content["output"].startswith("File not found") for e in errors)

    calls = [e.tool_call_id for e in s.entries if e.kind == "tool_call"]
    answered = {e.tool_call_id for e in s.entries if e.kind == "tool_result"}
    assert len(set(calls)) == len(calls)
    assert len([c for c in calls if c not in answered]) == raw_unanswered == 0
    # Call and result of a tool part are adjacent, call first.
    for i, e in enumerate(s.entries):
        if e.kind == "tool_result":
            assert s.entries[i - 1].kind == "tool_call"
            assert s.entries[i - 1].tool_call_id == e.tool_call_id


def test_sessions_are_flattened_in_time_order(corpus):
    folder = corpus / FOLDER
    sessions = _load(folder, "sessions.json")
    messages = _load(folder, "messages.json")
    s = parse_path(folder)
    order = [r["id"] for r in sorted(sessions, key=lambda r: (r["time_created"], r["id"]))]
    assert [r["id"] for r in s.metadata["sessions"]] == order
    assert s.metadata["sessions"][0]["title"] == "khala-opencode-adoption"
    assert s.source_session_id == ""  # several sessions in this export
    # Every entry names its session; sessions are contiguous and in session order.
    seen = [e.metadata["session_id"] for e in s.entries]
    runs = [sid for i, sid in enumerate(seen) if i == 0 or seen[i - 1] != sid]
    assert runs == order
    # Messages keep time order within a session.
    msg_time = {m["id"]: (m["time_created"], m["id"]) for m in messages}
    for sid in order:
        ids = [
            e.metadata["message_id"]
            for e in s.entries
            if e.metadata.get("session_id") == sid and "message_id" in e.metadata
        ]
        times = [msg_time[i] for i in ids]
        assert times == sorted(times)
    assert s.title.startswith('"Read docs/inference/2026-06-25-khala-inference-gtm-push.md')
    assert len(s.title) <= 80


def test_steps_usage_and_metadata_are_kept(corpus):
    folder = corpus / FOLDER
    messages = _load(folder, "messages.json")
    s = parse_path(folder)
    firsts = [e for e in s.entries if "message" in e.metadata]
    assert len(firsts) == len(messages)  # one first entry per message carries its data
    assistants = [e for e in firsts if e.metadata["message"].get("tokens") is not None]
    assert len(assistants) == 39
    assert all(e.usage and e.usage["input_tokens"] == 0 for e in assistants)
    assert all(len(e.metadata["steps"]) == 2 for e in assistants)
    assert {st["type"] for e in assistants for st in e.metadata["steps"]} == {
        "step-start",
        "step-finish",
    }
    task = next(e for e in s.entries if e.kind == "tool_result" and e.tool_name == "task")
    assert task.metadata["metadata"]["sessionId"].startswith("ses_")  # sub-agent link kept
    events = [e for e in s.entries if e.kind == "event"]
    assert {e.content["type"] for e in events} == {"agent-switched", "model-switched"}


def _export(tmp_path: Path, messages, parts, sessions=None) -> Path:
    folder = tmp_path / "export"
    folder.mkdir()
    if sessions is None:
        sessions = [
            {"id": "ses_b", "title": "B", "time_created": 20},
            {"id": "ses_a", "title": "A", "time_created": 10},
        ]

    def enc(rows):
        return [
            {**r, "data": json.dumps(r["data"])} if isinstance(r.get("data"), dict) else r
            for r in rows
        ]

    (folder / "sessions.json").write_text(json.dumps(sessions))
    (folder / "messages.json").write_text(json.dumps(enc(messages)))
    (folder / "parts.json").write_text(json.dumps(enc(parts)))
    return folder


def _msg(mid, sid, t, role):
    return {
        "id": mid,
        "session_id": sid,
        "time_created": t,
        "time_updated": t,
        "data": {"role": role, "time": {"created": t}},
    }


def _part(pid, mid, sid, t, data):
    return {
        "id": pid,
        "message_id": mid,
        "session_id": sid,
        "time_created": t,
        "time_updated": t,
        "data": data,
    }


def _synthetic(tmp_path: Path) -> Path:
    messages = [
        _msg("msg_2", "ses_b", 21, "user"),
        _msg("msg_1", "ses_a", 11, "user"),
        _msg("msg_3", "ses_a", 12, "assistant"),
    ]
    parts = [
        _part("prt_1", "msg_1", "ses_a", 11, {"type": "text", "text": "first question"}),
        _part("prt_2", "msg_2", "ses_b", 21, {"type": "text", "text": "second session"}),
        _part(
            "prt_9",
            "msg_3",
            "ses_a",
            19,
            {
                "type": "step-finish",
                "reason": "stop",
                "tokens": {
                    "input": 5,
                    "output": 7,
                    "reasoning": 1,
                    "cache": {"read": 2, "write": 0},
                },
                "cost": 0.5,
            },
        ),
        _part("prt_3", "msg_3", "ses_a", 13, {"type": "step-start", "snapshot": "abc"}),
        _part("prt_4", "msg_3", "ses_a", 14, {"type": "reasoning", "text": "think"}),
        _part(
            "prt_5",
            "msg_3",
            "ses_a",
            15,
            {
                "type": "tool",
                "tool": "bash",
                "callID": "c1",
                "state": {
                    "status": "error",
                    "input": {"command": "x"},
                    "error": "boom",
                    "time": {"start": 1, "end": 2},
                },
            },
        ),
        _part("prt_6", "msg_3", "ses_a", 16, {"type": "compaction", "auto": True}),
        _part(
            "prt_7",
            "msg_3",
            "ses_a",
            17,
            {
                "type": "tool",
                "tool": "read",
                "callID": "c2",
                "state": {"status": "running", "input": {"filePath": "a"}, "time": {"start": 3}},
            },
        ),
    ]
    return _export(tmp_path, messages, parts)


def test_synthetic_export_parts_mapping(tmp_path):
    s = parse_path(_synthetic(tmp_path))
    assert [(e.kind, e.metadata["session_id"]) for e in s.entries] == [
        ("message", "ses_a"),
        ("reasoning", "ses_a"),
        ("tool_call", "ses_a"),
        ("tool_result", "ses_a"),
        ("event", "ses_a"),
        ("tool_call", "ses_a"),
        ("message", "ses_b"),
    ]
    question, reasoning, call, result, compaction, running, _ = s.entries
    assert s.title == "first question"
    assert reasoning.usage == {
        "input_tokens": 5,
        "output_tokens": 7,
        "reasoning_tokens": 1,
        "cache_read_tokens": 2,
        "cache_write_tokens": 0,
        "cost": 0.5,
    }
    assert [st["id"] for st in reasoning.metadata["steps"]] == ["prt_3", "prt_9"]
    assert result.content == {"output": "boom", "is_error": True} and result.tool_call_id == "c1"
    assert compaction.derived and compaction.content == {"type": "compaction", "auto": True}
    assert running.metadata["interrupted"] is True and running.metadata["status"] == "running"
    assert [m["id"] for m in s.metadata["sessions"]] == ["ses_a", "ses_b"]


@pytest.mark.parametrize(
    ("mutate", "file", "where", "field", "reason"),
    [
        (
            lambda m, p: p[0].update(data="{not json"),
            "parts.json",
            "index 0",
            "data",
            "not valid JSON",
        ),
        (
            lambda m, p: m[0]["data"].update(role="robot"),
            "messages.json",
            "index 0",
            "data.role",
            "unknown role",
        ),
        (lambda m, p: m[0]["data"].pop("role"), "messages.json", "index 0", "data.role", "missing"),
        (
            lambda m, p: p[0]["data"].update(text=None),
            "parts.json",
            "index 0",
            "data.text",
            "content is null",
        ),
        (
            lambda m, p: p[0]["data"].update(text=3),
            "parts.json",
            "index 0",
            "data.text",
            "expected a string",
        ),
        (lambda m, p: p[0].pop("message_id"), "parts.json", "index 0", "message_id", "missing"),
        (
            lambda m, p: p[0].update(message_id="msg_x"),
            "parts.json",
            "index 0",
            "message_id",
            "no such message",
        ),
        (
            lambda m, p: p[5]["data"]["state"].pop("error"),
            "parts.json",
            "index 5",
            "data.state.error",
            "content is null",
        ),
        (
            lambda m, p: p[5]["data"].pop("callID"),
            "parts.json",
            "index 5",
            "data.callID",
            "no callID",
        ),
    ],
)
def test_bad_input_names_file_index_and_field(tmp_path, mutate, file, where, field, reason):
    folder = _synthetic(tmp_path)
    messages = _load(folder, "messages.json")
    parts = _load(folder, "parts.json")
    mutate(messages, parts)
    for name, rows in (("messages.json", messages), ("parts.json", parts)):
        rows = [
            {**r, "data": json.dumps(r["data"])} if isinstance(r.get("data"), dict) else r
            for r in rows
        ]
        (folder / name).write_text(json.dumps(rows))
    with pytest.raises(FormatError) as err:
        parse_path(folder)
    text = str(err.value)
    assert str(folder / file) in text and where in text and reason in text
    assert err.value.location == where and err.value.field == field


def test_missing_file_is_an_error(tmp_path):
    folder = _synthetic(tmp_path)
    (folder / "parts.json").unlink()
    with pytest.raises(FormatError):
        parse_path(folder, "opencode-export")


def test_detect_only_the_folder(corpus, tmp_path):
    folder = corpus / FOLDER
    assert fmt.detect(read_source(folder))
    for path in sorted(corpus.rglob("*")):
        if path.is_file() and path.suffix != ".md":
            assert not fmt.detect(read_source(path)), path
    assert not fmt.detect(read_source(tmp_path))  # an unrelated (empty) folder
