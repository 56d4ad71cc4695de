"""Prompt caching through the proxy: markers kept and placed, compacted requests that
extend the previous one until a rebuild (README "Prompt caching through the proxy")."""

from __future__ import annotations

import json

from django.core.cache import cache

from journal_app.tokens import count_tokens
from proxy_app.caching import MAX_MARKS, client_marks, marks_place, shared_prefix, stable_end
from tests.proxy_app.test_anthropic_proxy import SYSTEM, client

MARK = {"type": "ephemeral"}


def _marks(request: dict) -> list[str]:
    """Where the markers are: ``system[i]`` / ``messages[i][j]``."""
    out = []
    for i, b in enumerate(request.get("system") or []):
        if "cache_control" in b:
            out.append(f"system[{i}]")
    for i, m in enumerate(request["messages"]):
        for j, b in enumerate(m["content"] if isinstance(m["content"], list) else []):
            if isinstance(b, dict) and "cache_control" in b:
                out.append(f"messages[{i}][{j}]")
    return out


def test_surviving_blocks_get_their_marker_back_and_the_stable_prefix_one():
    sent = {
        "system": [{"type": "text", "text": "S", "cache_control": MARK}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "task", "cache_control": MARK}]},
            {"role": "assistant", "content": "dropped"},
            {"role": "user", "content": [{"type": "text", "text": "last", "cache_control": MARK}]},
        ],
    }
    built = {
        "system": [{"type": "text", "text": "S"}],
        "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "a receipt"},
            {"role": "user", "content": [{"type": "text", "text": "last"}]},
        ],
    }
    out, placed = marks_place(built, client_marks(sent), stable=2)
    # system and "task" and "last" had markers; the stable prefix ends with message 1
    assert _marks(out) == ["system[0]", "messages[0][0]", "messages[1][0]", "messages[2][0]"]
    assert placed == 4
    assert built["messages"][0]["content"] == "task"  # the input is not changed


def test_never_more_than_four_markers_the_stable_one_first():
    blocks = [{"type": "text", "text": f"t{i}", "cache_control": MARK} for i in range(6)]
    sent = {"messages": [{"role": "user", "content": blocks}]}
    built = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "ckpt"}]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [dict(b) for b in blocks]},
        ]
    }
    out, placed = marks_place(built, client_marks(sent), stable=1)
    assert placed == MAX_MARKS
    # the stable prefix's marker, then the client's last three
    assert _marks(out) == ["messages[0][0]", "messages[2][3]", "messages[2][4]", "messages[2][5]"]


def test_the_stable_prefix_ends_before_the_first_message_holding_a_tail_entry():
    assert stable_end([["a"], ["b"], ["c", "d"], ["e"]], {"d", "e"}) == 2
    assert stable_end([["a"]], {"z"}) == 1
    assert stable_end([], {"z"}) == 0


def test_shared_prefix_counts_blocks_up_to_the_first_difference():
    def count(role, block):
        return len(json.dumps(block))

    a = {"system": "S", "messages": [{"role": "user", "content": "x"}]}
    b = {"system": [{"type": "text", "text": "S", "cache_control": MARK}], "messages": []}
    shared, total = shared_prefix(a, b, count)
    assert shared == count("system", {"type": "text", "text": "S"}) and total > shared
    assert shared_prefix(a, a, count) == (total, total)


def test_compacted_calls_extend_the_previous_request_between_rebuilds(
    live_server, key, upstream, settings
):
    """An Anthropic loop over its working budget: the calls after a compaction send the
    previous request followed by the new messages, until it would not fit; the client's
    markers survive and one ends the stable prefix."""
    cache.clear()
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9  # no fold lands: only rebuilds for room
    c = client(
        live_server, key, **{"X-Ledgerkeep-Session": "cache", "X-Ledgerkeep-Working-Budget": "6000"}
    )
    system = [{"type": "text", "text": SYSTEM, "cache_control": MARK}]
    messages: list = [{"role": "user", "content": [{"type": "text", "text": "Audit it."}]}]
    compacted = []
    for n in range(16):
        upstream.push(calls=[(f"toolu_{n}", "cat", {"n": n})])
        raw = c.messages.with_raw_response.create(
            model="claude-x", max_tokens=256, system=system, messages=messages
        )
        compacted.append(raw.headers["X-Ledgerkeep-Compacted"] == "true")
        final = raw.parse()
        for m in messages:  # the client moves its marker to the newest block
            for b in m["content"]:
                b.pop("cache_control", None)
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in final.content],
            }
        )
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"{n} " * 300}
        messages.append({"role": "user", "content": [{**result, "cache_control": MARK}]})
    sent = upstream.requests
    assert sum(compacted) >= 6

    def count(role, block):
        return count_tokens(json.dumps(block), "o200k_base")

    shares = [
        shared_prefix(sent[i - 1], sent[i], count)
        for i in range(1, len(sent))
        if compacted[i] and compacted[i - 1]
    ]
    whole = [s for s, t in shares if s == t]
    assert len(whole) >= len(shares) // 2  # most compacted calls extend the previous one
    for i, request in enumerate(sent):
        if compacted[i]:
            assert "system[0]" in _marks(request)  # the client's marker kept
            assert len(_marks(request)) <= MAX_MARKS
            last = request["messages"][-1]["content"][-1]
            assert last.get("cache_control") == MARK  # the newest block's marker kept
            uses = [
                b["id"]
                for m in request["messages"]
                for b in m["content"]
                if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
            results = [
                b["tool_use_id"]
                for m in request["messages"]
                for b in m["content"]
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
            assert sorted(uses) == sorted(results)


def test_markers_on_the_tools_count_against_the_four():
    """A client marking its tools, its system prompt and its last two messages (a common
    agent setup) sent 5 markers through the proxy, which Anthropic refuses."""
    sent = {
        "tools": [{"name": "bash", "input_schema": {}, "cache_control": MARK}],
        "system": [{"type": "text", "text": "S", "cache_control": MARK}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": MARK}]},
            {"role": "user", "content": [{"type": "text", "text": "b", "cache_control": MARK}]},
        ],
    }
    built = {
        "tools": sent["tools"],
        "system": [{"type": "text", "text": "S"}],
        "messages": [
            {"role": "user", "content": "ckpt"},
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "user", "content": [{"type": "text", "text": "b"}]},
        ],
    }
    out, placed = marks_place(built, client_marks(sent), stable=1)
    assert placed == MAX_MARKS
    # the tool's marker stays; then the stable prefix's; then the client's last two
    assert "cache_control" in out["tools"][0]
    assert _marks(out) == ["messages[0][0]", "messages[1][0]", "messages[2][0]"]
    many = [dict(t, name=f"t{i}") for i, t in enumerate(sent["tools"] * 4)]
    out, placed = marks_place({**built, "tools": many}, client_marks(sent), stable=1)
    assert placed == MAX_MARKS and _marks(out) == []
