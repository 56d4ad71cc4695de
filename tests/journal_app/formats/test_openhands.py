"""OpenHands event-history importer (FORMATS.md section 3)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from journal_app.formats import FormatError, openhands, parse_path
from journal_app.formats.source import Source, read_source

FOLDER = "openhands-events"
FILE = "openhands-ponyc-4588-max-iterations.json"


@cache
def _source(path: str) -> Source:
    return read_source(path)


def _corpus_sources(corpus: Path) -> list[tuple[str, Path]]:
    """(format folder, path) for every corpus source; OpenCode exports are folders."""
    out = []
    for folder in sorted(p for p in corpus.iterdir() if p.is_dir()):
        for item in sorted(folder.iterdir()):
            out.append((folder.name, item))
    return out


@pytest.fixture
def raw(corpus: Path) -> dict:
    return json.loads((corpus / FOLDER / FILE).read_text(encoding="utf-8"))


@pytest.fixture
def session(corpus: Path):
    return parse_path(corpus / FOLDER / FILE)


def _raw_counts(raw: dict) -> dict[str, int]:
    """Expected entry counts, computed from the raw events without the importer."""
    history = raw["history"]
    tool_actions = {e["id"] for e in history if "action" in e and e.get("tool_call_metadata")}
    messages = 0
    for e in history:
        if "action" not in e:
            continue
        if e["action"] in ("system", "message") and not e.get("tool_call_metadata"):
            messages += 1
        elif e.get("tool_call_metadata"):
            if e["action"] == "think":
                resp = e["tool_call_metadata"]["model_response"]
                messages += bool(resp["choices"][0]["message"]["content"])
            else:
                messages += bool(e["args"].get("thought"))
    results = [e for e in history if "observation" in e and e.get("cause") in tool_actions]
    answered = {e["cause"] for e in results}
    return {
        "messages": messages,
        "tool_calls": len(tool_actions),
        "tool_results": len(results),
        "unanswered": len(tool_actions - answered),
        "events": sum(
            1
            for e in history
            if "action" in e
            and not e.get("tool_call_metadata")
            and e["action"] not in ("system", "message")
        )
        + sum(1 for e in history if "observation" in e and e.get("cause") not in tool_actions)
        + (1 if raw.get("error") else 0),
    }


def test_counts_match_raw_file(raw, session):
    expected = _raw_counts(raw)
    kinds = [e.kind for e in session.entries]
    assert kinds.count("message") == expected["messages"]
    assert kinds.count("tool_call") == expected["tool_calls"] == 49
    assert kinds.count("tool_result") == expected["tool_results"] == 49
    assert kinds.count("event") == expected["events"] == 4
    calls = [e.tool_call_id for e in session.entries if e.kind == "tool_call"]
    answered = [e.tool_call_id for e in session.entries if e.kind == "tool_result"]
    assert len(set(calls)) == len(calls)
    assert set(answered) <= set(calls)
    assert len(set(calls) - set(answered)) == expected["unanswered"] == 0
    # Every result comes after its call.
    seen: set[str] = set()
    for e in session.entries:
        if e.kind == "tool_call":
            seen.add(e.tool_call_id)
        elif e.kind == "tool_result":
            assert e.tool_call_id in seen


def test_tool_call_ids_and_arguments_come_from_the_model_response(raw, session):
    calls = [e for e in session.entries if e.kind == "tool_call"]
    raw_actions = [e for e in raw["history"] if "action" in e and e.get("tool_call_metadata")]
    for call, action in zip(calls, raw_actions, strict=True):
        tcm = action["tool_call_metadata"]
        assert call.tool_call_id == tcm["tool_call_id"]
        assert call.tool_name == tcm["function_name"]
        (model_call,) = tcm["model_response"]["choices"][0]["message"]["tool_calls"]
        assert call.content["arguments"] == json.loads(model_call["function"]["arguments"])
        # Nothing dropped: the bulky response and the metrics stay in metadata.
        assert call.metadata["tool_call_metadata"] == tcm
        assert call.metadata["llm_metrics"] == action["llm_metrics"]
        assert call.metadata["timestamp"] == action["timestamp"]


def test_nonzero_exit_codes_are_error_results(raw, session):
    raw_codes = [
        e["extras"]["metadata"]["exit_code"]
        for e in raw["history"]
        if e.get("observation") == "run" and e["extras"]["metadata"]["exit_code"] != 0
    ]
    assert len(raw_codes) == 12
    results = [e for e in session.entries if e.kind == "tool_result"]
    nonzero = [e for e in results if e.content.get("exit_code", 0) != 0]
    assert [e.content["exit_code"] for e in nonzero] == raw_codes
    assert all(e.content["is_error"] for e in nonzero)
    assert all(
        e.content["exit_code"] == 0
        for e in results
        if "exit_code" in e.content and not e.content["is_error"]
    )
    # Failed editor calls ("ERROR:" content) are errors too, without an exit code.
    raw_edit_errors = sum(
        1
        for e in raw["history"]
        if e.get("observation") in ("edit", "read") and e["content"].startswith("ERROR:")
    )
    edit_errors = [e for e in results if e.content["is_error"] and "exit_code" not in e.content]
    assert len(edit_errors) == raw_edit_errors == 12


def test_error_observation_and_run_error_are_events(raw, session):
    events = [e for e in session.entries if e.kind == "event"]
    errors = [e for e in events if e.content["type"] == "error"]
    (raw_error,) = [e for e in raw["history"] if e.get("observation") == "error"]
    assert len(errors) == 1
    assert errors[0].content["text"] == raw_error["content"]
    assert errors[0].metadata["id"] == raw_error["id"]
    last = session.entries[-1]
    assert last.kind == "event" and last.role == "runtime"
    assert last.content == {"type": "run_error", "error": raw["error"]}
    assert session.metadata["error"] == raw["error"]


def test_roles_usage_and_session_metadata(raw, session):
    first, second = session.entries[0], session.entries[1]
    assert (first.kind, first.role) == ("message", "system")
    assert first.content["text"] == raw["history"][0]["args"]["content"]
    assert (second.kind, second.role) == ("message", "user")
    assert second.content["text"] == raw["instruction"]
    # Per-call usage sums to the last cumulative llm_metrics figure.
    usage = [e.usage for e in session.entries if e.usage]
    last_metrics = [e for e in raw["history"] if "llm_metrics" in e][-1]["llm_metrics"]
    total = last_metrics["accumulated_token_usage"]
    assert sum(u["input_tokens"] for u in usage) == total["prompt_tokens"]
    assert sum(u["output_tokens"] for u in usage) == total["completion_tokens"]
    # The agent's thoughts are kept as assistant messages before their calls.
    thoughts = [
        e["args"]["thought"]
        for e in raw["history"]
        if e.get("tool_call_metadata")
        and e.get("action") not in (None, "think")
        and e["args"].get("thought")
    ]
    texts = [
        e.content["text"] for e in session.entries if e.kind == "message" and e.role == "assistant"
    ]
    assert set(thoughts) <= set(texts)
    assert set(session.metadata) == set(raw) - {"history"}
    assert session.source_session_id == "ponylang__ponyc-4588"
    assert session.title == "Incorrect aliasing of iso when using match"
    assert len(session.title) <= 80


def test_inline_variants(tmp_path):
    events = [
        {
            "id": 0,
            "timestamp": "t0",
            "source": "user",
            "message": "fix it",
            "action": "message",
            "args": {"content": "fix it", "image_urls": None, "wait_for_response": False},
        },
        {
            "id": 1,
            "timestamp": "t1",
            "source": "environment",
            "message": "",
            "observation": "agent_state_changed",
            "content": "",
            "extras": {"agent_state": "running"},
        },
        {
            "id": 2,
            "timestamp": "t2",
            "source": "agent",
            "message": "Condenser",
            "action": "condensation",
            "args": {"forgotten_event_ids": [1], "summary": "s", "summary_offset": 1},
        },
        {
            "id": 3,
            "timestamp": "t3",
            "source": "agent",
            "message": "Running ls",
            "action": "run",
            "tool_call_metadata": {
                "function_name": "execute_bash",
                "tool_call_id": "c1",
                "model_response": None,
            },
            "llm_metrics": {
                "accumulated_token_usage": {"prompt_tokens": 99, "completion_tokens": 9},
                "token_usages": [{"prompt_tokens": 10, "completion_tokens": 2}],
            },
            "args": {"command": "ls", "thought": ""},
        },
        {
            "id": 4,
            "timestamp": "t4",
            "source": "agent",
            "message": "done",
            "cause": 3,
            "observation": "run",
            "content": "boom",
            "success": False,
            "extras": {"command": "ls", "metadata": {"exit_code": 2}},
        },
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events))
    session = parse_path(path)
    assert session.format == "openhands-events"
    kinds = [(e.kind, e.role) for e in session.entries]
    assert kinds == [
        ("message", "user"),
        ("event", "runtime"),
        ("event", "runtime"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
    ]
    assert session.entries[1].content["agent_state"] == "running"
    cond = session.entries[2]
    assert cond.derived and cond.content["type"] == "condensation"
    assert cond.content["forgotten_event_ids"] == [1]
    call, result = session.entries[3], session.entries[4]
    assert call.content == {"name": "execute_bash", "arguments": {"command": "ls"}}
    assert call.usage == {"input_tokens": 10, "output_tokens": 2}
    assert result.content == {"output": "boom", "is_error": True, "exit_code": 2}
    assert session.title == "fix it"


def _record(history: list) -> dict:
    return {"instance_id": "x", "metadata": {"agent_class": "CodeActAgent"}, "history": history}


@pytest.mark.parametrize(
    ("history", "location", "field"),
    [
        (
            [
                {"id": 0, "source": "user", "message": "m", "action": "message", "args": {}},
                {"id": 1, "source": "agent", "message": "?"},
            ],
            "history[1]",
            "action",
        ),
        (
            [
                {
                    "id": 0,
                    "source": "user",
                    "message": "hi",
                    "action": "message",
                    "args": {"content": "hi"},
                },
                {"id": 1, "source": "agent", "message": "x", "action": "run", "args": ["ls"]},
            ],
            "history[1]",
            "args",
        ),
        (
            [
                {
                    "id": 0,
                    "source": "user",
                    "message": None,
                    "action": "message",
                    "args": {"content": None},
                }
            ],
            "history[0]",
            "args.content",
        ),
        (
            [
                {"id": 0, "source": "user", "action": "message", "args": {"content": "a"}},
                {
                    "id": 1,
                    "source": "agent",
                    "action": "run",
                    "args": {},
                    "tool_call_metadata": {"function_name": "execute_bash"},
                },
            ],
            "history[1]",
            "tool_call_metadata.tool_call_id",
        ),
        (
            [
                {"id": 0, "source": "user", "action": "message", "args": {"content": "a"}},
                {"id": 1, "source": "agent", "observation": "run", "cause": 0, "content": 5},
            ],
            "history[1]",
            "content",
        ),
    ],
)
def test_bad_input_names_file_index_and_field(tmp_path, history, location, field):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_record(history)))
    with pytest.raises(FormatError) as info:
        parse_path(path)
    message = str(info.value)
    assert str(path) in message and location in message and repr(field) in message
    assert info.value.location == location and info.value.field == field


def test_missing_history(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"metadata": {"agent_class": "CodeActAgent"}}))
    with pytest.raises(FormatError) as info:
        parse_path(path, fmt="openhands-events")
    assert str(path) in str(info.value) and "'history'" in str(info.value)


def test_detect(corpus: Path):
    for folder, path in _corpus_sources(corpus):
        assert openhands.detect(_source(str(path))) is (folder == FOLDER), path
    assert openhands.detect(Source(path=Path("x.jsonl"), kind="jsonl", data=[(1, {})])) is False
    assert openhands.detect(Source(path=Path("x"), kind="json", data="text")) is False
    assert openhands.detect(Source(path=Path("x"), kind="dir", data=None)) is False
