"""The price table (``LEDGER_MODEL_PRICES``) and computed costs (journal_app/pricing.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal

import pytest
from django.urls import reverse

from journal_app.formats.base import message
from journal_app.pricing import Price, PriceTableError, call_cost, entry_cost, parse_price_table
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def acme():
    return TenantFactory(slug="acme")


@pytest.fixture
def member(acme):
    return MembershipFactory(tenant=acme, user=UserFactory(username="alice")).user


def test_it_reads_the_readme_example_with_floats():
    assert parse_price_table({"gpt-5-codex": [1.25, 10.0]}) == {
        "gpt-5-codex": Price(Decimal("1.25"), Decimal("10.0"), None)
    }


def test_it_reads_an_optional_cached_input_price():
    assert parse_price_table({"m": [3, 15, 0.3]})["m"].cached_input == Decimal("0.3")


@pytest.mark.parametrize(
    "table, named",
    [
        ({"m": [1.25]}, "'m'"),
        ({"m": [1, 2, 3, 4]}, "'m'"),
        ({"ok": [1, 2], "bad": [1, "x"]}, "'bad'"),
        ({"m": [-1, 2]}, "'m'"),
        ({"m": [True, 2]}, "'m'"),
        ({"m": 5}, "'m'"),
    ],
)
def test_a_bad_entry_is_refused_by_name(table, named):
    with pytest.raises(PriceTableError, match=named):
        parse_price_table(table)


def test_a_table_that_is_not_an_object_is_refused():
    with pytest.raises(PriceTableError, match="JSON object"):
        parse_price_table([["m", 1, 2]])


def test_openai_cached_tokens_are_inside_the_input_and_charged_at_the_cached_price():
    price = Price(Decimal("1.25"), Decimal("10"), Decimal("0.125"))
    usage = {"input_tokens": 1_000_000, "cached_input_tokens": 800_000, "output_tokens": 10_000}
    # 200k uncached * 1.25 + 800k cached * 0.125 + 10k out * 10, per million
    assert call_cost(price, usage) == Decimal("0.25") + Decimal("0.1") + Decimal("0.1")
    details = {"prompt_tokens": 1_000_000, "prompt_tokens_details": {"cached_tokens": 800_000}}
    assert call_cost(price, {**details, "completion_tokens": 10_000}) == Decimal("0.45")


def test_anthropic_cache_reads_are_beside_the_input():
    price = Price(Decimal("3"), Decimal("15"), Decimal("0.3"))
    usage = {
        "input_tokens": 1_000,
        "cache_read_input_tokens": 1_000_000,
        "cache_creation_input_tokens": 1_000,
        "output_tokens": 0,
    }
    assert call_cost(price, usage) == (Decimal(2_000 * 3) + Decimal("300000")) / 1_000_000


def test_without_a_cached_price_cached_tokens_cost_the_input_price():
    price = Price(Decimal("2"), Decimal("8"))
    assert call_cost(price, {"input_tokens": 500_000, "cached_input_tokens": 400_000}) == 1


def test_an_entry_costs_nothing_without_usage_or_a_price():
    prices = {"m": Price(Decimal(1), Decimal(1))}
    assert entry_cost(prices, {"model": "m"}) is None
    assert entry_cost(prices, {"model": "other", "usage": {"input_tokens": 5}}) is None
    assert entry_cost(prices, {"model": "m", "usage": {}}) is None
    cost = entry_cost(prices, {"turn_context": {"model": "m"}, "usage": {"output_tokens": 10}})
    assert cost == Decimal("0.00001")


def _settings_load(value: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LEDGER_MODEL_PRICES": value, "DJANGO_SETTINGS_MODULE": "config.settings"}
    code = "import django; django.setup(); from django.conf import settings; "
    code += "print(settings.LEDGER_MODEL_PRICES)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_the_readme_example_starts_and_a_bad_entry_stops_the_start_naming_it():
    ok = _settings_load('{"gpt-5-codex": [1.25, 10.0]}')
    assert ok.returncode == 0, ok.stderr
    assert "Decimal('1.25')" in ok.stdout and "Decimal('10.0')" in ok.stdout
    bad = _settings_load('{"gpt-5-codex": [1.25, "ten"]}')
    assert bad.returncode != 0
    assert "LEDGER_MODEL_PRICES" in bad.stderr and "'gpt-5-codex'" in bad.stderr


def _priced_session(tenant, key, tokens_out):
    items = [message("user", "Go."), message("assistant", "Done."), message("assistant", "More.")]
    for item in items[1:]:
        item.metadata["model"] = "gpt-5-codex"
        item.usage = {"input_tokens": 1_000_000, "output_tokens": tokens_out}
    return journal_build(tenant=tenant, key=key, items=items)


@pytest.mark.django_db
def test_the_timeline_and_sessions_list_show_computed_costs_per_call_round_session_and_tenant(
    client, member, acme, settings
):
    settings.LEDGER_MODEL_PRICES = parse_price_table({"gpt-5-codex": [1.25, 10.0]})
    _priced_session(acme, "cheap", 100_000)  # 2 calls x (1.25 + 1.00) = 4.50
    _priced_session(acme, "dear", 1_000_000)  # 2 calls x (1.25 + 10.0) = 22.50
    client.force_login(member)
    body = client.get(
        reverse("journal:timeline", args=["acme", "dear", "main", "main"])
    ).content.decode()
    assert "$11.2500 computed" in body  # one call
    assert "· $22.5000 computed" in body  # the round (both calls) and the session
    assert "Cost (computed)" in body
    listing = client.get(reverse("journal:session_list"), {"sort": "cost"}).content.decode()
    assert listing.index(">dear<") < listing.index(">cheap<")
    assert "$22.50" in listing and "$4.50" in listing
    assert "acme $27.00" in listing  # the tenant's total
    # sortable column headers: each links its sort, the current one marked
    assert '<a href="?sort=tokens">Tokens</a>' in listing
    assert 'aria-sort="descending"><a href="?sort=cost">' in listing


@pytest.mark.django_db
def test_without_a_price_table_no_cost_is_shown(client, member, acme, settings):
    settings.LEDGER_MODEL_PRICES = {}
    _priced_session(acme, "free", 10)
    client.force_login(member)
    listing = client.get(reverse("journal:session_list"), {"sort": "cost"}).content.decode()
    assert "Cost" not in listing and ">free<" in listing
