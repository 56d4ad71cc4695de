"""Harness blocks inside a message and attached material (docs/design.md 5.2). Pure: no database."""

from __future__ import annotations

from pathlib import Path

import pytest

from journal_app.content import content_text, is_authoritative, pin_text
from journal_app.formats import parse_path
from journal_app.harness import segments, without_harness
from journal_app.tokens import count_tokens

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
CODEX = CORPUS / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl"

IDE = (
    "# Context from my IDE setup:\n\n## Active file: apps/web/route.ts\n\n## Open tabs:\n"
    "- env.ts: apps/web/src/env.ts\n- .env: apps/web/.env\n\n## My request for Codex:\n"
)
REMINDER = (
    "<system-reminder>\nThe TodoWrite tool hasn't been used recently. If you're working on "
    "tasks that would benefit from tracking progress, consider using it.\n</system-reminder>"
)


def _log(lines: int) -> str:
    return "\n".join(
        f"2026-05-01T12:{i % 60:02d}:{(7 * i) % 60:02d}.{i % 1000:03d}Z ERROR worker[{i % 16}] "
        f"job={i:06d} upstream=10.0.{i % 255}.{(3 * i) % 255}:8443 timeout after 30s (retry {i % 5})"
        for i in range(lines)
    )


def _parts(text: str, **kw) -> list[tuple[str, str, str]]:
    return [(s.kind, s.harness, text[s.start : s.end]) for s in segments(text, **kw)]


def _covers(text: str, **kw) -> None:
    segs = segments(text, **kw)
    assert segs[0].start == 0 and segs[-1].end == len(text)
    assert all(a.end == b.start for a, b in zip(segs, segs[1:], strict=False))


def test_a_codex_ide_context_message_keeps_only_the_request_as_words():
    text = IDE + "Why do we need stats for the team?\n"
    assert _parts(text) == [
        ("harness", "ide", IDE),
        ("words", "", "Why do we need stats for the team?\n"),
    ]
    assert without_harness(text) == "Why do we need stats for the team?\n"
    assert pin_text(text) == "Why do we need stats for the team?\n"
    assert pin_text(text, 2) == text  # the rules ledgers were folded under before


def test_a_system_reminder_riding_inside_a_message_is_a_harness_block():
    text = REMINDER + "\n\nFix the crash in parser.py and add a regression test.\n\n" + REMINDER
    parts = _parts(text)
    assert [(k, h) for k, h, _ in parts] == [
        ("harness", "system_reminder"),
        ("words", ""),
        ("harness", "system_reminder"),
    ]
    assert parts[1][2] == "Fix the crash in parser.py and add a regression test."
    _covers(text)


def test_environment_context_and_empty_command_markup_are_harness_but_command_args_are_words():
    env = "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"
    empty = "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>"
    text = env + "\n" + empty + "\nplease rerun the build"
    assert [(k, h) for k, h, _ in _parts(text)] == [
        ("harness", "environment"),
        ("harness", "command"),
        ("words", ""),
    ]
    assert without_harness(text) == "please rerun the build"
    with_args = "<command-name>/review</command-name><command-args>PR 12 only</command-args>"
    assert _parts(with_args) == [("words", "", with_args)]


def test_a_message_of_harness_blocks_only_has_no_words_and_pins_whole():
    text = IDE.rstrip("\n")  # IDE context with nothing after the request line
    assert [k for k, _, _ in _parts(text)] == ["harness"]
    assert without_harness(text) == ""
    assert pin_text(text) == text  # conservative: never pinned as nothing


def test_a_pasted_10k_token_log_is_an_attachment_with_the_words_around_it():
    log = _log(260)
    text = "The deploy keeps failing, here is the log:\n" + log + "\n\nWhat is going wrong?"
    assert count_tokens(log) > 10_000
    parts = _parts(text)
    assert parts == [
        ("words", "", "The deploy keeps failing, here is the log:\n"),
        ("attachment", "", log),
        ("words", "", "\n\nWhat is going wrong?"),
    ]
    # under the threshold it stays words, and a higher threshold keeps it in the words
    assert [k for k, _, _ in _parts(text, attachment_tokens=50_000)] == ["words"]


def test_a_fenced_code_block_over_the_threshold_is_an_attachment_fences_included():
    code = (
        "```python\n"
        + "\n".join(f"def f{i}(x):\n    return x * {i}" for i in range(200))
        + "\n```\n"
    )
    text = "Review this file:\n\n" + code + "\nThanks"
    parts = _parts(text)
    assert parts[1] == ("attachment", "", code)
    assert parts[0][2] == "Review this file:\n\n" and parts[2][2] == "\nThanks"
    small = "Use this:\n```\nx = 1\n```\n"
    assert _parts(small) == [("words", "", small)]


