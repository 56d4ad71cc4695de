"""Totals with calls whose model has no price say they are partial (journal_app/pricing.py
``CostTotal``, ``cost_text``), on the timeline, the sessions list and the dashboard."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from journal_app.formats.base import message
from journal_app.pricing import CostTotal, Price, cost_add, cost_sum, cost_text, parse_price_table
from ledger_app.selectors.dashboard import tenant_dashboard
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build

PRICES = {"m": Price(Decimal(1), Decimal(1))}


def test_a_call_without_a_price_or_a_model_is_counted_unpriced():
    total = CostTotal()
    total = cost_add(total, PRICES, {"model": "m", "usage": {"input_tokens": 1_000_000}})
    total = cost_add(total, PRICES, {"model": "other", "usage": {"output_tokens": 5}})
    total = cost_add(total, PRICES, {"usage": {"input_tokens": 5}})
    total = cost_add(total, PRICES, {"model": "m"})  # no usage: not a call
    total = cost_add(total, PRICES, {"model": "m", "usage": {}})  # no figure: not a call
    assert total == CostTotal(Decimal(1), 1, 2)


def test_the_text_of_a_partial_total_names_the_unpriced_calls():
    assert cost_text(CostTotal(Decimal("1.234"), 3, 4)) == "$1.23 + 4 unpriced calls"
    assert cost_text(CostTotal(Decimal("1.234"), 3, 1), places=4) == "$1.2340 + 1 unpriced call"
    assert cost_text(CostTotal(Decimal("1.234"), 3, 0)) == "$1.23"
    assert cost_text(CostTotal(Decimal(0), 0, 2)) == "2 unpriced calls"
    assert cost_text(CostTotal()) == "" and cost_text(None) == ""
    both = cost_sum([CostTotal(Decimal(1), 1, 2), CostTotal(Decimal(2), 3, 0)])
    assert both == CostTotal(Decimal(3), 4, 2)


@pytest.fixture
def mixed(db, settings, tmp_path):
    """Session ``mixed`` of tenant acme: one priced call ($2.25), one of a model without a
    price, one whose source names no model."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.LEDGER_MODEL_PRICES = parse_price_table({"gpt-5-codex": [1.25, 10.0]})
    acme = TenantFactory(slug="acme")
    user = MembershipFactory(tenant=acme, user=UserFactory(username="alice"), role="operator").user
    items = [message("user", "Go."), message("assistant", "A."), message("assistant", "B.")]
    items += [message("assistant", "C.")]
    for item, model in zip(items[1:], ["gpt-5-codex", "local-llama", None], strict=True):
        if model:
            item.metadata["model"] = model
        item.usage = {"input_tokens": 1_000_000, "output_tokens": 100_000}
    journal_build(tenant=acme, key="mixed", items=items)
    return user


def test_the_timeline_says_its_totals_are_partial(client, mixed):
    client.force_login(mixed)
    body = client.get(
        reverse("journal:timeline", args=["acme", "mixed", "main", "main"])
    ).content.decode()
    assert "$2.2500 + 2 unpriced calls this lane/branch" in body  # the journal
    assert "· $2.2500 + 2 unpriced calls computed" in body  # the round
    assert body.count(">unpriced</span>") == 2  # each unpriced call


def test_the_sessions_list_says_its_totals_are_partial(client, mixed):
    client.force_login(mixed)
    listing = client.get(reverse("journal:session_list"), {"sort": "cost"}).content.decode()
    assert "acme $2.25 + 2 unpriced calls" in listing  # the tenant
    assert listing.count(">$2.25 + 2 unpriced calls<") == 2  # the session row and the total


def test_the_dashboard_says_its_totals_are_partial(client, mixed):
    board = tenant_dashboard(user=mixed)
    (row,) = board.rows
    assert (row.cost, row.unpriced) == (Decimal("2.25"), 2)
    assert board.totals["unpriced"] == 2
    client.force_login(mixed)
    body = client.get(reverse("ledger:dashboard")).content.decode()
    assert "$2.25 + 2 unpriced calls computed" in body
    assert "$2.2500 + 2 unpriced calls" in body  # the session's row
    # the cost chart's bar says so too (it showed "$2.2500" alone)
    assert '<text class="bar-value"' in body
    chart = body[body.index("Cost (computed, USD)") :]
    assert chart[: chart.index("</figure>")].count("+ 2 unpriced calls") == 2  # label, value


def test_the_waterfall_api_says_why_a_cost_is_null(client, mixed):
    from journal_app.auth import api_key_create
    from journal_app.models import Tenant

    _, raw = api_key_create(tenant=Tenant.objects.get(slug="acme"), name="runtime")
    r = client.get("/api/v1/sessions/mixed/main/main/waterfall", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert r.status_code == 200
    calls = [(s["label"], s["cost_usd"], s["cost_note"]) for s in r.json()["spans"]]
    # the three answers follow each other: one call, priced in part
    assert calls == [
        ("gpt-5-codex", "2.25", "partial: 2 model answers of this call could not be priced")
    ]


def test_a_span_says_why_its_cost_is_null():
    from journal_app.waterfall import Span

    assert Span("tool", "exec", 1, 1).cost_note == "a tool run has no model cost"
    assert Span("call", "model call", 1, 1).cost_note == "the source names no model for this call"
    no_usage = Span("call", "m", 1, 1)
    assert no_usage.cost_note == "the source reports no token usage for this call"
    unpriced = Span("call", "local-llama", 1, 1, input_tokens=5, unpriced=1)
    assert unpriced.cost_note == "no price for model 'local-llama' in LEDGER_MODEL_PRICES"
    priced = Span("call", "m", 1, 1, input_tokens=5, cost=Decimal(1))
    assert priced.cost_note == ""


def test_the_waterfall_page_says_the_same_as_its_api(client, mixed):
    client.force_login(mixed)
    body = client.get(
        reverse("journal:waterfall", args=["acme", "mixed", "main", "main"])
    ).content.decode()
    assert "$2.2500" in body
    assert "partial: 2 model answers of this call could not be priced" in body
