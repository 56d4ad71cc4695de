"""The filter language in the base app (pure): entry fields, and its error as a domain error."""

from __future__ import annotations

import pytest

from journal_app import filters
from journal_app.errors import DomainError


def test_it_parses_an_entry_expression_without_the_ledger():
    query = filters.parse_entries('kind:tool_result -error:true seq:10..20 text:"exit 1"')

    assert [(t.field, t.op, t.values, t.negate) for t in query.terms] == [
        ("kind", "in", ("tool_result",), False),
        ("error", "is", (True,), True),
        ("seq", "range", (10, 20), False),
        ("text", "contains", ("exit 1",), False),
    ]


def test_a_fact_field_is_unknown_to_the_entry_filter():
    with pytest.raises(filters.FilterError, match="unknown field 'priority'") as caught:
        filters.parse_entries("priority:P0")

    assert caught.value.position == 1
    assert isinstance(caught.value, DomainError) and isinstance(caught.value, ValueError)
    assert (caught.value.status, caught.value.code) == (422, "invalid_filter")


def test_the_ledger_reexports_the_same_language():
    from ledger_app import filters as ledger_filters

    assert ledger_filters.FilterError is filters.FilterError
    assert ledger_filters.parse_entries is filters.parse_entries
    assert "priority" in ledger_filters.FACT_FIELDS and "priority" not in filters.ENTRY_FIELDS
