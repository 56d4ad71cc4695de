"""The keyword scan's prefilter never changes what :func:`secret_spans` finds: a
window is skipped only when it holds no keyword followed by a separator and a value, which
every keyword match contains. Compared with the scan without the prefilter."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from journal_app import privacy, secret_patterns

PIECES = [
    "password",
    "Passwd",
    "api_key",
    "API-KEY",
    "token",
    "max_tokens",
    "client_secret",
    "credentials",
    "--token",
    "aws_secret_access_key",
    ": ",
    "=",
    " ",
    '"',
    "'",
    "\n",
    "Sup3rS3cretValue99",
    "hunter2hunter2!",
    "4096",
    "usage.totalTokens",
    "/run/secret",
    "x" * 30,
    "monkey",
    "keys",
]


def _without_prefilter(text: str) -> list[tuple[int, int]]:
    """What the keyword part of the scan finds when every window is searched."""
    low = text.lower()
    found = []
    for wa, wb in secret_patterns._keyword_windows(text, low):
        for m in secret_patterns._KEYWORD.finditer(text, wa, wb):
            found.append((m.start("v"), m.end("v")))
    return found


def _with_prefilter(text: str) -> list[tuple[int, int]]:
    low = text.lower()
    found = []
    for wa, wb in secret_patterns._keyword_windows(text, low):
        if secret_patterns._KEYWORD_TAIL.search(text, wa, wb) is None:
            continue
        for m in secret_patterns._KEYWORD.finditer(text, wa, wb):
            found.append((m.start("v"), m.end("v")))
    return found


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=14))
def test_the_prefilter_keeps_every_keyword_match(pieces):
    text = "".join(pieces)
    assert _with_prefilter(text) == _without_prefilter(text)


def test_the_prefilter_skips_a_window_without_a_value_and_keeps_one_with():
    assert secret_patterns._KEYWORD_TAIL.search("the monkey keys are here") is None
    assert secret_patterns._KEYWORD_TAIL.search("password: Sup3rS3cretValue99")
    spans = privacy.secret_spans("db password: Sup3rS3cretValue99 ok")
    assert [(a, b) for a, b, _ in spans] == [
        (m.start(), m.end())
        for m in re.finditer("Sup3rS3cretValue99", "db password: Sup3rS3cretValue99 ok")
    ]
