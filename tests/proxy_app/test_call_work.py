"""The work of a proxied call that adds one message does not grow with the history: the
messages read, the prefix digest's messages, the items keyed and the queries are the same
for 20 and 1,000 messages of history, and what is journaled is byte for byte what a whole
reading journals."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from journal_app.auth import api_key_authenticate
from journal_app.models import Session
from proxy_app import matching, services
from proxy_app.prefix import request_messages
from proxy_app.reading import forget_readings, read_counts
from proxy_app.services import prefix_index
from tests.proxy_app.conftest import entries


@pytest.fixture
def tenant(db, key):
    cache.clear()
    forget_readings()
    yield api_key_authenticate(raw=key).tenant
    forget_readings()


def _messages(n: int) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are careful."}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(n - 1)
    ]


def _call(tenant, session: str, messages: list[dict[str, Any]]) -> services.Recorded:
    """Steps 1-3's services for one call, then its answer journaled."""
    body = {"model": "m", "messages": messages}
    _, items = services.request_read("openai", body)
    scope = services.ProxyScope(tenant, session, "main", None)
    scope.session = Session.objects.filter(tenant=tenant, key=session).first()
    request = services.RequestPrefix(*request_messages("openai", body))
    recorded = services.conversation_record(scope=scope, items=items, request=request)
    services.request_tokens("openai", body, recorded)
    answer = {"role": "assistant", "content": f"answer {len(messages)}"}
    return services.answer_record(
        surface="openai",
        body=body,
        items=items,
        recorded=recorded,
        answer=answer,
        usage=None,
        meta={},
    )


def _work(tenant, monkeypatch, n: int) -> dict[str, int]:
    """What the second call of a session of ``n`` messages (one new user message) did."""
    messages = _messages(n)
    _call(tenant, f"work-{n}", messages)
    keyed: list[int] = []
    real_key = prefix_index.parsed_key

    def counted(item, every=False):
        keyed.append(1)
        return real_key(item, every=every)

    monkeypatch.setattr(prefix_index, "parsed_key", counted)
    read: list[int] = []
    real_parsed = matching._parsed

    def reading(surface, data):
        read.append(len(data["messages"]))
        return real_parsed(surface, data)

    monkeypatch.setattr(matching, "_parsed", reading)
    grown = [
        *messages,
        {"role": "assistant", "content": f"answer {n}"},
        {"role": "user", "content": "next"},
    ]
    before = read_counts()
    with CaptureQueriesContext(connection) as queries:
        recorded = _call(tenant, f"work-{n}", grown)
    monkeypatch.undo()
    assert recorded.revision == n + 3
    return {
        "queries": len(queries),
        "messages_read": sum(read),
        "keyed": len(keyed),
        "digested": read_counts().messages_digested - before.messages_digested,
    }


def test_a_call_adding_a_message_does_the_same_work_at_20_and_1000_messages(tenant, monkeypatch):
    short = _work(tenant, monkeypatch, 20)
    long = _work(tenant, monkeypatch, 1000)
    assert long == short
    # the request's two new messages and the answer read alone; the new messages keyed
    assert long["messages_read"] == 3
    assert long["keyed"] == 2
    assert long["digested"] == 2


def test_a_history_read_by_its_suffix_journals_the_same_hashes(tenant):
    messages = _messages(50)
    call = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    grown = [
        *messages,
        {"role": "assistant", "content": "answer 50"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        {"role": "user", "content": "next"},
    ]
    _call(tenant, "by-suffix", messages)
    _call(tenant, "by-suffix", grown)
    assert read_counts().suffix >= 1
    forget_readings()
    _call(tenant, "whole", grown)
    suffix_rows = entries("by-suffix")
    whole_rows = entries("whole")

    def hashes(rows):
        return [(e.body, e.body_hash, e.meta_hash, e.tool_call_id, e.source_ref) for e in rows]

    assert len(suffix_rows) == len(grown) + 1  # and the last answer
    assert hashes(suffix_rows) == hashes(whole_rows)
