"""Start-up warm-up of a serving process (:mod:`config.warmup`) and a cache every process
shares (the journal cost's key): what a first view after a start would otherwise pay."""

from __future__ import annotations

import hashlib

import pytest
from django.core.cache import cache
from django.template import engines
from django.urls import get_resolver

from config import warmup
from journal_app.formats.base import message
from journal_app.pricing import parse_price_table
from journal_app.selectors import journal_costs
from journal_app.services import tenant_ensure
from journal_app.tokens import get_encoding
from tests.factories import journal_build


def test_the_project_templates_are_listed_and_third_party_ones_are_not():
    names = warmup.project_templates()
    assert "base.html" in names
    assert any(n.startswith("ledger_app/") for n in names)
    assert not any(n.startswith("admin/") for n in names)  # django.contrib.admin's own


def test_the_warm_up_loads_urls_templates_tokenizer_and_secret_scanner(settings, monkeypatch):
    monkeypatch.setenv(warmup.ENV, "1")
    get_encoding.cache_clear()
    spent = warmup.warm_up()
    assert set(spent) == {"urls", "templates", "tokenizer", "secrets"}
    assert get_resolver()._populated
    assert get_encoding.cache_info().currsize == 1  # the encoding is loaded
    engine = engines["django"].engine
    cached = [loader for loader in engine.template_loaders if hasattr(loader, "get_template_cache")]
    if cached:  # DEBUG off: the cached loader holds every project template compiled
        assert "base.html" in cached[0].get_template_cache


def test_the_warm_up_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(warmup.ENV, "0")
    assert warmup.warm_up() == {}


@pytest.mark.django_db
def test_a_journal_cost_is_cached_under_a_key_every_process_computes_alike(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    cache.clear()
    prices = parse_price_table({"gpt-5-codex": [1.25, 10.0]})
    item = message("assistant", "Done.")
    item.metadata["model"] = "gpt-5-codex"
    item.usage = {"input_tokens": 1_000_000, "output_tokens": 100_000}
    journal = journal_build(
        tenant=tenant_ensure(slug="costs"), items=[message("user", "Go."), item]
    )
    total = journal_costs([journal.pk], prices)[journal.pk]
    # a digest of the price table, not hash(): str hashes differ from process to process
    table = hashlib.sha256(repr(sorted(prices.items())).encode()).hexdigest()[:16]
    key = f"journal-cost-total:{journal.pk}:{journal.head_seq}:{table}"
    assert cache.get(key) == tuple(total)
