"""Consecutive compacted calls share their prefix until a fold lands (README "Prompt caching
through the proxy"; docs/design.md 6: pins, then the continuation record, then the tail), at a
small working budget."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache

from journal_app.models import Journal
from journal_app.tokens import count_tokens
from proxy_app.caching import shared_prefix
from proxy_app.services.compaction import _compacted_key
from tests.proxy_app.test_anthropic_proxy import SYSTEM, client

MARK = {"type": "ephemeral"}
RULES = "Never push to main without review."


def _count(role: str, block: dict) -> int:
    return count_tokens(json.dumps(block), "o200k_base")


def _tool_round(n: int, lines: int) -> list:
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "cat", "input": {"n": n}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": f"toolu_{n}",
                    "content": f"file {n}: " + f"line {n} " * lines,
                }
            ],
        },
    ]


def _session(
    live_server, key, upstream, name: str, calls: int, tool_lines: int = 0, forget: bool = True
) -> tuple[list, list]:
    """A 40-round history, then ``calls`` calls under a 6,000-token budget, each answered
    with text and followed by a short user message (``tool_lines``: answered with a tool
    call, followed by its result of that many lines); every call is built afresh by the context builder
    (the proxy's kept request forgotten, as after an extension that no longer fits), or
    with ``forget=False`` extends the previous one while it fits.
    Returns the upstream requests and the fold number each call was built on."""
    cache.clear()
    c = client(
        live_server, key, **{"X-Ledgerkeep-Session": name, "X-Ledgerkeep-Working-Budget": "6000"}
    )
    system = [
        {"type": "text", "text": SYSTEM},
        {"type": "text", "text": RULES, "cache_control": MARK},
    ]
    messages: list = [{"role": "user", "content": [{"type": "text", "text": "Audit the repo."}]}]
    for n in range(40):
        messages += _tool_round(n, 120)
    messages.append({"role": "user", "content": [{"type": "text", "text": "Go on."}]})
    folds = []
    for n in range(calls):
        journal = Journal.objects.filter(session__key=name).first()
        if journal is not None and forget:
            cache.delete(_compacted_key(journal, "anthropic"))
        if tool_lines:
            upstream.push(calls=[(f"toolu_c{n}", "cat", {"n": n})])
        else:
            upstream.push(text=f"answer {n}")
        raw = c.messages.with_raw_response.create(
            model="claude-x", max_tokens=256, system=system, messages=messages
        )
        assert raw.headers["X-Ledgerkeep-Compacted"] == "true"
        folds.append(raw.headers["X-Ledgerkeep-Fold"])
        final = raw.parse()
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in final.content],
            }
        )
        if tool_lines:
            result = {
                "type": "tool_result",
                "tool_use_id": f"toolu_c{n}",
                "content": f"page {n}: " + f"row {n} " * tool_lines,
            }
            messages.append({"role": "user", "content": [result]})
        else:
            messages.append({"role": "user", "content": [{"type": "text", "text": f"next {n}"}]})
    return upstream.requests, folds


def _shares(sent: list) -> list[float]:
    out = []
    for a, b in zip(sent, sent[1:], strict=False):
        shared, total = shared_prefix(a, b, _count)
        out.append(shared / total)
    return out


def test_calls_between_folds_share_at_least_90_percent_of_the_previous_request(
    live_server, key, upstream
):
    sent, folds = _session(live_server, key, upstream, "share", 6)
    assert len(set(folds)) == 1  # no fold lands between these calls
    shares = _shares(sent)
    assert min(shares) >= 0.9, shares
    for request in sent:
        # the client's two system blocks stay two, its marker on the second kept
        assert [b["text"] for b in request["system"]] == [SYSTEM, RULES]
        assert request["system"][1].get("cache_control") == MARK
        # and one marker ends the stable prefix, before the verbatim tail
        marked = [
            i
            for i, m in enumerate(request["messages"])
            if any(isinstance(b, dict) and "cache_control" in b for b in m["content"])
        ]
        assert marked and marked[0] < len(request["messages"]) - 2


@pytest.mark.parametrize("forget", [True, False], ids=["rebuilt", "extended"])
def test_the_prefix_changes_only_when_a_fold_lands(live_server, key, upstream, forget):
    sent, folds = _session(live_server, key, upstream, "span", 12, tool_lines=200, forget=forget)
    shares = _shares(sent)
    assert len(set(folds)) > 1, folds  # a fold landed in between
    assert len(set(folds)) <= len(folds) // 3 + 1, folds  # not a fold on every call
    for i, share in enumerate(shares):
        if folds[i] == folds[i + 1]:
            assert share >= 0.9, (i, shares, folds)
        else:
            assert share < 0.9, (i, shares, folds)  # the new checkpoint: a new prefix