def test_long_prose_written_by_the_user_is_never_an_attachment():
    para = "Please refactor the billing module so that invoices are computed once per day. " * 40
    text = "\n\n".join([para] * 5)
    assert count_tokens(text) > 3000
    assert _parts(text) == [("words", "", text)]


def test_an_attachment_with_no_words_around_it():
    log = _log(120)
    assert _parts(log) == [("attachment", "", log)]


def test_segmentation_is_deterministic_and_covers_the_text():
    text = IDE + "Look at this:\n" + _log(150) + "\n\n" + REMINDER
    assert segments(text) == segments(text)
    _covers(text)
    kinds = [(s.kind, s.harness) for s in segments(text)]
    assert kinds == [
        ("harness", "ide"),
        ("words", ""),
        ("attachment", ""),
        ("harness", "system_reminder"),
    ]


@pytest.mark.parametrize("path", [CODEX])
def test_the_codex_corpus_pins_hold_the_users_requests_not_ide_context(path):
    session = parse_path(path)
    pins = [
        content_text(e.kind, e.content)
        for e in session.entries
        if is_authoritative(
            e.kind, e.role, e.derived, e.metadata, text=content_text(e.kind, e.content)
        )
    ]
    ide = [t for t in pins if t.startswith("# Context from my IDE setup:")]
    assert len(ide) >= 10
    for t in ide:
        words = pin_text(t)
        assert "# Context from my IDE setup" not in words and "## Open tabs" not in words
        assert t.endswith(words) and words.strip()
    assert pin_text(ide[1]) == "Why do we need stats for the team?\n"


def test_words_between_two_reminders_make_the_message_a_pin_source_from_rules_3():
    """Before rules 3 the whole-message match ran from the first opening tag to the last
    closing one, across the user's words: such a message was taken for a harness record."""
    text = REMINDER + "\n\nRename the flag to --dry-run.\n\n" + REMINDER
    assert is_authoritative("message", "user", False, {}, text=text)
    assert not is_authoritative("message", "user", False, {}, text=text, rules=2)
    only = REMINDER + "\n" + REMINDER
    assert not is_authoritative("message", "user", False, {}, text=only)


TRACEBACK = """Traceback (most recent call last):
  File "/app/billing/views.py", line {i}, in invoice
    total = compute_total(order)
  File "/app/billing/totals.py", line 18, in compute_total
    return sum(line.amount for line in order.lines)
AttributeError: 'NoneType' object has no attribute 'lines'
"""


def test_pasted_tracebacks_and_test_output_are_attachments_the_ask_after_them_words():
    pasted = "\n".join(TRACEBACK.format(i=i) for i in range(40))
    pasted += "\n" + "\n".join(
        f"FAILED tests/test_billing.py::test_invoice_{i} - AssertionError: assert {i} == 42"
        for i in range(60)
    )
    ask = "Fix tests/test_billing.py::test_invoice_3 first."
    text = "Here is what I get:\n\n" + pasted + "\n\n" + ask
    parts = _parts(text)
    assert [k for k, _, _ in parts] == ["words", "attachment", "words"]
    assert parts[1][2] == pasted and parts[2][2] == "\n\n" + ask


def test_wrapped_prose_with_indented_continuation_lines_stays_words():
    para = (
        "Updating a team to assign a lead is VERY\n  slow. It loads all data for all\n"
        "  teams instead of just the one we edit. Can you\n  refactor this to be faster?\n\n"
    )
    text = para * 40
    assert count_tokens(text) > 1000
    assert _parts(text) == [("words", "", text)]


def test_a_reminder_carrying_claude_md_is_governing_text_not_a_harness_block():
    from ledger_app.pins import classify

    rules = (
        "<system-reminder>\nAs you answer the user's questions, you can use the following "
        "context:\n# claudeMd\nContents of CLAUDE.md (project instructions):\n"
        "RULE 1: Run database migrations only via ./scripts/db.sh migrate.\n</system-reminder>\n"
    )
    text = rules + "Add a created_at column to the orders table."
    assert pin_text(text, 3) == text  # the rules stay in the pin, byte for byte
    assert pin_text(REMINDER + "\nAdd a column.", 3) == "Add a column."  # other reminders go
    assert is_authoritative("message", "user", False, {}, text=rules.strip())  # rules alone
    assert classify(role="user", words=text, objective=False) == ("governing", "instructions")


def test_an_instruction_on_the_line_after_a_pasted_log_stays_words():
    log = "\n".join(
        f"2026-01-01T00:00:{i % 60:02d}Z ERROR worker-{i} sync failed: reset (id {i * 7919})"
        for i in range(300)
    )
    ask = "Please explain the error and do not restart the workers."
    text = "Here is the log:\n" + log + "\n" + ask
    kinds = [(sg.kind, text[sg.start : sg.end].strip()) for sg in segments(text)]
    assert kinds[0] == ("words", "Here is the log:")
    assert kinds[1][0] == "attachment" and kinds[1][1] == log
    assert kinds[2] == ("words", ask)
