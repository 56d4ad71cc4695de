"""SWE-agent trajectory importer, 1.x function calling and 0.x text actions (FORMATS.md 4)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from journal_app.formats import FormatError, parse_path, swe_agent
from journal_app.formats.source import Source, read_source

FOLDER = "swe-agent-traj"
FILE = "sweagent-function-calling-marshmallow-1867.traj"


@cache
def _source(path: str) -> Source:
    return read_source(path)


def _corpus_sources(corpus: Path) -> list[tuple[str, Path]]:
    """(format folder, path) for every corpus source; OpenCode exports are folders."""
    return [
        (folder.name, item)
        for folder in sorted(p for p in corpus.iterdir() if p.is_dir())
        for item in sorted(folder.iterdir())
    ]


@pytest.fixture
def raw(corpus: Path) -> dict:
    return json.loads((corpus / FOLDER / FILE).read_text(encoding="utf-8"))


@pytest.fixture
def session(corpus: Path):
    return parse_path(corpus / FOLDER / FILE)


def test_counts_match_raw_file(raw, session):
    history = raw["history"]
    raw_calls = sum(len(m.get("tool_calls") or []) for m in history)
    raw_results = sum(len(m.get("tool_call_ids") or []) for m in history if m["role"] == "tool")
    raw_messages = sum(
        1
        for m in history
        if m["role"] in ("system", "user") or (m["role"] == "assistant" and m["content"])
    )
    # Unanswered calls: replay the history; ids are reused, so a result answers the latest.
    open_calls: list[str] = []
    for m in history:
        open_calls += [c["id"] for c in m.get("tool_calls") or []]
        for i in m.get("tool_call_ids") or []:
            open_calls.reverse()
            open_calls.remove(i)
            open_calls.reverse()
    kinds = [e.kind for e in session.entries]
    assert kinds.count("tool_call") == raw_calls == 13
    assert kinds.count("tool_result") == raw_results == 13
    assert kinds.count("message") == raw_messages == 15
    calls = [e.tool_call_id for e in session.entries if e.kind == "tool_call"]
    answered = {e.tool_call_id for e in session.entries if e.kind == "tool_result"}
    assert len(set(calls)) == len(calls)
    assert len(set(calls) - answered) == len(open_calls) == 0


def test_reused_call_ids_are_made_unique_and_results_follow_their_call(raw, session):
    raw_ids = [c["id"] for m in raw["history"] for c in m.get("tool_calls") or []]
    assert len(set(raw_ids)) < len(raw_ids)  # the replay reuses ids
    calls = [e for e in session.entries if e.kind == "tool_call"]
    assert [e.metadata.get("source_tool_call_id", e.tool_call_id) for e in calls] == raw_ids
    # Each result sits right after its own call (one call per turn in this file).
    for i, e in enumerate(session.entries):
        if e.kind == "tool_result":
            assert session.entries[i - 1].kind == "tool_call"
            assert session.entries[i - 1].tool_call_id == e.tool_call_id


def test_mapping_of_messages_calls_and_results(raw, session):
    history = raw["history"]
    assert [(e.kind, e.role) for e in session.entries[:5]] == [
        ("message", "system"),
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
    ]
    assert session.entries[0].content["text"] == history[0]["content"]
    assert session.entries[2].content["text"] == history[2]["content"]
    assert session.entries[2].metadata["action"] == history[2]["action"]
    call = session.entries[3]
    assert call.tool_name == "bash"
    assert call.content["arguments"] == {"command": "ls -F"}
    assert session.entries[4].content == {"output": history[3]["content"], "is_error": False}
    assert not any(e.derived for e in session.entries)
    submit = [e for e in session.entries if e.kind == "tool_call"][-1]
    assert submit.tool_call_id == "call_submit" and submit.content["arguments"] == {}


def test_session_metadata_keeps_run_data_without_prompt_copies(raw, session):
    meta = session.metadata
    assert meta["info"] == raw["info"]
    assert meta["environment"] == raw["environment"]
    assert meta["replay_config"] == raw["replay_config"]
    assert len(meta["trajectory"]) == len(raw["trajectory"]) == 13
    assert all("messages" not in step for step in meta["trajectory"])
    assert [s["messages_count"] for s in meta["trajectory"]] == [
        len(s["messages"]) for s in raw["trajectory"]
    ]
    assert meta["trajectory"][0]["execution_time"] == raw["trajectory"][0]["execution_time"]
    raw_markers = sum(
        json.dumps(s["messages"]).count("Old environment output: (") for s in raw["trajectory"]
    )
    assert meta["trajectory_elision_markers"] == raw_markers == 36
    assert len(json.dumps(meta)) < len(json.dumps(raw)) / 4
    assert not any("messages" in e.metadata for e in session.entries)
    assert session.title == "TimeDelta serialization precision"
    assert session.source_session_id == "marshmallow-code__marshmallow-1867"


def test_elided_history_message_is_derived(tmp_path, raw):
    raw["history"][3]["content"] = "Old environment output: (42 lines omitted)"
    path = tmp_path / "elided.traj"
    path.write_text(json.dumps(raw))
    session = parse_path(path)
    (elided,) = [e for e in session.entries if e.derived]
    assert elided.kind == "tool_result" and elided.metadata["elided_by_source"] is True


V0_TRAJ = {
    "environment": "swe_main",
    "trajectory": [
        {
            "action": "ls -F\n",
            "observation": "setup.py\nsrc/",
            "response": "DISCUSSION\nLet's look.\n\n```\nls -F\n```",
            "thought": "DISCUSSION\nLet's look.\n\n",
            "state": '{"open_file": "n/a", "working_dir": "/repo"}',
        }
    ],
    "history": [
        {
            "role": "system",
            "content": "SETTING: You are an autonomous programmer.",
            "agent": "primary",
        },
        {
            "role": "user",
            "content": "Here is a demonstration of how to correctly accomplish this task.\n...",
            "agent": "primary",
            "is_demo": True,
        },
        {
            "role": "user",
            "content": "We're currently solving the following issue within our repository. "
            "Here's the issue text:\nISSUE:\nTimeDelta serialization precision\n",
            "agent": "primary",
        },
        {
            "role": "assistant",
            "content": "DISCUSSION\nLet's look.\n\n```\nls -F\n```",
            "thought": "DISCUSSION\nLet's look.\n\n",
            "action": "ls -F\n",
            "agent": "primary",
        },
        {
            "role": "user",
            "content": "setup.py\nsrc/\n(Open file: n/a)\n(Current directory: /repo)\nbash-$",
            "agent": "primary",
        },
        {
            "role": "assistant",
            "content": "DISCUSSION\nDone.\n\n```\nsubmit\n```",
            "thought": "DISCUSSION\nDone.\n\n",
            "action": "submit\n",
            "agent": "primary",
        },
    ],
    "info": {"exit_status": "submitted", "submission": "diff", "model_stats": {"api_calls": 2}},
}


def test_v0_text_actions(tmp_path):
    path = tmp_path / "v0.traj"
    path.write_text(json.dumps(V0_TRAJ))
    session = parse_path(path)
    assert session.format == "swe-agent-traj"
    got = [(e.kind, e.role, e.tool_call_id, e.derived) for e in session.entries]
    assert got == [
        ("message", "system", "", False),
        ("message", "user", "", True),
        ("message", "user", "", False),
        ("message", "assistant", "", False),
        ("tool_call", "assistant", "action-3", False),
        ("tool_result", "tool", "action-3", False),
        ("message", "assistant", "", False),
        ("tool_call", "assistant", "action-5", False),
    ]
    calls = {e.tool_call_id for e in session.entries if e.kind == "tool_call"}
    answered = {e.tool_call_id for e in session.entries if e.kind == "tool_result"}
    assert calls - answered == {"action-5"}  # the final submit got no observation
    demo = session.entries[1]
    assert demo.metadata["is_demo"] is True
    call, result = session.entries[4], session.entries[5]
    assert call.content == {"name": "bash", "arguments": {"command": "ls -F\n"}}
    assert result.content["output"] == V0_TRAJ["history"][4]["content"]
    assert session.title == "TimeDelta serialization precision"
    assert session.metadata["info"] == V0_TRAJ["info"]
    assert session.metadata["trajectory"] == V0_TRAJ["trajectory"]  # no messages: unchanged


@pytest.mark.parametrize(
    ("history", "location", "field"),
    [
        ([{"role": "system", "content": "s"}, {"content": "no role"}], "history[1]", "role"),
        (
            [{"role": "system", "content": "s"}, {"role": "robot", "content": "x"}],
            "history[1]",
            "role",
        ),
        (
            [{"role": "system", "content": "s"}, {"role": "user", "content": None}],
            "history[1]",
            "content",
        ),
        (
            [{"role": "user", "content": "u"}, {"role": "user", "content": 7}],
            "history[1]",
            "content",
        ),
        (
            [
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "function": {}}]},
            ],
            "history[1].tool_calls[0]",
            "function.name",
        ),
        (
            [{"role": "user", "content": "u"}, {"role": "tool", "content": "out"}],
            "history[1]",
            "tool_call_ids",
        ),
        (
            [
                {"role": "user", "content": "u"},
                {"role": "tool", "content": "o", "tool_call_ids": ["z"]},
            ],
            "history[1]",
            "tool_call_ids",
        ),
    ],
)
def test_bad_input_names_file_index_and_field(tmp_path, history, location, field):
    path = tmp_path / "bad.traj"
    path.write_text(json.dumps({"history": history, "trajectory": [], "info": {}}))
    with pytest.raises(FormatError) as info:
        parse_path(path, fmt="swe-agent-traj")
    message = str(info.value)
    assert str(path) in message and location in message and repr(field) in message
    assert info.value.location == location and info.value.field == field


def test_history_of_wrong_type(tmp_path):
    path = tmp_path / "bad.traj"
    path.write_text(json.dumps({"history": {"role": "user"}, "info": {}}))
    with pytest.raises(FormatError) as info:
        parse_path(path, fmt="swe-agent-traj")
    assert str(path) in str(info.value) and "'history'" in str(info.value)


def test_detect(corpus: Path):
    for folder, path in _corpus_sources(corpus):
        assert swe_agent.detect(_source(str(path))) is (folder == FOLDER), path
    assert swe_agent.detect(Source(path=Path("x.jsonl"), kind="jsonl", data=[(1, {})])) is False
    assert swe_agent.detect(Source(path=Path("x"), kind="json", data=[1, 2])) is False
    assert swe_agent.detect(Source(path=Path("x"), kind="dir", data=None)) is False
