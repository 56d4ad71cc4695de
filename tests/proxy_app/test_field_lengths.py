"""The proxy refuses a tool name longer than is stored with the importers' reason, before
anything is forwarded or journaled (the check is the shared append path's)."""

from __future__ import annotations

import httpx

from journal_app.models import Entry
from tests.journal_app.test_field_lengths import LONG, REASON


def test_the_proxy_refuses_a_tool_name_longer_than_is_stored(live_server, key, upstream):
    upstream.push(text="never sent")
    body = {
        "model": "scripted-model",
        "messages": [
            {"role": "user", "content": "Run it."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": LONG, "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "done"},
        ],
    }
    r = httpx.post(
        f"{live_server.url}/proxy/openai/v1/chat/completions",
        json=body,
        headers={"X-Ledgerkeep-Key": key, "X-Ledgerkeep-Session": "long-name"},
        timeout=10,
    )
    assert r.status_code == 422, r.text
    error = r.json()
    assert error["code"] == "invalid_entry"
    assert error["field"] == "tool_name"
    assert REASON in error["message"]
    assert not Entry.objects.exists()
    assert upstream.requests == []
