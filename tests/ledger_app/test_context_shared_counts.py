"""Token counts a context build made are kept for the next build of the journal, in any
process (:class:`ledger_app.services.context_reads.SharedCounts`): the next build counts no
text again, and its figures are the same."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.services import tenant_ensure
from journal_app.tokens import count_tokens
from ledger_app.services import context_reads
from ledger_app.services.context import context_preview
from ledger_app.services.context_reads import SharedCounts, token_meter
from tests.factories import journal_build

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    cache.clear()


def rounds(n: int) -> list:
    items = [message("system", "Be terse."), message("user", "Check the totals.")]
    for i in range(n):
        items += [
            tool_call(f"call_{i:04d}x", "read", {"path": f"src/m{i}.py"}),
            tool_result(f"call_{i:04d}x", f"line {i}: total {i * 3} EUR\n" * 40),
            message("assistant", f"Read m{i}: ok."),
        ]
    return items


@pytest.fixture
def counted(monkeypatch):
    """Every text the context's meter hands to tiktoken, in order."""
    texts: list[str] = []

    def spy(text: str, encoding: str = "o200k_base") -> int:
        texts.append(text)
        return count_tokens(text, encoding)

    monkeypatch.setattr(context_reads, "count_tokens", spy)
    return texts


def test_a_second_build_counts_nothing_and_shows_the_same_figures(counted):
    journal = journal_build(tenant=tenant_ensure(slug="counts"), items=rounds(60))
    budgets = {"working_budget": 50_000, "hard_limit": 50_000}
    first = context_preview(journal=journal, views=("model", "debug"), **budgets)
    assert first.status == "ok", first.failure
    first_counts = len(counted)
    assert "call_0007x" in counted  # call ids are counted: the journal stores no figure
    assert '{"path":"src/m7.py"}' in counted  # so are the arguments as the request has them
    second = context_preview(journal=journal, views=("model", "debug"), **budgets)
    assert len(counted) == first_counts  # nothing counted again
    assert second.debug_trace["tokens"] == first.debug_trace["tokens"]
    assert second.debug_trace["decisions"] == first.debug_trace["decisions"]
    assert second.model_view == first.model_view


def test_the_figures_are_those_of_a_build_without_the_cache(monkeypatch):
    journal = journal_build(tenant=tenant_ensure(slug="counts"), items=rounds(30))
    budgets = {"working_budget": 2_000, "hard_limit": 2_000}
    context_preview(journal=journal, views=("model", "debug"), **budgets)  # fills the cache
    cached = context_preview(journal=journal, views=("model", "debug"), **budgets)
    monkeypatch.setattr(SharedCounts, "save", lambda self: False)
    monkeypatch.setattr(SharedCounts, "count", lambda self, t: count_tokens(t, self.encoding))
    plain = context_preview(journal=journal, views=("model", "debug"), **budgets)
    assert cached.debug_trace["tokens"]["request"] == plain.debug_trace["tokens"]["request"]
    assert cached.debug_trace["tokens"] == plain.debug_trace["tokens"]
    assert cached.model_view == plain.model_view


def test_counts_are_kept_per_journal_and_encoding_and_only_written_when_new():
    a = SharedCounts(1, "o200k_base")
    assert a.count("call_abc123") == count_tokens("call_abc123")
    assert a.save() is True
    assert a.save() is False  # nothing new since
    assert len(SharedCounts(1, "o200k_base").known) == 1
    assert SharedCounts(2, "o200k_base").known == {}
    other = SharedCounts(1, "cl100k_base")
    assert other.known == {}
    assert other.count("call_abc123") == count_tokens("call_abc123", "cl100k_base")


def test_a_map_past_the_limit_starts_again(monkeypatch):
    monkeypatch.setattr(context_reads, "SHARED_COUNTS_LIMIT", 2)
    counts = SharedCounts(7)
    for text in ("one", "two", "three"):
        counts.count(text)
    counts.save()
    assert SharedCounts(7).known == {}  # dropped, not grown without bound
    counts = SharedCounts(7)
    counts.count("four")
    counts.save()
    assert len(SharedCounts(7).known) == 1


def test_a_lone_surrogate_is_counted_as_a_replacement_character():
    meter = token_meter(SharedCounts(3))
    assert meter.text("total \ud800 EUR") == count_tokens("total \ufffd EUR")
