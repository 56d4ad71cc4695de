"""The pure matching and stream assembly of the proxy (no database)."""

from __future__ import annotations

import json

import pytest

from proxy_app.matching import (
    RequestInvalid,
    answer_items,
    check_request,
    parsed_key,
    plan_placement,
    request_items,
)
from proxy_app.streams import AnthropicAssembler, LineSplitter, OpenAIAssembler


def keys(*texts: str):
    return [("message", "user", "", t) for t in texts]


def test_a_branch_that_is_a_prefix_gets_the_suffix():
    plan = plan_placement(keys("a", "b"), keys("a", "b", "c", "d"))
    assert (plan.action, plan.matched, plan.start) == ("append", 2, 2)


def test_the_same_history_again_appends_nothing():
    plan = plan_placement(keys("a", "b", "c"), keys("a", "b"))
    assert (plan.action, plan.start, plan.stored_end) == ("none", 2, 2)


def test_a_divergence_is_a_branch_at_the_divergence_point():
    plan = plan_placement(keys("a", "b", "c"), keys("a", "x", "c"))
    assert (plan.action, plan.matched, plan.start, plan.stored_end) == ("branch", 1, 1, 1)


def test_unkeyed_entries_are_skipped_on_the_stored_side():
    stored = [keys("a")[0], None, keys("b")[0], None]  # an event, then an interrupted answer
    plan = plan_placement(stored, keys("a", "b", "c"))
    assert (plan.action, plan.start) == ("append", 2)


def test_null_fields_and_cache_markers_do_not_change_the_key():
    plain = request_items(
        "anthropic",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
    )
    marked = request_items(
        "anthropic",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
                    ],
                }
            ]
        },
    )
    other = request_items("anthropic", {"messages": [{"role": "user", "content": "hello"}]})
    assert parsed_key(plain[0]) == parsed_key(marked[0])
    assert parsed_key(plain[0]) != parsed_key(other[0])


def test_answer_ids_match_a_later_resend():
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
    }
    reused = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    items = request_items("openai", body)
    answer = answer_items("openai", body, reused, items)
    resent = request_items("openai", {**body, "messages": [*body["messages"], reused]})
    assert answer[0].tool_call_id == "c1#2"
    assert [parsed_key(i) for i in resent[len(items) :]] == [parsed_key(a) for a in answer]


@pytest.mark.parametrize(
    ("surface", "body", "field"),
    [
        ("openai", [], "body"),
        ("openai", {"model": "", "messages": [{"role": "user", "content": "x"}]}, "model"),
        ("anthropic", {"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        ("anthropic", {"model": "m", "max_tokens": 5, "messages": [], "system": 3}, "messages"),
    ],
)
def test_check_request_names_the_field(surface, body, field):
    with pytest.raises(RequestInvalid) as info:
        check_request(surface, body)
    assert info.value.field == field


def test_line_splitter_waits_for_a_torn_line():
    split = LineSplitter()
    assert split.feed(b"data: 1\ndata: ") == ["data: 1"]
    assert split.feed(b"2\n") == ["data: 2"]


def test_openai_assembler_joins_content_and_call_pieces():
    a = OpenAIAssembler()
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
        {"choices": [{"index": 0, "delta": {"content": "lo"}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "c", "function": {"name": "f", "arguments": '{"a"'}}
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]},
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
    ]
    raw = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    for i in range(0, len(raw), 7):  # torn anywhere
        a.feed(raw[i : i + 7].encode())
    assert a.done
    assert a.message() == {
        "role": "assistant",
        "content": "Hello",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
        ],
    }
    assert a.usage == {"prompt_tokens": 3, "completion_tokens": 4}
    assert a.finish_reason == "tool_calls"


def test_anthropic_assembler_keeps_unfinished_tool_input_raw():
    a = AnthropicAssembler()
    events = [
        {
            "type": "message_start",
            "message": {"id": "m", "model": "x", "usage": {"input_tokens": 5}},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"pa'},
        },
    ]
    a.feed("".join(f"event: e\ndata: {json.dumps(e)}\n\n" for e in events).encode())
    assert not a.done and a.started
    assert a.message()["content"][0]["input"] == {"_partial_json": '{"pa'}
