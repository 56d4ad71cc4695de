"""The operator's daily tool in headless Chromium, DEBUG on and off (README, "The UI"):
cost on the sessions list and the timeline, a ledger page that never waits for its check,
the context page's explained failure, readable tool calls, role-aware review buttons,
receipts filtered to triggered attempts, the audit log's filters and nav entry, the side
panel beside the table at 1280 px and the scroll hint on a phone. axe-core on every page.

Launched as the other browser tests are (tests/browser/test_operator_ui.py).
"""

from __future__ import annotations

import os

import pytest

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Membership
from ledger_app.services import ledger_fold
from recovery_app.models import Receipt
from tests.browser.test_operator_ui import CHROMIUM, _axe, _login, _shot
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}"),
]

PATCH = "*** Begin Patch\n*** Update File: billing/refunds.py\n@@ def refund():\n-    return round(x)\n+    return round(x, 2)\n*** End Patch"


@pytest.fixture(autouse=True)
def _env(monkeypatch, settings, tmp_path):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.LEDGER_MODEL_PRICES = {"gpt-5-codex": [1.25, 10.0]}


@pytest.fixture
def scene():
    acme = TenantFactory(slug="acme")
    for name, role in (("ada", "ADMIN"), ("oscar", "OPERATOR")):
        MembershipFactory(
            tenant=acme, user=UserFactory(username=name), role=getattr(Membership.Role, role)
        )
    items = [message("user", "Fix the refund rounding in billing/refunds.py.")]
    for i in range(3):
        call = tool_call(f"p{i}", "apply_patch", {"input": PATCH})
        call.metadata["model"] = "gpt-5-codex"
        call.usage = {"input_tokens": 100_000 * (i + 1), "output_tokens": 2_000}
        items += [
            call,
            tool_result(f"p{i}", "Done", exit_code=0),
            tool_call(f"s{i}", "shell", {"command": ["bash", "-lc", f"pytest -q tests/t{i}.py"]}),
            tool_result(f"s{i}", f"{i} passed", exit_code=0),
        ]
    dear = journal_build(tenant=acme, key="dear", title="Refunds", items=items)
    cheap = journal_build(tenant=acme, key="cheap", items=[message("user", "hello")])
    assert ledger_fold(journal=dear).fold is not None
    Receipt.objects.create(journal=dear, outcome="not_triggered", reason="quiet scan")
    Receipt.objects.create(
        journal=dear,
        outcome="nothing_found",
        reason="no raw entry matched 2 queries",
        trigger={"fired": True, "reason": "seq 1: identifier billing/refunds.py"},
    )
    return {"dear": dear, "cheap": cheap}


@pytest.mark.parametrize("debug", [True, False], ids=["debug-on", "debug-off"])
def test_the_daily_tool(live_server, browser, scene, settings, debug):
    settings.DEBUG = debug
    tag = "debug" if debug else "prod"
    base = live_server.url
    scope = "/t/acme/dear/main/main/"
    ledger = "/ledger/acme/dear/main/main/"
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    _login(page, base, "ada")

    # 1. cost: sessions list sorted by cost, per tenant; the timeline per call and round
    page.goto(base + "/?sort=cost")
    rows = page.locator("#session-table tbody tr")
    expect(rows.first).to_contain_text("dear")
    expect(page.locator("#session-table")).to_contain_text("per tenant: acme $")
    _axe(page, "sessions by cost")
    page.goto(base + scope)
    expect(page.locator("main")).to_contain_text("Cost (computed)")
    expect(page.locator(".cost").first).to_contain_text("computed")
    # 5. readable tool calls: the patch as a diff, the command as code
    expect(page.locator(".diff-add").first).to_have_text("+    return round(x, 2)")
    expect(page.locator("pre.shell").first).to_contain_text("$ pytest -q tests/t0.py")
    _axe(page, "timeline")
    _shot(page, f"daily-timeline-{tag}")

    # 4. the side panel opens beside the table: the link clicked from stays in view
    opener = page.locator("table.entries a.hash").first
    opener.click()
    expect(page.locator("#side-panel.open")).to_be_visible()
    panel_left = page.locator("#side-panel").bounding_box()["x"]
    box = opener.bounding_box()
    assert box["x"] + box["width"] <= panel_left, (box, panel_left)
    _shot(page, f"daily-panel-{tag}")

    # 2. the first facts page after the fold does not wait for the check
    page.goto(base + ledger)
    expect(page.locator("#verify-status, #verify-warning")).to_have_count(1)
    _axe(page, "facts")

    # 3. the context page explains a failure and offers a budget that works
    page.goto(base + ledger + "context/?working_budget=100&hard_limit=150")
    failure = page.locator("#context-failure")
    expect(failure).to_contain_text("Cause:")
    expect(failure).to_contain_text("Next step:")
    expect(page.locator("#context-checkpoint")).to_contain_text("writes nothing")
    _axe(page, "context failure")
    failure.locator("a", has_text="tokens").first.click()
    expect(page.locator("main")).to_contain_text("Status ok")

    # 6. receipts: triggered by default, the reason once
    page.goto(base + "/recovery/acme/dear/main/main/")
    expect(page.locator("table.receipts")).to_contain_text("no raw entry matched 2 queries")
    expect(page.locator("table.receipts")).not_to_contain_text("quiet scan")  # not triggered
    _axe(page, "receipts")

    # 8. audit log: nav entry for the admin, filters
    page.goto(base + "/")
    page.locator("nav a", has_text="Audit log").click()
    expect(page.locator("#audit-events")).to_contain_text("account.login")
    page.fill("#audit-actor", "ada")
    page.locator("#audit-actor").press("Enter")
    expect(page.locator("#audit-events tbody tr").first).to_contain_text("ada")
    _axe(page, "audit log")

    # 7. an operator is not offered the admin's audit log
    other = browser.new_context(viewport={"width": 390, "height": 844})
    phone = other.new_page()
    phone.on("pageerror", lambda exc: errors.append(str(exc)))
    _login(phone, base, "oscar")
    expect(phone.locator("nav a", has_text="Audit log")).to_have_count(0)
    # a phone: a table wider than the screen says it scrolls
    phone.goto(base + "/recovery/acme/dear/main/main/?outcome=all")
    expect(phone.locator(".scroll-hint").first).to_be_visible()
    _axe(phone, "receipts on a phone")
    _shot(phone, f"daily-phone-{tag}")
    assert errors == []
