"""The dashboard across a tenant's sessions: figures per session, sorting, tenant scope,
the bar charts (README "The UI", Dashboard)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from journal_app.formats.base import message
from ledger_app.bars import bar_chart
from ledger_app.models import Fold, FoldAttempt
from ledger_app.selectors.dashboard import tenant_dashboard
from ledger_app.services import ledger_fold
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build


def test_bar_chart_keeps_the_largest_and_scales_to_the_top():
    chart = bar_chart(
        "Tokens", [("a", 10, "10", "/a"), ("b", 40, "40", "/b"), ("c", 0, "0", "")], limit=5
    )

    assert [(b.label, b.shown) for b in chart.bars] == [("b", "40"), ("a", "10")]
    assert chart.bars[0].width == chart.plot_width
    assert chart.bars[1].width == round(chart.plot_width / 4, 2)
    assert bar_chart("Empty", [("a", 0, "0", "")]).bars == []


def _priced(text: str, tokens: int):
    m = message("assistant", text)
    m.metadata = {"model": "gpt-5-codex", "usage": {"input_tokens": tokens, "output_tokens": 0}}
    return m


@pytest.fixture
def setup(db, settings):
    settings.LEDGER_MODEL_PRICES = {"gpt-5-codex": [1.0, 10.0]}
    acme, globex = TenantFactory(slug="acme"), TenantFactory(slug="globex")
    user = MembershipFactory(tenant=acme, user=UserFactory(username="oscar"), role="operator").user
    cheap = journal_build(
        tenant=acme, key="cheap", items=[message("user", "hi"), _priced("ok", 1_000_000)]
    )
    dear = journal_build(
        tenant=acme, key="dear", items=[message("user", "hi"), _priced("ok", 3_000_000)]
    )
    ledger_fold(journal=dear, writer="mechanical", recover=False)  # outcome fallback
    FoldAttempt.objects.create(
        journal=cheap,
        number=1,
        seq_start=1,
        seq_end=2,
        revision=2,
        range_hash="0" * 64,
        outcome="failed",
        writer="model",
        error="unreachable",
    )
    journal_build(tenant=globex, key="secret", items=[message("user", "not yours")])
    return user, cheap, dear


def test_figures_per_session_and_sorting(setup):
    user, cheap, dear = setup

    board = tenant_dashboard(user=user, sort="cost")

    assert [r.session.key for r in board.rows] == ["dear", "cheap"]
    dear_row, cheap_row = board.rows
    assert (dear_row.cost, cheap_row.cost) == (Decimal("3"), Decimal("1"))
    assert (dear_row.folds, dear_row.fallbacks) == (
        1,
        Fold.objects.filter(outcome="fallback").count(),
    )
    assert dear_row.fallbacks == 1
    assert (cheap_row.failed, dear_row.failed) == (1, 0)
    assert board.totals["sessions"] == 2 and board.totals["cost"] == Decimal("4")
    assert [r.session.key for r in tenant_dashboard(user=user, sort="failed").rows] == [
        "cheap",
        "dear",
    ]


def test_the_page_shows_charts_and_keeps_its_filters_in_the_url(setup, client):
    user, *_ = setup
    client.force_login(user)

    r = client.get(reverse("ledger:dashboard") + "?tenant=acme&sort=cost")

    body = r.content.decode()
    assert r.status_code == 200
    assert "secret" not in body  # another tenant's session
    assert 'aria-label="Cost (computed, USD): dear $3.00, cheap $1.00"' in body
    assert 'href="http://testserver/ledger/dashboard/?tenant=acme&amp;sort=cost"' in body
    assert body.index("acme/dear") < body.index("acme/cheap")


def test_the_page_costs_a_fixed_number_of_queries(setup, client):
    user, *_ = setup
    client.force_login(user)
    url = reverse("ledger:dashboard")
    client.get(url)  # warm the per-journal cost cache
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    acme = TenantFactory._meta.model.objects.get(slug="acme")
    for i in range(10):
        journal_build(tenant=acme, key=f"more-{i}", items=[message("user", f"task {i}")])
    client.get(url)
    with CaptureQueriesContext(connection) as many:
        client.get(url)

    assert len(many.captured_queries) == len(few.captured_queries)


def test_failed_calls_are_counted_per_session_and_sortable(setup, client):
    """Failed context requests and unanswered proxied model calls (the overview lists them)
    are counted per session, so the session to open is found from the dashboard."""
    from audit_app.services import journal_event

    user, cheap, dear = setup
    for action in ("context.failed", "context.failed", "model_call.failed"):
        journal_event(journal=dear, action=action, revision=1, details={})
    journal_event(journal=cheap, action="comment.add", revision=1, details={})  # not a failure
    board = tenant_dashboard(user=user, sort="failed_calls")
    assert [(r.session.key, r.failed_calls) for r in board.rows] == [("dear", 3), ("cheap", 0)]
    assert board.totals["failed_calls"] == 3
    client.force_login(user)
    body = client.get(reverse("ledger:dashboard") + "?sort=failed_calls").content.decode()
    assert "3 failed calls" in body and 'data-label="Failed calls"' in body
