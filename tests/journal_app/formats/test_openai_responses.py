"""OpenAI Responses items importer: inline fixtures, detection, pairing, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journal_app.formats import FormatError, detect_format, parse_path
from journal_app.formats.source import read_source

EXCHANGE = {
    "model": "gpt-5-codex",
    "instructions": "You are Codex, a coding agent.",
    "input": [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Run the tests."}],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Plan: run pytest."}],
            "encrypted_content": "gAAAA-secret",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "shell",
            "arguments": '{"cmd": ["pytest"]}',
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "call_2",
            "name": "shell",
            "arguments": '{"cmd":["ls"]}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": '{"exit_code": 1, "output": "1 failed"}',
        },
        {"type": "function_call_output", "call_id": "call_2", "output": "src tests"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ],
    "object": "response",
    "output": [
        {
            "type": "message",
            "id": "msg_9",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "One test fails.", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 900, "output_tokens": 12},
}


def write(tmp_path: Path, data, name: str = "responses.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_it_maps_every_item_type(tmp_path):
    session = parse_path(write(tmp_path, EXCHANGE))
    assert session.format == "openai-responses"
    got = [(e.kind, e.role, e.tool_call_id, e.source_ref) for e in session.entries]
    assert got == [
        ("message", "system", "", "instructions"),
        ("message", "user", "", "input[0]"),
        ("reasoning", "assistant", "", "input[1]"),
        ("tool_call", "assistant", "call_1", "input[2]"),
        ("tool_call", "assistant", "call_2", "input[3]"),
        ("tool_result", "tool", "call_1", "input[4]"),
        ("tool_result", "tool", "call_2", "input[5]"),
        ("event", "runtime", "", "input[6]"),
        ("message", "assistant", "", "output[0]"),
    ]
    e = session.entries
    assert e[0].content == {"text": "You are Codex, a coding agent."}
    assert e[1].content == {"text": "Run the tests."}
    assert e[2].content == {"text": "Plan: run pytest.", "encrypted": "gAAAA-secret"}
    assert e[3].content == {"name": "shell", "arguments": {"cmd": ["pytest"]}}
    assert e[3].metadata["raw_arguments"] == '{"cmd": ["pytest"]}'
    assert "raw_arguments" not in e[4].metadata
    assert e[5].content["is_error"] is True and e[5].content["exit_code"] == 1
    assert e[6].content == {"output": "src tests", "is_error": False}
    assert e[7].content == {"type": "responses_item", "item_type": "web_search_call"}
    assert e[7].metadata["item"]["id"] == "ws_1"
    assert e[8].content["text"] == "One test fails."
    assert e[8].usage == {"input_tokens": 900, "output_tokens": 12}
    assert e[8].metadata["id"] == "msg_9"
    assert session.title == "Run the tests."
    assert session.metadata == {"model": "gpt-5-codex", "object": "response"}


def test_it_is_detected_and_other_formats_are_not_taken(tmp_path):
    assert detect_format(read_source(write(tmp_path, EXCHANGE["input"]))) == "openai-responses"
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert detect_format(read_source(write(tmp_path, chat, "chat.json"))) == "openai-chat"
    claude = {
        "system": "s",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
    }
    assert detect_format(read_source(write(tmp_path, claude, "a.json"))) == "anthropic-messages"


def test_short_form_messages_and_reused_call_ids(tmp_path):
    items = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "one"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "c",
            "output": [{"type": "input_text", "text": "two"}],
        },
    ]
    session = parse_path(write(tmp_path, items), "openai-responses")
    ids = [e.tool_call_id for e in session.entries if e.kind != "message"]
    assert ids == ["c", "c", "c#2", "c#2"]
    assert session.entries[4].content["output"] == "two"


@pytest.mark.parametrize(
    ("items", "location", "field"),
    [
        ([{"type": "message", "role": "robot", "content": "x"}], "index 0", "role"),
        ([{"type": "message", "role": "user", "content": None}], "index 0", "content"),
        ([{"type": "function_call", "name": "f", "arguments": "{}"}], "index 0", "call_id"),
        ([{"content": "x"}], "index 0", "type"),
        (
            [
                {"type": "message", "role": "user", "content": "x"},
                {"type": "function_call_output", "call_id": "nope", "output": "x"},
            ],
            "index 1",
            "tool_call_id",
        ),
    ],
)
def test_malformed_items_name_the_location_and_field(tmp_path, items, location, field):
    with pytest.raises(FormatError) as info:
        parse_path(write(tmp_path, items), "openai-responses")
    assert (info.value.location, info.value.field) == (location, field)


def test_it_imports_into_a_journal(tmp_path, db):
    from journal_app.services import journal_import

    result = journal_import(path=write(tmp_path, EXCHANGE), tenant="acme", session="codex")
    assert result.append.appended == 9
    again = journal_import(path=write(tmp_path, EXCHANGE), tenant="acme", session="codex")
    assert again.append.appended == 0
