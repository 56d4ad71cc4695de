"""Secrets and hidden reasoning are filtered from what recovery shows (pure).

Recovery filters through :mod:`journal_app.privacy`, the one privacy module; the cases come from
the repository's own ``tests/fixtures/cases`` (never an absolute path, never skipped).
"""

import json
from pathlib import Path

from journal_app.privacy import REASONING_MARK, filter_content, filter_text

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "cases"


def test_provider_keys_are_replaced_and_labelled():
    text = (
        "OPENAI_API_KEY=sk-PLACEHOLDER-not-a-real-key-000000000000\n"
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 and AKIAIOSFODNN7EXAMPLE\n"
        "EDITOR=vim"
    )
    f = filter_text(text)
    assert f.filtered
    assert "sk-PLACEHOLDER" not in f.text and "ghp_abc" not in f.text and "AKIAIOSF" not in f.text
    assert "OPENAI_API_KEY=[filtered: openai-key]" in f.text
    assert "EDITOR=vim" in f.text
    assert {"secret: openai-key", "secret: github-token", "secret: aws-access-key"} <= set(f.labels)


def test_detect_secrets_findings_are_filtered_too():
    f = filter_text('password = "hunter2hunter2"\npostgres://admin:s3cr3tpass@db:5432/app')
    assert "hunter2hunter2" not in f.text and "s3cr3tpass" not in f.text
    assert "secret: connection-string" in f.labels


def test_hidden_reasoning_is_removed_and_labelled():
    f = filter_text("<think>the key is sk-ant-abcdefghijklmnopqrstuvwx</think>Done.")
    assert f.text == REASONING_MARK + "Done." and f.labels == ["reasoning"]
    whole = filter_text("private chain of thought", kind="reasoning")
    assert whole.text == REASONING_MARK and whole.filtered


def test_ordinary_text_is_untouched():
    text = "python manage.py migrate billing 0042_add_refund_index --fake\nsha256:" + "a" * 64
    f = filter_text(text)
    assert f.text == text and not f.filtered and f.labels == []


def test_content_blocks_of_thinking_are_dropped():
    content = {
        "text": "ok",
        "blocks": [{"type": "thinking", "thinking": "hmm"}, {"type": "image", "url": "x"}],
    }
    out, labels = filter_content("message", content)
    assert out == {"text": "ok", "blocks": [{"type": "image", "url": "x"}]}
    assert labels == ["reasoning"]


def test_the_cases_are_found_relative_to_the_repository():
    assert CASES.is_dir(), f"{CASES} is missing: the fixtures ship with the repository"
    assert (CASES / "20-secrets-in-summary.json").is_file()


def test_case_20_secrets_from_tool_output_never_show():
    case = json.loads((CASES / "20-secrets-in-summary.json").read_text())
    output = case["messages"][2]["content"]
    f = filter_text(output)
    assert "sk-PLACEHOLDER-not-a-real-key-000000000000" not in f.text
    assert "PLACEHOLDERnotArealSecret0000000000000000" not in f.text
    assert "OPENAI_API_KEY=" in f.text and "AWS_SECRET_ACCESS_KEY=" in f.text and f.filtered
