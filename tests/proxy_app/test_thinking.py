"""Anthropic thinking blocks on the proxy path: a compacted request keeps
the thinking blocks of the ongoing tool loop's last assistant turn byte for byte (signature
included), as the Messages API requires with extended thinking on, and drops the others."""

from __future__ import annotations

from tests.proxy_app.conftest import entries
from tests.proxy_app.test_anthropic_proxy import SYSTEM, client


def history(rounds: int) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": "Audit the repository."}]
    for n in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": f"Step {n}: read file {n}.",
                        "signature": f"sig{n}+/=",
                    },
                    {"type": "tool_use", "id": f"toolu_{n}", "name": "cat", "input": {"n": n}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "data " * 400}
                ],
            }
        )
    return messages


def sent_compacted(live_server, key, upstream, session: str, messages: list, **kw) -> dict:
    """The body the upstream got for ``messages`` sent at a 1,500-token working budget."""
    small = client(
        live_server,
        key,
        **{"X-Ledgerkeep-Session": session, "X-Ledgerkeep-Working-Budget": "1500"},
    )
    raw = small.messages.with_raw_response.create(
        model="claude-x", max_tokens=256, system=SYSTEM, messages=messages, **kw
    )
    assert raw.headers["X-Ledgerkeep-Compacted"] == "true"
    return upstream.requests[-1]


def test_a_compacted_request_keeps_the_tool_loops_last_thinking_blocks(live_server, key, upstream):
    upstream.push(text="audit done")
    thinking = {"type": "enabled", "budget_tokens": 1024}
    sent = sent_compacted(live_server, key, upstream, "thinking", history(5), thinking=thinking)
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    last = [m for m in sent["messages"] if m["role"] == "assistant"][-1]
    assert last["content"][0] == {
        "type": "thinking",
        "thinking": "Step 4: read file 4.",
        "signature": "sig4+/=",
    }
    assert last["content"][1]["type"] == "tool_use"
    kept = [b for m in sent["messages"] for b in m["content"] if b.get("type") == "thinking"]
    assert kept == [last["content"][0]]  # earlier turns' blocks may go, and do
    # the journal keeps every block with its signature; no other view shows them
    reasoning = [e for e in entries("thinking") if e.kind == "reasoning"]
    assert [e.meta_dict.get("signature") for e in reasoning] == [f"sig{n}+/=" for n in range(5)]


def test_a_request_whose_last_turn_is_the_users_carries_no_thinking(live_server, key, upstream):
    upstream.push(text="ok")
    messages = history(5)
    messages[-1]["content"].append({"type": "text", "text": "Stop here and summarise."})
    messages += [
        {"role": "assistant", "content": [{"type": "text", "text": "Summary: all files read."}]},
        {"role": "user", "content": "Thanks, now write the report."},
    ]
    sent = sent_compacted(live_server, key, upstream, "thinking-done", messages)
    assert not [b for m in sent["messages"] for b in m["content"] if b.get("type") == "thinking"]
