"""``ParsedEntry.token_figure``: a provider-reported figure is stored, not recounted (DESIGN 4)."""

from __future__ import annotations

import pytest

from journal_app.entry_validation import EntryInvalid
from journal_app.formats.base import message
from journal_app.services import (
    figures_check,
    journal_append,
    journal_ensure,
    session_ensure,
    tenant_ensure,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def journal():
    session = session_ensure(tenant=tenant_ensure(slug="t"), key="s")
    return journal_ensure(session=session)


def test_a_provider_figure_is_the_entry_figure_and_its_source_is_recorded(journal):
    result = journal_append(
        journal=journal,
        items=[
            message("user", "hello there"),
            message("assistant", "hi", token_figure=(4321, "provider:completion_tokens")),
        ],
    )
    user, answer = result.entries
    assert (answer.token_count, answer.token_source) == (4321, "provider:completion_tokens")
    assert user.token_source.startswith("tiktoken") and user.token_count < 10
    assert figures_check(answer) == []  # the figures hash binds the provider figure


@pytest.mark.parametrize("figure", [(-1, "provider:x"), (3, ""), (True, "provider:x")])
def test_a_bad_figure_is_refused_naming_the_field(journal, figure):
    with pytest.raises(EntryInvalid) as info:
        journal_append(journal=journal, items=[message("assistant", "hi", token_figure=figure)])
    assert info.value.field == "token_figure"
    assert journal.entries.count() == 0
