"""The prefix index: a resent history placed by its new suffix (README "How the proxy
places a history"), the answer read alone, the body scan in one pass."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache

from journal_app.auth import api_key_authenticate
from journal_app.models import Session
from proxy_app import services
from proxy_app.bodies import bad_text, may_hold_bad_text
from proxy_app.matching import _parsed, answer_items, request_items
from proxy_app.prefix import prefix_digest, request_messages
from proxy_app.services import placement, prefix_index, sent_request
from tests.proxy_app.conftest import entries

SYSTEM = "You are a careful agent."


def _messages(n: int) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(n - 1)
    ]


def _record(tenant, session: str, messages: list[dict]) -> services.Recorded:
    body = {"model": "m", "messages": messages}
    _, items = services.request_read("openai", body)
    scope = services.ProxyScope(tenant, session, "main", None)
    scope.session = Session.objects.filter(tenant=tenant, key=session).first()
    request = services.RequestPrefix(*request_messages("openai", body))
    return services.conversation_record(scope=scope, items=items, request=request)


# ---------------------------------------------------------------- pure


def test_moved_cache_markers_give_the_same_digest():
    plain = [
        {"role": "user", "content": [{"type": "text", "text": "a"}]},
        {"role": "assistant", "content": "b"},
    ]
    marked = json.loads(json.dumps(plain))
    marked[0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert prefix_digest("sys", marked, 2) == prefix_digest("sys", plain, 2)
    changed = json.loads(json.dumps(plain))
    changed[0]["content"][0]["text"] = "A"
    assert prefix_digest("sys", changed, 2) != prefix_digest("sys", plain, 2)
    assert prefix_digest("other", plain, 2) != prefix_digest("sys", plain, 2)
    assert prefix_digest("sys", plain, 1) != prefix_digest("sys", plain, 2)


@pytest.mark.parametrize(
    "raw",
    [b'{"a":"x\\u0000"}', b'{"a":"\\ud800"}', b'{"\\udfff":1}', b'{"a":"ok\\u00e9"}'],
)
def test_the_byte_scan_never_misses_what_the_walk_finds(raw):
    found = bad_text(json.loads(raw))
    assert may_hold_bad_text(raw) or found is None
    assert (found is not None) == (b"u00e9" not in raw)


def test_a_clean_body_needs_no_walk():
    raw = json.dumps({"messages": [{"content": "caf\u00e9 \U0001f600"}]}, ensure_ascii=False)
    assert not may_hold_bad_text(raw.encode())
    # an escaped pair decodes to one character, no lone surrogate: the walk finds nothing
    escaped = json.dumps({"content": "\U0001f600"}).encode()
    assert may_hold_bad_text(escaped) and bad_text(json.loads(escaped)) is None


ANSWERS = [
    (
        "openai",
        {
            "role": "assistant",
            "content": "let me look",
            "tool_calls": [
                {"id": "c9", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
    ),
    (
        "anthropic",
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig=="},
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "t9", "name": "ls", "input": {"p": "."}},
            ],
        },
    ),
]


@pytest.mark.parametrize(("surface", "answer"), ANSWERS)
def test_an_answer_read_alone_equals_it_read_after_the_request(surface, answer):
    body = {"model": "m", "max_tokens": 10, "messages": _messages(5)[1:]}
    request = request_items(surface, body)
    fast = answer_items(surface, body, answer, request)
    data = {"messages": [*body["messages"], answer]}
    whole = _parsed(surface, data)[len(request) :]
    assert fast == whole
    assert fast[0].source_ref.startswith("messages[4]")


def test_an_answer_reusing_a_call_id_is_read_after_the_request():
    first = ANSWERS[0][1]
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "go"},
            first,
            {"role": "tool", "tool_call_id": "c9", "content": "x"},
        ],
    }
    request = request_items("openai", body)
    items = answer_items("openai", body, first, request)
    assert [i.tool_call_id for i in items if i.kind == "tool_call"] == ["c9#2"]


# ---------------------------------------------------------------- placement


@pytest.fixture
def tenant(db, key):
    cache.clear()
    return api_key_authenticate(raw=key).tenant


def test_a_resent_history_is_placed_without_reading_the_branch(tenant, monkeypatch):
    messages = _messages(60)
    first = _record(tenant, "idx", messages)
    assert (first.revision, first.appended) == (60, 60)

    def whole_branch(*args):
        raise AssertionError("the whole branch was read")

    monkeypatch.setattr(placement, "stored_entries", whole_branch)
    keyed = []
    original = prefix_index.parsed_key

    def counted(item, every=False):
        keyed.append(1)
        return original(item)

    monkeypatch.setattr(prefix_index, "parsed_key", counted)
    monkeypatch.setattr(placement, "parsed_key", counted)
    more = [*messages, {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]
    second = _record(tenant, "idx", more)
    assert (second.journal.branch, second.revision, second.appended) == ("main", 62, 2)
    assert second.known_messages == 60
    assert len(keyed) == 2  # only the new suffix was keyed
    again = _record(tenant, "idx", more)
    assert (again.revision, again.appended) == (62, 0)
    assert [e.text for e in entries("idx")][-2:] == ["a", "b"]


def test_a_changed_earlier_message_still_branches(tenant):
    messages = _messages(30)
    _record(tenant, "idx-edit", messages)
    edited = [*messages[:10], {"role": "user", "content": "edited"}, *messages[11:]]
    placed = _record(tenant, "idx-edit", edited)
    assert placed.journal.branch == "b2"
    assert placed.branched_from == "main@10"


def test_a_record_whose_entry_hash_changed_is_not_used(tenant):
    messages = _messages(20)
    first = _record(tenant, "idx-stale", messages)
    key = first.index_key
    rows = cache.get(key)
    rows[0] = (*rows[0][:4], "0" * 64, *rows[0][5:])  # the chain no longer holds it
    cache.set(key, rows)
    more = [*messages, {"role": "assistant", "content": "a"}]
    placed = _record(tenant, "idx-stale", more)
    assert (placed.revision, placed.appended, placed.known_messages) == (21, 1, 0)


def test_token_counts_of_a_known_prefix_are_reused(tenant):
    messages = _messages(40)
    body = {"model": "m", "messages": messages}
    first = _record(tenant, "idx-tokens", messages)
    whole = services.request_tokens("openai", body)
    assert services.request_tokens("openai", body, first) == whole
    more = [*messages, {"role": "assistant", "content": "a b c"}]
    second = _record(tenant, "idx-tokens", more)
    assert second.known_tokens == whole - sent_request.token_meter().per_request
    body2 = {"model": "m", "messages": more}
    assert services.request_tokens("openai", body2, second) == services.request_tokens(
        "openai", body2
    )
