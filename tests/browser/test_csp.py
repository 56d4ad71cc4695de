"""The pages work under the Content-Security-Policy (README "Security headers") in headless
Chromium: no page reports a violation while it loads or while htmx swaps fragments, and the
htmx interactions still happen (a search typed swaps the table; a fact row opens its panel).

Launched as the other browser tests are, with their marks (tests/browser/test_operator_ui.py).
"""

from __future__ import annotations

import re

import pytest

from journal_app.formats.base import message
from journal_app.models import Membership
from tests.browser import test_operator_ui as ui
from tests.factories import MembershipFactory, TenantFactory, UserFactory, fold_build, journal_build

pytestmark = ui.pytestmark
playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect

#: records every violation the page reports (an init script runs before the page's own)
WATCH = (
    "window.__csp = [];"
    "document.addEventListener('securitypolicyviolation',"
    " e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"
)


@pytest.fixture
def scene(monkeypatch, settings, tmp_path):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.MEDIA_ROOT = tmp_path / "media"
    acme = TenantFactory(slug="acme")
    MembershipFactory(tenant=acme, user=UserFactory(username="ada"), role=Membership.Role.ADMIN)
    journal = journal_build(
        tenant=acme,
        key="billing",
        title="Fix the refund rounding",
        items=[
            message("user", "Always keep two decimals. Fix the refund rounding."),
            message("assistant", "Fixing it."),
        ],
    )
    fold_build(journal)
    return journal


def test_the_htmx_pages_work_under_the_policy(live_server, scene):
    base = live_server.url
    scope = "/ledger/acme/billing/main/main/"
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=ui.CHROMIUM, args=ui.ARGS)
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.add_init_script(WATCH)
        console: list[str] = []
        page.on(
            "console",
            lambda m: console.append(m.text) if "Content Security Policy" in m.text else None,
        )
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        ui._login(page, base, "ada")
        # htmx: a search typed swaps the session table and the URL follows it
        page.fill("#session-q", "zzz-in-no-session")
        page.wait_for_url(re.compile(r"q=zzz"))
        expect(page.locator("#session-table .empty")).to_be_visible()
        assert page.evaluate("window.__csp") == []
        for path in (
            "/t/acme/billing/",
            scope,
            scope + "folds/",
            scope + "folds/1/",
            scope + "context/",
            scope + "context/?view=debug",
            "/audit/acme/",
        ):
            response = page.goto(base + path)
            assert response.status == 200, path
            assert "script-src 'self'" in response.headers["content-security-policy"]
            page.wait_for_load_state("networkidle")
            assert page.evaluate("typeof htmx") == "object", path  # the static script ran
            assert page.evaluate("window.__csp") == [], path
        # htmx: a fact row opens its side panel (a fragment swapped in)
        page.goto(base + scope)
        page.locator("#fact-table a.fact-id").first.click()
        expect(page.locator("#side-panel")).not_to_be_empty()
        assert page.evaluate("window.__csp") == []
        browser.close()
    assert console == [] and errors == []
