"""The filter expression language over facts and entries (pure, no database)."""

from __future__ import annotations

import pytest

from ledger_app.filters import (
    FilterError,
    compare_int,
    filter_facts,
    parse_entries,
    parse_facts,
)

H1 = "ab" * 32
H2 = "cd" * 32

FACTS = [
    {
        "id": "pin:1",
        "category": "constraint",
        "priority": "P0",
        "confidence": "verified",
        "text": "Never run the migration 0042 on production.",
        "support": [{"entry": H1, "quote": "Never run"}],
        "pin": True,
        "author": "code",
        "origin_fold": 1,
    },
    {
        "id": "ob:2",
        "category": "open_obligation",
        "priority": "P0",
        "confidence": "reported",
        "lifecycle": "active",
        "text": "Write the migration for the refunds table.",
        "support": [{"entry": H2}],
        "author": "writer",
        "origin_fold": 2,
    },
    {
        "id": "ob:3",
        "category": "open_obligation",
        "priority": "P1",
        "confidence": "reported",
        "lifecycle": "closed",
        "text": "Run the migration tests.",
        "support": [{"entry": H2}],
        "author": "writer",
        "origin_fold": 3,
        "pending_retirement": {"evidence": [H1]},
    },
]


def _ids(expr):
    return [f["id"] for f in filter_facts(FACTS, parse_facts(expr))]


def test_it_ands_field_terms_like_the_issue_example():
    assert _ids('category:open_obligation priority:P0 text:"migration"') == ["ob:2"]


def test_an_empty_expression_matches_everything_and_is_falsy():
    q = parse_facts("   ")
    assert not q
    assert _ids("") == ["pin:1", "ob:2", "ob:3"]


def test_bare_words_search_the_text_case_insensitively():
    assert _ids("MIGRATION refunds") == ["ob:2"]
    assert _ids('"migration 0042"') == ["pin:1"]


def test_commas_give_alternatives_and_enum_values_ignore_case():
    assert _ids("priority:p0,P1 category:OPEN_OBLIGATION") == ["ob:2", "ob:3"]


def test_a_minus_negates_a_term_and_lifecycle_defaults_to_active():
    assert _ids("-lifecycle:closed") == ["pin:1", "ob:2"]
    assert _ids("lifecycle:active") == ["pin:1", "ob:2"]  # pin:1 has no lifecycle field


def test_bool_hash_int_and_quote_fields():
    assert _ids("pin:true") == ["pin:1"]
    assert _ids("pin:no") == ["ob:2", "ob:3"]
    assert _ids("pending:yes") == ["ob:3"]
    assert _ids("support:sha256:cdcd") == ["ob:2", "ob:3"]
    assert _ids("support:abab,cdcd") == ["pin:1", "ob:2", "ob:3"]
    assert _ids("fold:>=2") == ["ob:2", "ob:3"]
    assert _ids("fold:1..2") == ["pin:1", "ob:2"]
    assert _ids("fold:<2") == ["pin:1"]
    assert _ids('quote:"never run"') == ["pin:1"]
    assert _ids("id:ob author:writer") == ["ob:2", "ob:3"]


def test_escaped_quotes_inside_a_quoted_value():
    q = parse_facts(r'text:"say \"hi\" \\ now"')
    assert q.terms[0].values == ('say "hi" \\ now',)


def test_terms_keep_their_one_based_position():
    q = parse_facts('priority:P0  text:"x y" -pin:true')
    assert [(t.field, t.position, t.negate) for t in q.terms] == [
        ("priority", 1, False),
        ("text", 14, False),
        ("pin", 25, True),
    ]


@pytest.mark.parametrize(
    ("expr", "position", "token", "words"),
    [
        ("priority:P0 prio:P1", 13, "prio:P1", "unknown field 'prio'"),
        ("priority:P5", 1, "priority:P5", "'P5' is not a priority (allowed: P0, P1, P2, P3)"),
        ('category:blocker text:"migration', 18, 'text:"migration', "unterminated quote"),
        ("text:", 1, "text:", "text: needs a value"),
        ('text:""', 1, 'text:""', "text: needs a value"),
        ("fold:soon", 1, "fold:soon", "fold takes a number"),
        ("fold:9..3", 1, "fold:9..3", "is empty"),
        ("pin:maybe", 1, "pin:maybe", "pin takes true or false"),
        ("support:xyz1", 1, "support:xyz1", "is not a hash prefix"),
        ('text:"a"b', 1, 'text:"a"b', "closing quote must be followed by a space"),
        ('wo"rd', 1, 'wo"rd', "a quote may only open a value"),
    ],
)
def test_it_names_the_bad_token_and_its_position(expr, position, token, words):
    with pytest.raises(FilterError) as err:
        parse_facts(expr)
    assert err.value.position == position
    assert err.value.token == token
    assert words in str(err.value)
    assert str(err.value).startswith(f"position {position}, {token!r}: ")


def test_unknown_field_lists_the_known_ones():
    with pytest.raises(FilterError) as err:
        parse_facts("kind:message")
    assert "known: category, priority, lifecycle" in err.value.reason


def test_entry_fields_are_their_own_vocabulary():
    q = parse_entries("kind:tool_call,tool_result role:tool error:true seq:10..20 hash:ABCD")
    assert [(t.field, t.op, t.values) for t in q.terms] == [
        ("kind", "in", ("tool_call", "tool_result")),
        ("role", "in", ("tool",)),
        ("error", "is", (True,)),
        ("seq", "range", (10, 20)),
        ("hash", "in", ("abcd",)),
    ]
    with pytest.raises(FilterError, match="unknown field 'priority'"):
        parse_entries("priority:P0")


def test_it_refuses_an_overlong_expression():
    with pytest.raises(FilterError, match="expression too long"):
        parse_facts("x " * 1500)


@pytest.mark.parametrize(
    ("expr", "value", "expected"),
    [("seq:5", 5, True), ("seq:>5", 5, False), ("seq:>=5", 5, True), ("seq:<=4", 5, False)],
)
def test_int_comparisons(expr, value, expected):
    assert compare_int(parse_entries(expr).terms[0], value) is expected
    assert compare_int(parse_entries(expr).terms[0], None) is False
