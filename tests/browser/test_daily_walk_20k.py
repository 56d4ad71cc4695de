"""The operator's daily walk: every page an operator uses, on a generated
20,000-entry session with source times and provider usage, DEBUG on and off, axe-core on
every page (README "The UI"). Uses the shared ``browser`` fixture (tests/browser/conftest.py).

Timings of first and later views are measured by ``scripts/page_timings.py``, not here.
"""

from __future__ import annotations

import re

import pytest

from audit_app.models import AuditEvent
from journal_app.formats.base import message
from journal_app.models import Membership
from tests.browser.test_daily_tool import expect, pytestmark  # noqa: F401 (same marks)
from tests.browser.test_operator_ui import _axe, _login, _shot
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build
from tests.support.timed_session import timed_items

ENTRIES = 20_000


@pytest.fixture
def big(settings):
    settings.LEDGER_MODEL_PRICES = {"gpt-5-codex": [1.25, 10.0]}
    acme = TenantFactory(slug="acme")
    for name, role in (("ada", "ADMIN"), ("oscar", "OPERATOR")):
        MembershipFactory(
            tenant=acme, user=UserFactory(username=name), role=getattr(Membership.Role, role)
        )
    journal = journal_build(tenant=acme, key="gen20k", items=timed_items(ENTRIES))
    journal_build(tenant=acme, key="small", items=[message("user", "refund rounding, small")])
    journal_build(
        tenant=TenantFactory(slug="globex"),
        key="theirs",
        items=[message("user", "refund rounding")],
    )
    assert journal.head_seq == ENTRIES
    return journal


@pytest.fixture(autouse=True)
def _env(monkeypatch, settings, tmp_path):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.MEDIA_ROOT = tmp_path / "media"


def _cell_position(page, selector: str) -> str:
    return page.eval_on_selector(selector, "el => getComputedStyle(el).position")


def test_the_operator_walk_on_20k_entries(live_server, browser, big, settings):
    base = live_server.url
    scope = "/t/acme/gen20k/main/main/"
    ledger = "/ledger/acme/gen20k/main/main/"
    for debug in (True, False):
        settings.DEBUG = debug
        tag = "debug" if debug else "prod"
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        _login(page, base, "ada")

        # 1 cost: the costliest session first, costs on the timeline
        page.goto(base + "/?sort=cost")
        expect(page.locator("#session-table tbody tr").first).to_contain_text("gen20k")
        _axe(page, f"sessions by cost ({tag})")
        page.goto(base + scope)
        expect(page.locator(".cost").first).to_contain_text("computed")
        # 5 readable tool calls: the shell command as code
        expect(page.locator("#entry-list")).to_contain_text("pytest -k t0")
        _axe(page, f"timeline ({tag})")

        # 2 the ledger pages answer without waiting for the stored check
        page.goto(base + ledger)
        expect(page.locator("#verify-status, #verify-warning")).to_have_count(1)
        _axe(page, f"facts ({tag})")

        # 10 the waterfall: calls and tool runs with durations; the failed run is marked
        page.goto(base + scope + "waterfall/")
        wf = page.locator("#waterfall")
        expect(wf).to_contain_text("of source time")
        expect(page.locator("table.waterfall tr.span-failed").first).to_contain_text("failed")
        expect(page.locator("#slowest")).to_contain_text("Slowest")
        _axe(page, f"waterfall ({tag})")
        _shot(page, f"walk20k-waterfall-{tag}")
        page.locator("nav[aria-label='Waterfall pages'] a", has_text="Last").click()
        expect(page.locator("nav[aria-label='Waterfall pages']")).to_contain_text("Page 67 of 67")

        # 8 + 7 a fold from the page is audited as ui; the admin sees the button
        page.goto(base + ledger + "folds/")
        expect(page.locator("#fold-now button")).to_be_visible()
        _axe(page, f"folds ({tag})")
        before = AuditEvent.objects.filter(action="fold.store").count()
        page.locator("#fold-now button").click()
        expect(page.locator(".messages")).to_be_visible()
        events = AuditEvent.objects.filter(action="fold.store").order_by("pk")
        if events.count() > before:  # nothing left to fold on the second pass
            assert events.last().details["surface"] == "ui"
        page.goto(base + "/audit/acme/?action=fold.store")
        expect(page.locator("#audit-events")).to_contain_text("fold.store")
        expect(page.locator("#audit-events")).to_contain_text("surface=")
        _axe(page, f"audit log, folds ({tag})")

        # 10 dashboard: charts across sessions, the sort is in the URL (a saved view)
        page.goto(base + "/ledger/dashboard/")
        page.select_option("#dash-sort", "cost")
        page.locator("form.search button[type=submit]").click()
        page.wait_for_url(re.compile(r"sort=cost"))
        expect(page.locator("table.dashboard tbody tr").first).to_contain_text("gen20k")
        expect(page.locator("figure.dash-chart svg").first).to_be_visible()
        _axe(page, f"dashboard ({tag})")
        link = page.locator("#permalink").get_attribute("href")
        page.goto(base + "/")
        page.goto(link)
        assert page.locator("#dash-sort").input_value() == "cost"
        _shot(page, f"walk20k-dashboard-{tag}")

        # 10 content search across the tenant's sessions, paginated, never another tenant's
        page.goto(base + "/recovery/search/?tenant=acme&q=refund+rounding")
        hits = page.locator("#search-results")
        expect(hits).to_contain_text("Results 1–25")
        expect(hits).not_to_contain_text("theirs")
        _axe(page, f"search ({tag})")
        page.locator("nav[aria-label='Result pages'] a", has_text="Next").click()
        expect(hits).to_contain_text("Results 26–")

        # 3 the context page explains itself (a tiny budget fails with a cause)
        # a deadline for a loaded machine, not a timing check: a failed build at 20k entries
        # also works out the budget that would fit (bench/ times it; 30 s ran out under load)
        page.goto(base + ledger + "context/?working_budget=100&hard_limit=150", timeout=180_000)
        expect(page.locator("#context-failure")).to_contain_text("Cause:")
        _axe(page, f"context failure ({tag})")

        # 6 receipts default to the triggered attempts
        page.goto(base + "/recovery/acme/gen20k/main/main/")
        expect(page.locator("main")).to_contain_text("triggered")
        _axe(page, f"receipts ({tag})")
        context.close()

        # 4 + 7 on a phone: tables as cards, decisive columns pinned; an operator is offered no fold
        phone = browser.new_context(viewport={"width": 390, "height": 844})
        page = phone.new_page()
        _login(page, base, "oscar")
        page.goto(base + ledger + "folds/")
        expect(page.locator("#fold-now")).to_have_count(0)
        expect(page.locator("#fold-now-note")).to_contain_text("reviewers and admins")
        _axe(page, f"folds, phone, operator ({tag})")
        page.goto(base + ledger + "folds/1/")
        assert _cell_position(page, "table.ops td.pin") == "sticky"
        _axe(page, f"fold ops, phone ({tag})")
        _shot(page, f"walk20k-fold-phone-{tag}")
        page.goto(base + scope + "waterfall/")
        assert (
            page.eval_on_selector("table.waterfall tr", "el => getComputedStyle(el).display")
            == "block"
        )
        _axe(page, f"waterfall, phone ({tag})")
        page.goto(base + "/ledger/dashboard/")
        _axe(page, f"dashboard, phone ({tag})")
        phone.close()
        assert errors == [], errors
