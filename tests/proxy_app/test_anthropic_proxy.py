"""The Anthropic Messages proxy, end to end with the real ``anthropic`` client."""

from __future__ import annotations

import anthropic
import pytest

from journal_app.models import Entry, Journal
from tests.proxy_app.conftest import entries, shape

SYSTEM = "You are a careful agent. Keep the payments tables untouched."


def client(live_server, key: str, **headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=f"{live_server.url}/proxy/anthropic",
        api_key="sk-ant-client",
        default_headers={"X-Ledgerkeep-Key": key, **headers},
        max_retries=0,
        timeout=10,
    )


def conversation(c, upstream, *, stream: bool = False):
    upstream.push(calls=[("toolu_1", "read", {"path": "a.py"}), ("toolu_2", "ls", {"dir": "."})])
    upstream.push(text="Both files look fine.")
    messages: list = [{"role": "user", "content": "Check a.py and the folder."}]
    raws = []
    for _ in range(2):
        if stream:
            with c.messages.stream(
                model="claude-x", max_tokens=512, system=SYSTEM, messages=messages
            ) as s:
                final = s.get_final_message()
        else:
            raw = c.messages.with_raw_response.create(
                model="claude-x", max_tokens=512, system=SYSTEM, messages=messages
            )
            raws.append(raw)
            final = raw.parse()
        messages.append({"role": "assistant", "content": final.content})
        uses = [b for b in final.content if b.type == "tool_use"]
        if uses:
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": b.id,
                            "content": f"output of {b.name}",
                        }
                        for b in uses
                    ],
                }
            )
    return messages, raws


EXPECTED = [
    ("message", "system", SYSTEM),
    ("message", "user", "Check a.py and the folder."),
    ("tool_call", "assistant", "toolu_1"),
    ("tool_call", "assistant", "toolu_2"),
    ("tool_result", "tool", "toolu_1"),
    ("tool_result", "tool", "toolu_2"),
    ("message", "assistant", "Both files look fine."),
]


def test_a_tool_conversation_journals_each_message_once(live_server, key, upstream):
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "claude"})
    messages, raws = conversation(c, upstream)
    rows = entries("claude")
    assert shape(rows) == EXPECTED
    assert rows[2].content == {"name": "read", "arguments": {"path": "a.py"}}
    assert rows[-1].meta_dict["usage"] == {"input_tokens": 120, "output_tokens": 30}
    assert rows[-1].meta_dict["stop_reason"] == "end_turn"
    assert upstream.headers[0]["x-api-key"] == "sk-ant-client"
    assert upstream.requests[0]["system"] == SYSTEM
    assert raws[-1].headers["X-Ledgerkeep-Compacted"] == "false"
    # the same request again appends nothing
    upstream.push(text="Both files look fine.")
    c.messages.create(model="claude-x", max_tokens=512, system=SYSTEM, messages=messages[:-1])
    assert len(entries("claude")) == len(EXPECTED)
    assert Journal.objects.filter(session__key="claude").count() == 1


def test_streaming_messages_end_to_end(live_server, key, upstream):
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "claude-stream"})
    conversation(c, upstream, stream=True)
    rows = entries("claude-stream")
    assert shape(rows)[:6] == EXPECTED[:6]
    assert rows[-1].kind == "message" and rows[-1].text.strip() == "Both files look fine."
    assert rows[-1].meta_dict["streamed"] is True
    assert rows[-1].meta_dict["usage"]["output_tokens"] == 30
    assert rows[2].content["arguments"] == {"path": "a.py"}


def test_over_budget_the_system_pin_stays_verbatim(live_server, key, upstream):
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "claude-long"})
    messages: list = [{"role": "user", "content": "Audit the repository."}]
    for n in range(5):
        upstream.push(calls=[(f"toolu_{n}", "cat", {"n": n})])
        final = c.messages.create(
            model="claude-x", max_tokens=256, system=SYSTEM, messages=messages
        )
        messages.append({"role": "assistant", "content": final.content})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "data " * 400}
                ],
            }
        )
    upstream.push(text="audit done")
    small = client(
        live_server,
        key,
        **{"X-Ledgerkeep-Session": "claude-long", "X-Ledgerkeep-Working-Budget": "1200"},
    )
    raw = small.messages.with_raw_response.create(
        model="claude-x", max_tokens=256, system=SYSTEM, messages=messages
    )
    assert raw.headers["X-Ledgerkeep-Compacted"] == "true"
    sent = upstream.requests[-1]
    assert sent["system"][0] == {"type": "text", "text": SYSTEM}
    uses = [b["id"] for m in sent["messages"] for b in m["content"] if b.get("type") == "tool_use"]
    results = [
        b["tool_use_id"]
        for m in sent["messages"]
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert sorted(uses) == sorted(results)
    assert sent["messages"][0]["role"] == "user"


def test_bad_input_is_refused_before_anything(live_server, key, upstream):
    with pytest.raises(anthropic.AuthenticationError):
        client(live_server, "").messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(anthropic.UnprocessableEntityError) as info:
        client(live_server, key).messages.create(
            model="m", max_tokens=10, messages=[{"role": "robot", "content": "hi"}]
        )
    assert info.value.response.json()["field"] == "messages[0].role"
    assert upstream.requests == []
    assert Entry.objects.count() == 0


def test_the_answer_carries_the_provider_output_tokens_as_its_figure(live_server, key, upstream):
    upstream.push(text="Fine.", usage=(40, 321))
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "afig"})
    c.messages.create(model="m", max_tokens=100, messages=[{"role": "user", "content": "hi"}])
    answer = entries("afig")[1]
    assert (answer.role, answer.token_count) == ("assistant", 321)
    assert answer.token_source == "provider:output_tokens"
