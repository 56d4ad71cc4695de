"""ATIF importer (FORMATS.md section 8): corpus variant, canonical shape, order repair, errors."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from journal_app.formats import FormatError, parse_path
from journal_app.formats import atif as fmt
from journal_app.formats.source import read_source

ATIF = "atif-trajectory/atif-claude-code-regex-log.json"

CANONICAL = {
    "schema_version": "ATIF-v1.4",
    "session_id": "025B810F",
    "agent": {"name": "harbor-agent", "version": "1.0.0", "model_name": "gemini-2.5-flash"},
    "notes": "test",
    "final_metrics": {"total_prompt_tokens": 1120, "total_steps": 3},
    "steps": [
        {
            "step_id": 1,
            "timestamp": "2025-10-11T10:30:00Z",
            "source": "system",
            "message": "Be exact.",
        },
        {"step_id": 2, "source": "user", "message": "What is the price of GOOGL?"},
        {
            "step_id": 3,
            "source": "agent",
            "model_name": "gemini-2.5-flash",
            "message": "I will search.",
            "reasoning_content": "Two lookups, in parallel.",
            "tool_calls": [
                {
                    "tool_call_id": "call_price_1",
                    "function_name": "financial_search",
                    "arguments": {"ticker": "GOOGL"},
                },
                {
                    "tool_call_id": "call_volume_2",
                    "function_name": "financial_search",
                    "arguments": '{"ticker": "GOOGL"}',
                },
            ],
            "observation": {
                "results": [
                    {"source_call_id": "call_price_1", "content": "$185.35"},
                    {"source_call_id": "call_volume_2", "content": "1.5M"},
                    {"source_call_id": None, "content": "environment note"},
                ]
            },
            "metrics": {
                "prompt_tokens": 520,
                "completion_tokens": 80,
                "cached_tokens": 200,
                "cost_usd": 0.00045,
            },
        },
        {"step_id": 4, "source": "agent", "message": "GOOGL trades at $185.35.", "extra": {"k": 1}},
    ],
}


def _write(tmp_path: Path, value, name: str = "trajectory.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_corpus_counts_match_the_raw_file(corpus):
    raw = json.loads((corpus / ATIF).read_text(encoding="utf-8"))
    steps = raw["steps"]
    assert Counter(s["source"] for s in steps) == {"user": 1, "agent": 3, "system": 5}
    raw_calls = [c for s in steps for c in s.get("tool_calls", [])]
    result_steps = [s for s in steps if s.get("observation", {}).get("type") == "tool_result"]
    result_ids = [re.match(r"Tool result for (\S+)", s["message"])[1] for s in result_steps]
    raw_failed = [s for s in result_steps if s["observation"]["result"]["success"] is False]
    raw_texts = [s for s in steps if s["source"] in ("user", "agent") and s["message"]]
    raw_unanswered = [c["id"] for c in raw_calls if c["id"] not in result_ids]
    assert len(raw_calls) == 5 and len(result_steps) == 5 and len(raw_failed) == 2

    s = parse_path(corpus / ATIF)
    assert s.format == "atif-trajectory"
    assert Counter(e.kind for e in s.entries) == {
        "message": len(raw_texts),
        "tool_call": len(raw_calls),
        "tool_result": len(result_steps),
    }
    calls = [e.tool_call_id for e in s.entries if e.kind == "tool_call"]
    results = [e for e in s.entries if e.kind == "tool_result"]
    assert sorted(calls) == sorted(c["id"] for c in raw_calls)
    assert (
        len([c for c in calls if c not in {r.tool_call_id for r in results}])
        == len(raw_unanswered)
        == 0
    )
    assert sum(r.content["is_error"] for r in results) == len(raw_failed)

    eacces = next(r for r in results if "EACCES" in r.content["output"])
    assert eacces.content["is_error"] is True
    assert eacces.content["output"] == "EACCES: permission denied, mkdir '/app'"
    sudo = next(r for r in results if r.content["output"].startswith("Exit code 1"))
    assert sudo.content["exit_code"] == 1 and sudo.content["is_error"] is True

    assert s.source_session_id == raw["session_id"]
    assert s.metadata == {k: v for k, v in raw.items() if k != "steps"}
    assert s.title.startswith("Write a regex expression") and len(s.title) <= 80


def test_corpus_calls_are_moved_before_their_results(corpus):
    s = parse_path(corpus / ATIF)
    order = [(e.kind, e.source_ref.split(".")[0]) for e in s.entries]
    assert order == [
        ("message", "steps[0]"),
        ("message", "steps[1]"),
        ("tool_call", "steps[6]"),
        ("tool_call", "steps[6]"),
        ("tool_call", "steps[6]"),
        ("tool_call", "steps[6]"),
        ("tool_result", "steps[2]"),
        ("tool_result", "steps[3]"),
        ("tool_result", "steps[4]"),
        ("tool_result", "steps[5]"),
        ("message", "steps[6]"),
        ("tool_call", "steps[8]"),
        ("tool_result", "steps[7]"),
        ("message", "steps[8]"),
    ]
    moved = [e for e in s.entries if e.kind == "tool_call"]
    assert all(e.metadata["listed_on"] == e.source_ref.split(".")[0] for e in moved)
    # Step fields stay on the step's own entry; nothing of the result step is lost.
    eacces = s.entries[6]
    assert eacces.metadata["step_id"] == 3
    assert eacces.metadata["message"] == "Tool result for toolu_01TQktt5rHsfYcF1BCvJDFTj"
    assert eacces.metadata["result"] == {"success": False}
    assert eacces.metadata["result_fields_equal_to_content"] == ["error"]
    assert s.entries[10].metadata["step_id"] == 7


def test_canonical_shape(tmp_path):
    s = parse_path(_write(tmp_path, CANONICAL))
    assert [(e.kind, e.role) for e in s.entries] == [
        ("message", "system"),
        ("message", "user"),
        ("reasoning", "assistant"),
        ("message", "assistant"),
        ("tool_call", "assistant"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("tool_result", "tool"),
        ("event", "runtime"),
        ("message", "assistant"),
    ]
    reasoning = s.entries[2]
    assert reasoning.content == {"text": "Two lookups, in parallel."}
    assert reasoning.usage == {
        "input_tokens": 520,
        "output_tokens": 80,
        "cache_read_tokens": 200,
        "cost_usd": 0.00045,
    }
    assert reasoning.metadata["model_name"] == "gemini-2.5-flash"
    assert s.entries[5].content["arguments"] == {"ticker": "GOOGL"}
    assert s.entries[6].content == {"output": "$185.35", "is_error": False}
    assert s.entries[8].content["type"] == "observation"
    assert s.entries[9].metadata["extra"] == {"k": 1}
    assert s.metadata["agent"]["name"] == "harbor-agent" and s.metadata["notes"] == "test"
    assert s.source_session_id == "025B810F"
    assert s.title == "What is the price of GOOGL?"


def test_canonical_unanswered_call(tmp_path):
    data = json.loads(json.dumps(CANONICAL))
    data["steps"][2]["observation"]["results"].pop(1)
    s = parse_path(_write(tmp_path, data))
    calls = [e.tool_call_id for e in s.entries if e.kind == "tool_call"]
    answered = {e.tool_call_id for e in s.entries if e.kind == "tool_result"}
    assert [c for c in calls if c not in answered] == ["call_volume_2"]


def _bad(steps):
    return {"schema_version": "1.4", "session_id": "x", "agent": {}, "steps": steps}


@pytest.mark.parametrize(
    ("steps", "where", "field", "reason"),
    [
        ([{"message": "hi"}], "steps[0]", "source", "missing"),
        ([{"source": "robot", "message": "hi"}], "steps[0]", "source", "unknown source"),
        ([{"source": "user", "message": None}], "steps[0]", "message", "content is null"),
        ([{"source": "user", "message": 3}], "steps[0]", "message", "expected a string"),
        ([{"source": "user"}], "steps[0]", "message", "missing"),
        (
            [
                {"source": "user", "message": "a"},
                {
                    "source": "system",
                    "message": "?",
                    "observation": {"type": "tool_result", "content": "x"},
                },
            ],
            "steps[1]",
            "message",
            "names no call",
        ),
        (
            [{"source": "agent", "message": "a", "tool_calls": [{"name": "f", "arguments": {}}]}],
            "steps[0]",
            "tool_calls[0].tool_call_id",
            "no id",
        ),
        (
            [
                {
                    "source": "system",
                    "message": "Tool result for t1",
                    "observation": {"type": "tool_result", "content": None},
                }
            ],
            "steps[0]",
            "observation.content",
            "content is null",
        ),
        (["step"], "steps[0]", "", "expected an object"),
    ],
)
def test_bad_input_names_file_index_and_field(tmp_path, steps, where, field, reason):
    path = _write(tmp_path, _bad(steps))
    with pytest.raises(FormatError) as err:
        parse_path(path)
    text = str(err.value)
    assert str(path) in text and where in text and reason in text
    assert err.value.location == where and err.value.field == field


def test_result_for_unknown_call_is_refused(tmp_path):
    steps = [
        {"source": "user", "message": "a"},
        {
            "source": "system",
            "message": "Tool result for nope",
            "observation": {"type": "tool_result", "content": "x", "result": {"success": True}},
        },
    ]
    with pytest.raises(FormatError) as err:
        parse_path(_write(tmp_path, _bad(steps)))
    assert "steps[1]" in str(err.value) and "nope" in str(err.value)


def test_detect(corpus, tmp_path):
    assert fmt.detect(read_source(corpus / ATIF))
    assert fmt.detect(read_source(_write(tmp_path, CANONICAL)))
    for path in sorted(corpus.rglob("*")):
        if path.is_file() and path.suffix != ".md" and path != corpus / ATIF:
            assert not fmt.detect(read_source(path)), path
    assert not fmt.detect(read_source(corpus / "opencode-export" / "khala-sessions"))
