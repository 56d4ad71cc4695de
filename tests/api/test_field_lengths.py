"""The API refuses a tool name or call id longer than is stored with the importers' reason
(the check is on the one append path: ``journal_app.chain``)."""

from __future__ import annotations

from journal_app.models import Entry
from tests.journal_app.test_field_lengths import LONG, REASON


def test_the_api_refuses_it_with_the_importers_reason(api):
    entries = [
        {"kind": "message", "role": "user", "content": {"text": "go"}},
        {
            "kind": "tool_call",
            "role": "assistant",
            "tool_call_id": "c1",
            "tool_name": LONG,
            "content": {"name": LONG, "arguments": {}},
        },
    ]
    r = api.post("/sessions/s1/main/main/entries", {"start_seq": 1, "entries": entries})
    assert r.status_code == 422, r.content
    body = r.json()
    assert body["field"] == "entries[1].tool_name"
    assert REASON in body["message"]
    assert not Entry.objects.exists()


def test_a_long_tool_call_id_is_refused_alike(api):
    entries = [
        {"kind": "message", "role": "user", "content": {"text": "go"}},
        {
            "kind": "tool_call",
            "role": "assistant",
            "tool_call_id": LONG,
            "tool_name": "exec",
            "content": {"name": "exec", "arguments": {}},
        },
    ]
    r = api.post("/sessions/s1/main/main/entries", {"start_seq": 1, "entries": entries})
    assert r.status_code == 422, r.content
    assert r.json()["field"] == "entries[1].tool_call_id"
    assert not Entry.objects.exists()
