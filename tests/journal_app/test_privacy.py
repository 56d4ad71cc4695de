"""The one privacy module and its secret patterns: pure tests, no database."""

from __future__ import annotations

import pytest

from journal_app import privacy, secret_patterns
from journal_app.privacy import (
    REASONING_MARK,
    filter_content,
    filter_entry,
    filter_text,
    findings,
    redact_secrets,
    secret_spans,
)

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
HASH = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ("db password: Sup3rS3cretValue99", "Sup3rS3cretValue99", "secret-keyword"),
        ('{"password": "Sup3rS3cretValue99"}', "Sup3rS3cretValue99", "secret-keyword"),
        (f"aws configure set aws_secret_access_key {AWS_SECRET}", AWS_SECRET, "aws-secret-key"),
        (f"aws s3 ls --secret-access-key {AWS_SECRET} --region x", AWS_SECRET, "aws-secret-key"),
        ("X_API_KEY=f00dBabe1234CafeD00d5678", "f00dBabe1234CafeD00d5678", "credential"),
        ("postgres://app:Pg-pass-7781@db:5432/app", "Pg-pass-7781", "connection-string"),
        (
            "Authorization: Bearer abc123DEF456ghi789JKL012",
            "abc123DEF456ghi789JKL012",
            "bearer-token",
        ),
        ("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "sk-ant-api03-abcdef", "anthropic-key"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghij", "github-token"),
    ],
)
def test_it_finds_each_secret_with_its_kind(text, value, kind):
    f = filter_text(text)
    assert value not in f.text
    assert f.filtered and f"secret: {kind}" in f.labels
    assert privacy.SECRET_MARK.format(kind=kind) in f.text
    assert [k for _, _, k in secret_spans(text)] == [kind]


@pytest.mark.parametrize(
    "text",
    [
        HASH,
        f"entry_hash: {HASH} body_hash: {HASH}",
        "0123456789abcdef" * 4,
        "password: required",
        "max_tokens: 128000000",
        "the token is expired; rotate it",
        "--token-file /run/secrets/token",
        "python manage.py migrate billing 0042_add_refund_index --fake",
        "api_key parameter is optional",
        "totalTokens: input.result.usage.totalTokens,",
        "apiKey: process.env.OA_API_KEY,",
        "## 5. Token-Related Pricing/Metering Docs",
    ],
)
def test_it_leaves_hashes_and_ordinary_text_alone(text):
    assert secret_spans(text) == []
    assert filter_text(text).text == text


def test_marks_scan_clean_so_filtering_twice_changes_nothing():
    once = filter_text(f"db password: Sup3rS3cretValue99 and {AWS_SECRET} aws_secret_access_key")
    assert filter_text(once.text).text == once.text
    assert not filter_text(once.text).filtered


def test_reasoning_blocks_are_replaced_and_secrets_inside_are_not_listed_apart():
    text = "<thinking>use sk-ant-api03-abcdefghijklmnopqrstuvwxyz</thinking>Done. <think>b</think>"
    found = findings(text)
    assert [(k, c) for _, _, k, c in found] == [("reasoning", "reasoning")] * 2
    f = filter_text(text)
    assert f.text == REASONING_MARK + "Done. " + REASONING_MARK
    end = text.index("Done.")
    assert f.labels == ["reasoning"] and f.spans == [(0, end), (text.index("<think>"), len(text))]


def test_an_unclosed_block_is_reasoning_only_when_the_text_starts_with_it():
    cut = filter_text("  <think>the plan is to skip the failing test")
    assert cut.text == REASONING_MARK and cut.labels == ["reasoning"]
    prose = "Each output is placed inside <think> and <solution> tags."
    assert filter_text(prose).text == prose and findings(prose) == []


def test_redact_secrets_keeps_reasoning_tags():
    text, labels = redact_secrets("<think>plan</think> OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx")
    assert text == "<think>plan</think> OPENAI_API_KEY=[filtered: openai-key]"
    assert labels == ["secret: openai-key"]


def test_filter_content_walks_every_string_and_drops_reasoning():
    content = {
        "text": "ok",
        "reasoning_content": "private plan",
        "arguments": {"cmd": f"aws configure set aws_secret_access_key {AWS_SECRET}"},
        "blocks": [{"type": "redacted_thinking", "data": "x"}, {"type": "text", "text": "hi"}],
    }
    out, labels = filter_content("message", content)
    assert out == {
        "text": "ok",
        "reasoning_content": REASONING_MARK,
        "arguments": {"cmd": "aws configure set aws_secret_access_key [filtered: aws-secret-key]"},
        "blocks": [{"type": "text", "text": "hi"}],
    }
    assert labels == ["reasoning", "secret: aws-secret-key"]
    assert content["arguments"]["cmd"].endswith(AWS_SECRET)  # the input is not changed


def test_a_reasoning_entry_shows_only_the_mark():
    shown = filter_entry(kind="reasoning", content={"text": "secret plan"}, text="secret plan")
    assert shown.content == {"text": REASONING_MARK} and shown.text == REASONING_MARK
    assert shown.filtered and shown.labels == ["reasoning"]


def test_metadata_is_filtered_with_the_same_verdict():
    shown = filter_entry(
        kind="tool_result",
        content={"output": "ok"},
        text="ok",
        metadata={"env": "X_TOKEN=abc12345678"},
    )
    assert shown.metadata == {"env": "X_TOKEN=[filtered: credential]"}
    assert shown.labels == ["secret: credential"]


def test_it_is_pure_and_changes_no_detect_secrets_settings():
    from detect_secrets.settings import get_settings

    before = dict(get_settings().plugins)
    filter_text("db password: Sup3rS3cretValue99 AKIAIOSFODNN7EXAMPLE")
    assert dict(get_settings().plugins) == before
    assert not any(name.split(".")[0] in ("django", "ninja", "celery") for name in _imports())


def _imports() -> list[str]:
    import ast
    from pathlib import Path

    names: list[str] = []
    for module in (privacy, secret_patterns):
        tree = ast.parse(Path(module.__file__).read_text())
        names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    return names


def test_long_text_with_few_anchors_is_scanned_in_linear_time():
    text = ("x" * 1000 + "\n") * 300 + "password: hello123456\n"
    f = filter_text(text)
    assert f.labels == ["secret: secret-keyword"] and "hello123456" not in f.text


@pytest.mark.parametrize(
    "text",
    [
        "password Sup3rS3cretValue99 rejected",
        "the login failed with password Sup3rS3cretValue99",
    ],
)
def test_a_credential_echoed_in_prose_is_still_filtered(text):
    out = privacy.filter_text(text)
    assert "Sup3rS3cretValue99" not in out.text and out.labels == ["secret: secret-keyword"]


@pytest.mark.parametrize(
    "text",
    ["password reset link sent", "the token is valid", "password required for user Bob2024"],
)
def test_prose_about_a_password_is_not_a_secret(text):
    assert privacy.filter_text(text).text == text
