"""A resent history read by its new messages only (proxy_app/reading.py): the work of a
call that adds one message does not grow with the history, and what it reads is what a
whole reading gives."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy_app import matching
from proxy_app.bodies import json_depth
from proxy_app.matching import _parsed, _request_data, request_items
from proxy_app.prefix import prefix_digest, request_messages
from proxy_app.reading import forget_readings, known_call_ids, read_counts
from proxy_app.services.prefix_index import RequestPrefix


@pytest.fixture(autouse=True)
def _fresh_memo() -> Any:
    forget_readings()
    yield
    forget_readings()


def _history(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are careful."}]
    for i in range(n - 1):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"})
    return messages


def _whole(surface: str, body: dict[str, Any]) -> list[Any]:
    return _parsed(surface, _request_data(surface, body))


@pytest.fixture
def importer_messages(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages each call of the importer was given."""
    seen: list[int] = []
    real = matching._parsed

    def counting(surface: str, data: dict[str, Any]) -> list[Any]:
        seen.append(len(data.get("messages") or data.get("input") or []))
        return real(surface, data)

    monkeypatch.setattr(matching, "_parsed", counting)
    return seen


def test_one_new_message_reads_one_message_not_the_history(importer_messages: list[int]) -> None:
    history = _history(1000)
    request_items("openai", {"model": "m", "messages": history})
    importer_messages.clear()
    grown = [
        *history,
        {"role": "assistant", "content": "answer"},
        {"role": "user", "content": "go"},
    ]
    items = request_items("openai", {"model": "m", "messages": grown})
    assert importer_messages == [2]
    assert items == _whole("openai", {"messages": grown})
    assert items[-1].source_ref == "messages[1001]"


def test_the_digest_of_a_grown_history_encodes_only_its_new_messages() -> None:
    history = _history(1000)
    body = {"model": "m", "messages": history}
    request_items("openai", body)
    body = {"model": "m", "messages": [*history, {"role": "user", "content": "more"}]}
    before = read_counts().messages_digested
    request_items("openai", body)
    request = RequestPrefix(*request_messages("openai", body))
    assert request.digest(1000) == prefix_digest(None, body["messages"], 1000)
    assert request.digest(1001) == prefix_digest(None, body["messages"], 1001)
    assert read_counts().messages_digested - before == 1


def test_a_digest_of_other_messages_is_computed_whole() -> None:
    body = {"model": "m", "messages": _history(5)}
    request_items("openai", body)
    other = [dict(m) for m in body["messages"]]  # equal, but not the messages just read
    assert RequestPrefix(None, other).digest(5) == prefix_digest(None, other, 5)


def _tool_turn(call_id: str) -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": "a.txt"},
    ]


@pytest.mark.parametrize(
    "suffix",
    [
        _tool_turn("call_new"),  # self-contained: read alone
        _tool_turn("call_1"),  # a reused id: the importer numbers it call_1#2
        [{"role": "tool", "tool_call_id": "call_2", "content": "late"}],  # answers the prefix
    ],
)
def test_tool_turns_read_as_a_whole_reading_reads_them(suffix: list[dict[str, Any]]) -> None:
    call = {"id": "call_2", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
    history = [
        *_history(3),
        *_tool_turn("call_1"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    request_items("openai", {"model": "m", "messages": history})
    grown = {"model": "m", "messages": [*history, *suffix]}
    assert request_items("openai", grown) == _whole("openai", grown)


def test_a_changed_old_message_is_read_again() -> None:
    history = _history(6)
    history[2] = {"role": "user", "content": "m1", "flag": 1}
    request_items("openai", {"model": "m", "messages": history})
    edited = [*history[:2], {"role": "user", "content": "m1", "flag": True}, *history[3:]]
    edited.append({"role": "user", "content": "new"})
    before = read_counts().whole
    items = request_items("openai", {"model": "m", "messages": edited})
    assert read_counts().whole == before + 1
    assert items[2].metadata == {"flag": True}


def test_anthropic_system_is_part_of_what_must_match() -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    first = {"model": "m", "max_tokens": 9, "system": "A", "messages": history}
    request_items("anthropic", first)
    grown = {**first, "system": "B", "messages": [*history, {"role": "user", "content": "x"}]}
    items = request_items("anthropic", grown)
    assert items == _whole("anthropic", grown)
    assert items[0].content["text"] == "B"


def test_json_depth_skips_strings_and_escapes() -> None:
    texts = [
        b"1",
        b"[]",
        b'{"a":[[{"b":"[[[["}]]]}',
        b'["\\\\",[["\\"]"]]]',
        b'"\\\\\\"[["',
        json.dumps([{"k": 'q"[{', "l": ["\\", ["]"]]}]).encode(),
    ]
    assert [json_depth(t) for t in texts] == [0, 1, 4, 3, 0, 4]


def test_the_call_ids_of_the_request_just_read_are_known_without_a_walk() -> None:
    history = [*_history(3), *_tool_turn("call_1"), *_tool_turn("call_1")]
    items = request_items("openai", {"model": "m", "messages": history})
    assert known_call_ids(items) == {"call_1", "call_1#2"}
    assert known_call_ids(list(items)) is None  # another list: the caller walks it
