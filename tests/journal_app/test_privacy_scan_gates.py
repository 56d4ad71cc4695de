"""The secret scan's shortcuts find exactly what the plain scan found: the anchors found in one
Aho-Corasick pass, the keyword tail tried only before keyword anchors, and the command
patterns that lead with the command's name instead of ``\\b``. Each compared with the way it
was computed before, over generated texts."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from journal_app import secret_patterns
from journal_app.privacy import secret_spans

#: the shape of a Discord bot token (from Discord's documentation, not a live one)
DISCORD = "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs"

PIECES = [
    "password",
    "Passwd",
    "PASSPHRASE",
    "api_key",
    "API-KEY",
    "private_key",
    "Private-Key",
    "accesskey",
    "auth_key",
    "client_secret",
    "clientSecret",
    "token",
    "max_tokens",
    "credentials",
    "pwd",
    "xpass",
    "--token",
    "aws_secret_access_key",
    "ſecret",  # long s: matches "s" ignoring case, lowers to itself
    "\u212aey",  # Kelvin sign: matches "k" ignoring case, lowers to "k"
    "é",
    ": ",
    "=",
    " ",
    " is ",
    '"',
    "'",
    "\n",
    "Sup3rS3cretValue99",
    "hunter2hunter2!",
    "$VAR_NAME_1",
    "4096",
    "x" * 30,
    "monkey",
    "keys",
    "docker login -p S3cretPass ",
    "mydocker login --password=S3cretPass ",
    "mysql -u root -pS3cret ",
    "mysqldump -p'S3cret' ",
    "xmysql -pS3cret ",
    "sshpass -p S3cret ",
    "curl -u admin:S3cretPw https://x ",
    "libcurl -u admin:S3cretPw ",
    "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0kLmN",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "a" * 36,
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz123",
    "postgres://u:S3cretPw@db/x",
    "xoxb-1234567890-abc",
    "AC",
    "SK",
    "gl",
    DISCORD,
    "os.path.",
    ".abcdef.",
    "N" + "a" * 23,
]
TEXTS = st.lists(st.sampled_from(PIECES), max_size=16).map("".join)

#: the command patterns as they were written before they led with the command's name
PLAIN_COMMANDS = {
    "mysql-password": r"\bmysql(?:dump|admin|sh)?\b[^\n|;]*?\s-p[\"']?(?P<v>[^\s\"'|;&]{3,})",
    "docker-login-password": r"\bdocker\s+login\b[^\n|;]*?\s(?:-p|--password)(?:\s+|=)[\"']?"
    r"(?P<v>[^\s\"'|;&$]{3,})",
    "sshpass-password": r"\bsshpass\s+-p\s*(?P<v>[^\s\"']{3,})",
    "curl-user-password": r"\bcurl\b[^\n|;]*?\s(?:-u|--user)\s+[\"']?[^\s:\"']+:"
    r"(?P<v>(?![$<{%])[^\s@\"']{3,})",
}


def _plain_runnable(text: str) -> set[tuple[str, int]]:
    """Each anchor tested with ``in``, as the scan did before the automaton."""
    low = text.lower()
    run = set()
    for i, (_k, _p, anchors, lowered) in enumerate(secret_patterns.PROVIDER_PATTERNS):
        if any(a in (low if lowered else text) for a in anchors):
            run.add(("p", i))
    for j, (_plugin, anchors, lowered) in enumerate(secret_patterns._plugins()):
        if any(a in (low if lowered else text) for a in anchors):
            run.add(("g", j))
    return run


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_the_automaton_finds_the_anchors_in_finds(text):
    assert secret_patterns._runnable(text, text.lower()) == _plain_runnable(text)


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_the_keyword_tail_gate_answers_as_a_search_of_the_window(text):
    low = text.lower()
    if len(low) != len(text):
        return  # the keyword scan skips such a text
    for wa, wb in secret_patterns._keyword_windows(text, low):
        expected = secret_patterns._KEYWORD_TAIL.search(text, wa, wb) is not None
        assert secret_patterns._tail_in(text, low, wa, wb) == expected


def test_the_tail_gate_finds_a_keyword_that_starts_well_before_its_anchor():
    text = "x private_key: S3cretValue99"
    low = text.lower()
    windows = secret_patterns._keyword_windows(text, low)
    assert [secret_patterns._tail_in(text, low, a, b) for a, b in windows] == [True]
    # one character of the keyword's lead clipped off by the window: no keyword, no match
    start = text.index("private_key")
    assert not secret_patterns._tail_in(text, low, start + 1, len(text))
    assert secret_patterns._KEYWORD_TAIL.search(text, start + 1) is None


def test_a_window_folding_a_non_ascii_character_is_searched_whole():
    text = "ſecret: S3cretValue99 and a key"  # "ſecret" is "secret" ignoring case
    low = text.lower()
    assert "secret" not in low  # so no anchor marks where its keyword starts
    assert secret_patterns._tail_in(text, low, 0, len(text))


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_the_command_patterns_match_as_they_did_with_a_leading_word_boundary(text):
    by_kind = {k: p for k, p, _a, _l in secret_patterns.PROVIDER_PATTERNS}
    for kind, plain in PLAIN_COMMANDS.items():
        new = [(m.span(), m.span("v")) for m in by_kind[kind].finditer(text)]
        old = [(m.span(), m.span("v")) for m in re.finditer(plain, text)]
        assert new == old, kind


def test_the_command_patterns_keep_the_word_boundary():
    spans = secret_spans("docker login -p S3cretPass; mydocker login -p Other99Pass")
    assert [k for _a, _b, k in spans] == ["docker-login-password"]
    assert secret_spans("xmysql -pS3cret") == []
    assert [k for *_, k in secret_spans("mysql -u root -pS3cret")] == ["mysql-password"]


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_a_plugin_gate_passes_every_text_its_plugin_finds_something_in(text):
    for (plugin, _anchors, _lowered), gate in zip(
        secret_patterns._plugins(), secret_patterns._plugin_gates(), strict=True
    ):
        if gate is not None and list(plugin.analyze_string(text)):
            assert gate.search(text), type(plugin).__name__


def test_the_discord_gate_is_used_and_the_token_still_found():
    gated = [
        type(p).__name__
        for (p, *_), g in zip(
            secret_patterns._plugins(), secret_patterns._plugin_gates(), strict=True
        )
        if g
    ]
    assert gated == ["DiscordBotTokenDetector"]  # its patterns are the ones it was read off
    spans = secret_spans(f"bot token {DISCORD} here")
    assert [(a, b) for a, b, _k in spans] == [(10, 10 + len(DISCORD))]
    assert secret_spans("os.path.join and .abcdef. are not tokens") == []
