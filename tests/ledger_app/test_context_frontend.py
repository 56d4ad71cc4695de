"""The frontend view filters every text through journal_app.privacy, and its check agrees
(docs/design.md 6: no secrets or hidden reasoning in the client-visible view)."""

from __future__ import annotations

import copy
import json

from journal_app import privacy
from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result
from ledger_app.context import build_context, frontend_view
from ledger_app.context.entry_text import args_text
from ledger_app.validation import validate_frontend
from tests.ledger_app.test_context import receipts_for, views

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DB_PASSWORD = "Sup3rS3cretValue99"
PIN_SECRET = "sk-PLACEHOLDER-pinned-by-the-user-0000000"


def planted() -> list[ParsedEntry]:
    """A session with an AWS secret key as a command argument, a password in a tool result,
    ``<thinking>`` in assistant text, a reasoning entry and a user message holding a key."""
    return [
        message("system", "You are the deploy agent."),
        message("user", f"Configure the AWS CLI; my OpenAI key is {PIN_SECRET}."),
        message("assistant", "<thinking>plan</thinking>I will configure the CLI."),
        ParsedEntry(kind="reasoning", role="assistant", content={"text": "a private plan " * 3}),
        tool_call(
            "c1",
            "terminal",
            {"cmd": f"aws configure set aws_secret_access_key {AWS_SECRET}"},
        ),
        tool_result("c1", f"configured\ndb password: {DB_PASSWORD}\nregion eu-west-1"),
        message("assistant", "Done: the CLI is configured."),
    ]


def test_it_filters_args_results_and_thinking_and_says_why():
    entries = views(planted())
    front = frontend_view(entries)
    blob = json.dumps(front)
    for private in (AWS_SECRET, DB_PASSWORD, PIN_SECRET, "<thinking>", "a private plan"):
        assert private not in blob
    call = next(i for i in front["items"] if i["kind"] == "tool_call")
    assert call["filtered"] is True and call["labels"] == ["secret: aws-secret-key"]
    assert "aws_secret_access_key [filtered: aws-secret-key]" in call["text"]
    result = next(i for i in front["items"] if i["kind"] == "tool_result")
    assert result["labels"] == ["secret: secret-keyword"]
    assert result["text"] == "configured\ndb password: [filtered: secret-keyword]\nregion eu-west-1"
    thought = next(i for i in front["items"] if i["text"].endswith("I will configure the CLI."))
    assert thought["labels"] == ["reasoning"]
    assert thought["text"] == "[filtered: reasoning]I will configure the CLI."
    done = next(i for i in front["items"] if i["text"].startswith("Done"))
    assert "filtered" not in done and "labels" not in done
    assert front["filtered"] == {
        "items": 4,
        "labels": {
            "reasoning": 1,
            "secret: aws-secret-key": 1,
            "secret: openai-key": 1,
            "secret: secret-keyword": 1,
        },
        "left_out": {"reasoning": 1},
    }
    assert front["redactions"] == 4


def test_its_check_agrees_with_the_filter_item_by_item():
    entries = views(planted())
    front = frontend_view(entries)
    reasoning = [e.text for e in entries if e.kind == "reasoning"]
    report = validate_frontend(front, reasoning=reasoning)
    assert report.ok, report.problems
    # the same items with their raw text: the check flags exactly those the view filtered
    raw = copy.deepcopy(front)
    source = {e.seq: e for e in entries}
    for item in raw["items"]:
        item.pop("filtered", None)
        item.pop("labels", None)
        e = source[item["seq"]]
        item["text"] = args_text(e) if e.kind == "tool_call" else e.text
    flagged = validate_frontend(raw, reasoning=reasoning)
    filtered = {i for i, item in enumerate(front["items"]) if item.get("filtered")}
    assert {p.index for p in flagged.problems} == filtered
    checks = {(p.index, p.check) for p in flagged.problems}
    call = next(i for i, item in enumerate(front["items"]) if item["kind"] == "tool_call")
    thought = next(
        i for i, item in enumerate(front["items"]) if "[filtered: reasoning]" in item["text"]
    )
    assert (call, "no_secrets") in checks and (thought, "no_hidden_reasoning") in checks
    # and each label is what journal_app.privacy.findings reports on that raw text
    for i in filtered:
        kinds = {
            "reasoning" if cat == "reasoning" else f"secret: {kind}"
            for _, _, kind, cat in privacy.findings(raw["items"][i]["text"])
        }
        assert kinds == set(front["items"][i]["labels"])


def test_a_preview_is_cut_from_the_filtered_text():
    filler = "\n".join(f"line {n}: ok" for n in range(3000))
    output = f"{filler[:20000]}\ndb password: {DB_PASSWORD}\n{filler[20000:]}"
    items = [
        message("user", "Run it."),
        tool_call("c1", "terminal", {"cmd": "run"}),
        tool_result("c1", output),
    ]
    entries = views(items)
    for receipts in ({}, receipts_for(entries, over=100)):
        front = frontend_view(entries, receipts=receipts, count=len, preview_tokens_over=100)
        result = front["items"][-1]
        assert DB_PASSWORD not in json.dumps(front)
        assert result["truncated"] and result["filtered"] is True
        assert result["labels"] == ["secret: secret-keyword"]


def test_the_model_view_keeps_pins_verbatim_and_redacts_the_rest():
    entries = views(planted())
    built = build_context(entries=entries, working_budget=10_000, hard_limit=10_000)
    assert built.status == "ok", built.failure
    texts = json.dumps(built.model_view)
    user = next(m for m in built.model_view["messages"] if m["role"] == "user")
    assert user["content"] == f"Configure the AWS CLI; my OpenAI key is {PIN_SECRET}."
    assert AWS_SECRET not in texts and DB_PASSWORD not in texts
    assert "[filtered: aws-secret-key]" in texts
