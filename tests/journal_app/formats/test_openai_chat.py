"""OpenAI Chat Completions importer (FORMATS.md section 6): corpus counts, shapes, errors."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from journal_app.formats import FormatError, parse_path
from journal_app.formats import openai_chat as fmt
from journal_app.formats.source import read_source

TAU = "openai-chat-tool-calls/taubench-gpt4o-airline-task3.json"


def _write(tmp_path: Path, value, name: str = "chat.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def _raw_unanswered(traj: list[dict]) -> int:
    """Calls without a later result, simulated on the raw list (a reused id re-opens)."""
    open_calls: Counter = Counter()
    for m in traj:
        for c in m.get("tool_calls") or []:
            open_calls[c["id"]] += 1
        if m["role"] == "tool" and open_calls[m["tool_call_id"]]:
            open_calls[m["tool_call_id"]] -= 1
    return sum(open_calls.values())


def test_taubench_counts_match_the_raw_file(corpus):
    raw = json.loads((corpus / TAU).read_text(encoding="utf-8"))
    traj = raw["traj"]
    roles = Counter(m["role"] for m in traj)
    assert len(traj) == 62
    assert roles == {"system": 1, "user": 11, "assistant": 30, "tool": 20}
    raw_calls = [c for m in traj for c in (m.get("tool_calls") or [])]
    raw_results = [m for m in traj if m["role"] == "tool"]
    raw_errors = [m for m in raw_results if m["content"].startswith("Error:")]
    raw_texts = [m for m in traj if m["role"] != "tool" and m.get("content")]
    assert len(raw_calls) == 20 and len(raw_errors) == 5

    session = parse_path(corpus / TAU)
    assert session.format == "openai-chat"
    kinds = Counter(e.kind for e in session.entries)
    assert kinds == {
        "message": len(raw_texts),
        "tool_call": len(raw_calls),
        "tool_result": len(raw_results),
    }
    messages = Counter(e.role for e in session.entries if e.kind == "message")
    assert messages["system"] == 1 and messages["user"] == 11
    assert messages["assistant"] == sum(1 for m in raw_texts if m["role"] == "assistant")
    results = [e for e in session.entries if e.kind == "tool_result"]
    assert sum(e.content["is_error"] for e in results) == len(raw_errors)
    assert all(e.tool_name for e in results)

    calls = [e.tool_call_id for e in session.entries if e.kind == "tool_call"]
    answered = [e.tool_call_id for e in results]
    assert len(set(calls)) == len(calls)  # reused source ids were made unique
    unanswered = [c for c in calls if c not in answered]
    assert len(unanswered) == _raw_unanswered(traj) == 0
    assert sorted(answered) == sorted(calls)


def test_taubench_reused_call_ids_are_disambiguated(corpus):
    traj = json.loads((corpus / TAU).read_text(encoding="utf-8"))["traj"]
    ids = Counter(c["id"] for m in traj for c in (m.get("tool_calls") or []))
    reused = {i for i, n in ids.items() if n > 1}
    assert len(reused) == 2  # the corpus file really reuses two call ids

    session = parse_path(corpus / TAU)
    renamed = [e for e in session.entries if e.metadata.get("source_tool_call_id")]
    assert {e.metadata["source_tool_call_id"] for e in renamed} == reused
    assert {e.tool_call_id for e in renamed} == {f"{i}#2" for i in reused}
    # Each renamed result follows its renamed call directly in this file.
    for call in (e for e in renamed if e.kind == "tool_call"):
        i = session.entries.index(call)
        assert session.entries[i + 1].kind == "tool_result"
        assert session.entries[i + 1].tool_call_id == call.tool_call_id


def test_taubench_wrapper_title_and_nothing_lost(corpus):
    raw = json.loads((corpus / TAU).read_text(encoding="utf-8"))
    session = parse_path(corpus / TAU)
    assert session.metadata == {k: v for k, v in raw.items() if k != "traj"}
    assert session.metadata["reward"] == 0.0
    assert session.title.startswith("Hi! I need to change my flight")
    assert len(session.title) <= 80
    # Arguments are parsed; the one call serialised with spaces keeps its raw string.
    calls = [e for e in session.entries if e.kind == "tool_call"]
    assert all(isinstance(e.content["arguments"], dict) for e in calls)
    raw_args = [c["function"]["arguments"] for m in raw["traj"] for c in m.get("tool_calls") or []]
    kept = [e.metadata["raw_arguments"] for e in calls if "raw_arguments" in e.metadata]
    assert kept and all(k in raw_args for k in kept)
    for e, raw_arg in zip(calls, raw_args, strict=True):
        assert e.content["arguments"] == json.loads(raw_arg)
        compact = json.dumps(e.content["arguments"], separators=(",", ":"), ensure_ascii=False)
        assert e.metadata.get("raw_arguments", compact) == raw_arg
    # Null assistant content next to tool calls is recorded, not dropped.
    assert sum(1 for e in calls if "content" in e.metadata) == sum(
        1 for m in raw["traj"] if m.get("tool_calls") and m["content"] is None
    )
    refs = {e.source_ref.split(".")[0] for e in session.entries}
    assert refs == {f"traj[{i}]" for i in range(len(raw["traj"]))}


def test_bare_list_and_messages_wrapper(tmp_path):
    msgs = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "List files"}]},
        {
            "role": "assistant",
            "content": "Running ls.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "sh", "arguments": "{not json"},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "sh", "arguments": '{"a":1}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: boom"},
        {"role": "assistant", "content": "", "refusal": None},
    ]
    s = parse_path(_write(tmp_path, msgs))
    assert s.format == "openai-chat"
    assert [(e.kind, e.role) for e in s.entries] == [
        ("message", "developer"),
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", "assistant"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("tool_result", "tool"),
        ("message", "assistant"),
    ]
    assert s.entries[1].content == {"text": "List files", "blocks": msgs[1]["content"]}
    assert s.entries[3].content["arguments"] == "{not json"  # kept raw when not JSON
    assert s.entries[4].content["arguments"] == {"a": 1}
    assert s.entries[6].content["is_error"] is True
    assert s.entries[7].metadata == {"refusal": None}
    assert s.entries[0].source_ref == "index 0"
    assert s.title == "List files"

    wrapped = parse_path(_write(tmp_path, {"model": "gpt-4o", "messages": msgs}, "w.json"))
    assert wrapped.metadata == {"model": "gpt-4o"}
    assert wrapped.entries[0].source_ref == "messages[0]"


@pytest.mark.parametrize(
    ("messages", "where", "field", "reason"),
    [
        ([{"content": "hi"}], "index 0", "role", "missing"),
        (
            [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}],
            "index 1",
            "role",
            "unknown role",
        ),
        (
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": None}],
            "index 1",
            "content",
            "content is null",
        ),
        ([{"role": "user", "content": 42}], "index 0", "content", "expected a string"),
        ([{"role": "user"}], "index 0", "content", "missing"),
        ([{"role": "tool", "content": "x"}], "index 0", "tool_call_id", "no tool_call_id"),
        (
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                }
            ],
            "index 0",
            "tool_calls[0].id",
            "no id",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": {}}],
            "index 0",
            "tool_calls",
            "expected a list",
        ),
        (["hello"], "index 0", "", "expected an object"),
    ],
)
def test_bad_input_names_file_index_and_field(tmp_path, messages, where, field, reason):
    path = _write(tmp_path, messages)
    with pytest.raises(FormatError) as err:
        parse_path(path, "openai-chat")
    text = str(err.value)
    assert str(path) in text and where in text and reason in text
    assert err.value.location == where and err.value.field == field


def test_bad_input_in_taubench_wrapper_names_traj_index(tmp_path, corpus):
    raw = json.loads((corpus / TAU).read_text(encoding="utf-8"))
    raw["traj"][4]["content"] = None
    path = _write(tmp_path, raw)
    with pytest.raises(FormatError) as err:
        parse_path(path)
    assert "traj[4]" in str(err.value) and "'content'" in str(err.value)
    assert str(path) in str(err.value)


def test_detect_true_for_taubench_only(corpus):
    assert fmt.detect(read_source(corpus / TAU))
    others = [p for p in sorted(corpus.rglob("*")) if p.is_file() and p.suffix != ".md"]
    others = [p for p in others if p != corpus / TAU]
    assert len(others) >= 11
    for path in others:
        assert not fmt.detect(read_source(path)), path
    assert not fmt.detect(read_source(corpus / "opencode-export" / "khala-sessions"))
