"""Anthropic Messages importer: inline fixtures (no corpus file), pairing, detection, errors."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from journal_app.formats import FormatError, parse_path
from journal_app.formats import anthropic as fmt
from journal_app.formats.source import read_source

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 23).decode()  # 31 bytes

CONVERSATION = {
    "model": "claude-sonnet-4-20250514",
    "system": "You are a careful coding agent.",
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Why does the build fail? Screenshot attached."},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "Check the log and the config.",
                    "signature": "sig1",
                },
                {"type": "text", "text": "Let me look at both files."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read",
                    "input": {"path": "build.log"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "read",
                    "input": {"path": "setup.cfg"},
                },
            ],
            "id": "msg_01",
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 120, "output_tokens": 40},
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "error: missing dep"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "ENOENT"}],
                    "is_error": True,
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": "EnCrYpTeD=="},
                {"type": "text", "text": "The dependency is missing."},
            ],
        },
        {"role": "user", "content": "Thanks."},
    ],
}


def _write(tmp_path: Path, value, name: str = "messages.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_parallel_tool_use_thinking_and_images(tmp_path):
    s = parse_path(_write(tmp_path, CONVERSATION))
    assert s.format == "anthropic-messages"
    assert [(e.kind, e.role) for e in s.entries] == [
        ("message", "system"),
        ("message", "user"),
        ("reasoning", "assistant"),
        ("message", "assistant"),
        ("tool_call", "assistant"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("tool_result", "tool"),
        ("reasoning", "assistant"),
        ("message", "assistant"),
        ("message", "user"),
    ]
    system, user, thinking, text, call1, call2, res1, res2, redacted, _, thanks = s.entries
    assert system.content == {"text": "You are a careful coding agent."}
    assert s.metadata == {"model": "claude-sonnet-4-20250514"}
    # The image is kept verbatim; its type and byte size are metadata, not text.
    assert user.content["text"] == "Why does the build fail? Screenshot attached."
    assert user.content["blocks"] == CONVERSATION["messages"][0]["content"]
    assert user.metadata["images"] == [
        {"source_type": "base64", "media_type": "image/png", "bytes": 31}
    ]
    assert thinking.content == {"text": "Check the log and the config."}
    assert thinking.metadata["signature"] == "sig1"
    # Message-level fields go to the first entry of the message.
    assert thinking.usage == {"input_tokens": 120, "output_tokens": 40}
    assert thinking.metadata["id"] == "msg_01" and thinking.metadata["stop_reason"] == "tool_use"
    assert text.content == {"text": "Let me look at both files."}
    assert (call1.tool_call_id, call1.tool_name, call1.content["arguments"]) == (
        "toolu_1",
        "read",
        {"path": "build.log"},
    )
    assert call2.tool_call_id == "toolu_2"
    assert res1.tool_call_id == "toolu_1" and res1.content == {
        "output": "error: missing dep",
        "is_error": False,
    }
    assert res2.content == {"output": "ENOENT", "is_error": True}
    assert redacted.content == {"encrypted": "EnCrYpTeD=="}
    assert thanks.content == {"text": "Thanks."}
    assert s.title == "Why does the build fail? Screenshot attached."
    # Every call is answered.
    calls = {e.tool_call_id for e in s.entries if e.kind == "tool_call"}
    assert calls == {e.tool_call_id for e in s.entries if e.kind == "tool_result"}


def test_bare_list_and_unanswered_call(tmp_path):
    msgs = [
        {"role": "user", "content": "Run it"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t9", "name": "sh", "input": {}}],
        },
    ]
    s = parse_path(_write(tmp_path, msgs))
    assert s.format == "anthropic-messages"
    assert [e.kind for e in s.entries] == ["message", "tool_call"]
    assert s.entries[1].source_ref == "index 1.content[0]"
    unanswered = [e for e in s.entries if e.kind == "tool_call"]
    assert len(unanswered) == 1  # a dangling call is allowed; rounds mark it


def test_tool_result_without_its_call_is_refused(tmp_path):
    msgs = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "zzz", "content": "x"}],
        },
    ]
    path = _write(tmp_path, msgs)
    with pytest.raises(FormatError) as err:
        parse_path(path)
    assert str(path) in str(err.value) and "index 2" in str(err.value)
    assert "zzz" in str(err.value) and err.value.field == "tool_call_id"


@pytest.mark.parametrize(
    ("messages", "where", "field", "reason"),
    [
        ([{"content": [{"type": "text", "text": "x"}]}], "index 0", "role", "missing"),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "robot", "content": [{"type": "text", "text": "x"}]},
            ],
            "index 1",
            "role",
            "unknown role",
        ),
        (
            [
                {"role": "user", "content": [{"type": "text", "text": "a"}]},
                {"role": "assistant", "content": None},
            ],
            "index 1",
            "content",
            "content is null",
        ),
        (
            [{"role": "user", "content": [{"type": "text", "text": 5}]}],
            "index 0",
            "content[0].text",
            "expected a string",
        ),
        (
            [
                {"role": "user", "content": [{"type": "text", "text": "a"}]},
                {"role": "assistant", "content": 7},
            ],
            "index 1",
            "content",
            "expected a string or a list",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}],
            "index 0",
            "content[0].tool_use_id",
            "missing",
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}],
            "index 0",
            "content[0].id",
            "missing",
        ),
    ],
)
def test_bad_input_names_file_index_and_field(tmp_path, messages, where, field, reason):
    path = _write(tmp_path, messages)
    with pytest.raises(FormatError) as err:
        parse_path(path, "anthropic-messages")
    text = str(err.value)
    assert str(path) in text and where in text and reason in text
    assert err.value.location == where and err.value.field == field


def test_errors_in_wrapper_name_messages_index(tmp_path):
    bad = {
        "system": "s",
        "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": None}],
    }
    path = _write(tmp_path, bad)
    with pytest.raises(FormatError) as err:
        parse_path(path)
    assert "messages[1]" in str(err.value) and "'content'" in str(err.value)


def test_detect(tmp_path, corpus):
    assert fmt.detect(read_source(_write(tmp_path, CONVERSATION)))
    assert fmt.detect(
        read_source(
            _write(
                tmp_path, {"system": "s", "messages": [{"role": "user", "content": "hi"}]}, "s.json"
            )
        )
    )
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    plain_path = _write(tmp_path, plain, "plain.json")
    assert not fmt.detect(read_source(plain_path))
    assert parse_path(plain_path).format == "openai-chat"
    openai_parts = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    assert not fmt.detect(read_source(_write(tmp_path, openai_parts, "o.json")))
    for path in sorted(corpus.rglob("*")):
        if path.is_file() and path.suffix != ".md":
            assert not fmt.detect(read_source(path)), path
    assert not fmt.detect(read_source(corpus / "opencode-export" / "khala-sessions"))
