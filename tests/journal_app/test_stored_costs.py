"""A journal's computed cost is stored per price table (:class:`journal_app.models.JournalCost`)
and read by every process: a first view after a start (an empty default cache, no Redis)
reads the row instead of parsing every entry's usage (journal_app/selectors/costs.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from journal_app.formats.base import message
from journal_app.models import Entry, Journal, JournalCost
from journal_app.pricing import CostTotal, Price, cost_add, parse_price_table
from journal_app.selectors import journal_costs
from journal_app.selectors.costs import price_table_key
from journal_app.services import journal_append, journal_ensure, session_ensure
from tests.factories import TenantFactory, journal_build

pytestmark = pytest.mark.django_db

CODEX = parse_price_table({"gpt-5-codex": [1.25, 10.0]})
# a float price whose products need many decimal places: the stored text must read back exact
DEAR = parse_price_table({"gpt-5-codex": [2, 20.3], "local": [0.3, 0.7, 0.07]})


def _call(text: str, model: str | None, tokens_in: int, tokens_out: int):
    item = message("assistant", text)
    if model:
        item.metadata["model"] = model
    item.usage = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    return item


@pytest.fixture
def journal(settings, tmp_path) -> Journal:
    """Three calls: gpt-5-codex (1M in, 100k out), ``local`` (7 in, 3 out), one unnamed."""
    settings.MEDIA_ROOT = tmp_path / "media"
    cache.clear()
    items = [message("user", "Go.")]
    items += [_call("A.", "gpt-5-codex", 1_000_000, 100_000), _call("B.", "local", 7, 3)]
    items += [_call("C.", None, 5, 5)]
    return journal_build(tenant=TenantFactory(slug="costs"), items=items)


def _reference(journal: Journal, prices: dict[str, Price], upto: int | None = None) -> CostTotal:
    """The cost computed straight from the entries, without the selector."""
    total = CostTotal()
    for e in Entry.objects.filter(journal=journal).order_by("seq"):
        if upto is None or e.seq <= upto:
            total = cost_add(total, prices, e.meta_dict)
    return total


def _entry_reads(ctx: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in ctx.captured_queries if '"journal_app_entry"' in q["sql"]]


def test_after_the_cache_is_cleared_the_stored_figure_is_read_without_an_entry(journal):
    first = journal_costs([journal.pk], CODEX)[journal.pk]
    assert first == CostTotal(Decimal("2.25"), 1, 2)  # 1.25 in + 1.00 out; local, unnamed

    row = JournalCost.objects.get(journal=journal)
    assert (row.head_seq, row.head_hash) == (journal.head_seq, journal.head_hash)
    assert row.table_key == price_table_key(CODEX)
    assert (Decimal(row.usd), row.priced, row.unpriced) == tuple(first)

    cache.clear()  # what a restart leaves of the default (per-process) cache
    with CaptureQueriesContext(connection) as ctx:
        again = journal_costs([journal.pk], CODEX)[journal.pk]
    assert again == first
    assert _entry_reads(ctx) == []
    assert len(ctx.captured_queries) == 2  # the heads, the stored figures

    with CaptureQueriesContext(connection) as cached:  # the cache holds it again
        assert journal_costs([journal.pk], CODEX)[journal.pk] == first
    assert len(cached.captured_queries) == 1  # the heads only


def test_a_grown_journal_is_computed_again_and_its_row_holds_the_new_head(journal):
    before = journal_costs([journal.pk], CODEX)[journal.pk]
    journal_append(journal=journal, items=[_call("D.", "gpt-5-codex", 2_000_000, 0)])
    journal.refresh_from_db()

    cache.clear()
    with CaptureQueriesContext(connection) as ctx:
        grown = journal_costs([journal.pk], CODEX)[journal.pk]
    assert _entry_reads(ctx)  # the stored figure was of the old head
    assert grown == CostTotal(before.usd + Decimal("2.5"), 2, 2) == _reference(journal, CODEX)

    rows = list(JournalCost.objects.filter(journal=journal))
    assert len(rows) == 1  # overwritten, not a second row
    assert (rows[0].head_seq, rows[0].head_hash) == (journal.head_seq, journal.head_hash)
    assert Decimal(rows[0].usd) == grown.usd and rows[0].priced == 2

    cache.clear()
    with CaptureQueriesContext(connection) as stored:
        assert journal_costs([journal.pk], CODEX)[journal.pk] == grown
    assert _entry_reads(stored) == []


def test_each_price_table_has_its_own_row_equal_to_the_computed_cost(journal):
    codex = journal_costs([journal.pk], CODEX)[journal.pk]
    dear = journal_costs([journal.pk], DEAR)[journal.pk]
    assert codex == _reference(journal, CODEX)
    # 2 + 2.03 for gpt-5-codex, (7 * 0.3 + 3 * 0.7) / 1e6 for local; the unnamed call unpriced
    assert dear == _reference(journal, DEAR) == CostTotal(Decimal("4.0300042"), 2, 1)
    assert JournalCost.objects.filter(journal=journal).count() == 2

    cache.clear()
    with CaptureQueriesContext(connection) as ctx:
        assert journal_costs([journal.pk], DEAR)[journal.pk] == dear
        assert journal_costs([journal.pk], CODEX)[journal.pk] == codex
    assert _entry_reads(ctx) == []


def test_a_stored_figure_of_another_head_hash_is_not_used(journal):
    """The head seq alone does not name the figure: a row whose hash is not the journal's
    head hash (another chain at the same length) is computed again and repaired."""
    right = journal_costs([journal.pk], CODEX)[journal.pk]
    JournalCost.objects.filter(journal=journal).update(head_hash="0" * 64, usd="999", priced=9)
    cache.clear()
    with CaptureQueriesContext(connection) as ctx:
        assert journal_costs([journal.pk], CODEX)[journal.pk] == right
    assert _entry_reads(ctx)
    row = JournalCost.objects.get(journal=journal)
    assert (row.head_hash, Decimal(row.usd), row.priced) == (journal.head_hash, right.usd, 1)


def test_the_figure_counts_only_the_entries_up_to_the_head_it_is_stored_under(journal):
    """An entry appended after the heads were read (here: the head set back to seq 2, whose
    call is the gpt-5-codex one) is not counted in a figure stored under the older head."""
    second = Entry.objects.get(journal=journal, seq=2)
    Journal.objects.filter(pk=journal.pk).update(head_seq=2, head_hash=second.entry_hash)
    total = journal_costs([journal.pk], CODEX)[journal.pk]
    assert total == _reference(journal, CODEX, upto=2) == CostTotal(Decimal("2.25"), 1, 0)
    row = JournalCost.objects.get(journal=journal)
    assert (row.head_seq, row.priced, row.unpriced) == (2, 1, 0)


def test_a_journal_without_a_call_stores_zeros_and_its_row_goes_with_the_journal(settings):
    cache.clear()
    session = session_ensure(tenant=TenantFactory(slug="quiet"), key="s1", source_format="test")
    empty = journal_ensure(session=session)
    assert journal_costs([empty.pk], CODEX) == {}
    row = JournalCost.objects.get(journal=empty)
    assert (row.head_seq, row.usd, row.priced, row.unpriced) == (0, "0", 0, 0)

    cache.clear()
    with CaptureQueriesContext(connection) as ctx:
        assert journal_costs([empty.pk], CODEX) == {}
    assert _entry_reads(ctx) == []

    empty.delete()  # the foreign key cascades: no figure outlives its journal
    assert not JournalCost.objects.filter(pk=row.pk).exists()
