"""Tokens, segments and queries shared by both backends (pure)."""

import pytest

from recovery_app.lexical import (
    SEGMENT_OVERLAP,
    SEGMENT_TOKENS,
    QueryInvalid,
    matches,
    parse_query,
    segments,
    snippet,
    tokenize,
)


def test_tokens_are_casefolded_letter_and_digit_runs():
    assert tokenize("Applying billing.0042_add_Refund_Index... FAKED --fake Größe") == [
        "applying", "billing", "0042", "add", "refund", "index", "faked", "fake", "grösse",
    ]  # fmt: skip
    assert tokenize("x" * 101 + " ok") == ["ok"]


def test_an_identifier_is_one_phrase_and_words_are_separate_terms():
    q = parse_query('0042_add_refund_index --fake "refund index"')
    assert q.terms == (("0042", "add", "refund", "index"), ("fake",), ("refund", "index"))
    assert q.text == '"0042 add refund index" fake "refund index"'
    assert q.fts5() == '"0042 add refund index" AND "fake" AND "refund index"'
    assert (
        q.tsquery()
        == "('0042' <-> 'add' <-> 'refund' <-> 'index') & ('fake') & ('refund' <-> 'index')"
    )


def test_bad_queries_are_refused():
    for raw in ("", "---", "..."):
        with pytest.raises(QueryInvalid):
            parse_query(raw)
    with pytest.raises(QueryInvalid):
        parse_query(" ".join(f"w{i}" for i in range(9)))
    with pytest.raises(QueryInvalid):
        parse_query("a" * 401)


def test_phrases_must_be_adjacent_and_every_term_present():
    q = parse_query("0042_add_refund_index fake")
    assert matches(q, "migrate 0042_add_refund_index --fake")
    assert not matches(q, "migrate 0042_add_refund_index")
    assert not matches(q, "0042 add the refund index --fake")


def test_long_entries_are_cut_into_overlapping_segments():
    tokens = [f"t{i}" for i in range(SEGMENT_TOKENS + 100)]
    segs = segments(tokens)
    assert len(segs) == 2
    first, second = segs[0].split(), segs[1].split()
    assert len(first) == SEGMENT_TOKENS
    assert first[-SEGMENT_OVERLAP:] == second[:SEGMENT_OVERLAP]
    assert second[-1] == tokens[-1]
    assert segments([]) == []


def test_a_snippet_shows_the_match():
    text = "x " * 200 + "Applying billing.0042_add_refund_index... FAKED" + " y" * 200
    s = snippet(parse_query("0042_add_refund_index"), text)
    assert "0042_add_refund_index" in s and s.startswith("…") and s.endswith("…")


def test_ascii_and_non_ascii_text_tokenize_by_the_same_rule():
    # ASCII is lower-cased whole; other text is split first, then each token case-folded
    assert tokenize("Fix_BUG-42 in src/App.PY " + "x" * 101) == [
        "fix",
        "bug",
        "42",
        "in",
        "src",
        "app",
        "py",
    ]
    assert tokenize("İstanbul STRASSE Straße") == ["i̇stanbul", "strasse", "strasse"]
