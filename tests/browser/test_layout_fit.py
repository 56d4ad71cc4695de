"""The facts table beside the side panel at 1280 px, and the fold and failed-context pages on
a phone (390 px), in headless Chromium (Debian's, through Playwright, DEBUG off).

At 1280 x 900 with the side panel open the facts table keeps its text column readable and
the Support link clicked from stays in view, left of the panel. At 390 x 844 neither the fold
page nor a failed context page scrolls sideways (``document.scrollWidth <= innerWidth``),
whatever the length of the unbroken values they show. Screenshots under
``test-output/screenshots/`` (``ui-layout-*.png``).
"""

from __future__ import annotations

import os

import pytest

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry
from journal_app.services import journal_append
from ledger_app.services import ledger_fold
from tests.browser.test_operator_ui import CHROMIUM, _login, _shot
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build
from tests.support.writers import ScriptedWriter

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}"),
]

LONG_PATH = "services/billing/" + "very_long_directory_name_without_breaks_" * 6 + "refunds.py"
LONG_WORD = "x" * 180


@pytest.fixture
def scene(monkeypatch, settings, tmp_path):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.MEDIA_ROOT, settings.DEBUG = tmp_path / "media", False
    acme = TenantFactory(slug="acme")
    user = MembershipFactory(tenant=acme, user=UserFactory(username="ada"), role="admin").user
    items = [
        message("user", f"Fix the refund rounding in {LONG_PATH}; keep {LONG_WORD} as is."),
        message("developer", f"Never touch {LONG_PATH} without running the tests."),
    ]
    for i in range(3):
        items += [
            tool_call(f"s{i}", "shell", {"command": ["bash", "-lc", f"pytest -q {LONG_PATH}"]}),
            tool_result(f"s{i}", f"{i} passed {LONG_WORD}", exit_code=0),
            message("assistant", f"Ran the tests of {LONG_PATH}: all pass ({LONG_WORD})."),
        ]
    journal = journal_build(tenant=acme, key="dear", title="Refunds", items=items)
    assert ledger_fold(journal=journal).fold is not None
    journal_append(journal=journal, items=[message("user", f"Also check {LONG_WORD}2.")])
    journal.refresh_from_db()
    last = Entry.objects.get(journal=journal, seq=journal.head_seq)
    fact = {
        "category": "decision",
        "priority": "P1",
        "confidence": "reported",
        "support": [{"entry": last.entry_hash, "quote": f"{LONG_WORD}2"}],
        "author": "writer",
    }
    ops = [
        {"op": "add", "fact": {**fact, "id": "decision-" + LONG_WORD[:90], "text": LONG_PATH}},
        {
            "op": "add",
            "fact": {**fact, "id": "claim-" + LONG_WORD[:90], "text": f"Deployed {LONG_PATH}",
                     "category": "verified_state", "confidence": "verified",
                     "support": [{"entry": last.entry_hash}]},
        },
    ]  # fmt: skip
    assert ledger_fold(journal=journal, writer=ScriptedWriter(ops, "scripted")).fold.number == 2
    return user


def _doc_fits(page) -> list[int]:
    return page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")


def test_the_side_panel_keeps_the_facts_table_readable_at_1280_px(live_server, browser, scene):
    base = live_server.url
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    _login(page, base, "ada")
    page.goto(base + "/ledger/acme/dear/main/main/")
    opener = page.locator("table.facts td[data-label=Support] a").first
    opener.click()
    expect(page.locator("#side-panel.open")).to_be_visible()
    _shot(page, "layout-facts-panel-1280")
    panel_left = page.locator("#side-panel").bounding_box()["x"]
    box = opener.bounding_box()
    text = page.locator("table.facts tbody td.text").first.bounding_box()["width"]
    assert box["x"] >= 0 and box["x"] + box["width"] <= panel_left, (box, panel_left)
    assert text >= 240, text  # the fact's text stays readable (15rem and more)


@pytest.mark.parametrize("where", ["fold", "context"])
def test_the_fold_and_failed_context_pages_do_not_scroll_sideways_on_a_phone(
    live_server, browser, scene, where
):
    base = live_server.url
    page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    _login(page, base, "ada")
    ledger = base + "/ledger/acme/dear/main/main/"
    if where == "fold":
        page.goto(ledger + "folds/2/")
        expect(page.locator("#invariants .report").first).to_be_visible()  # loaded by htmx
    else:
        page.goto(ledger + "context/?working_budget=100&hard_limit=150")
        expect(page.locator("#context-failure")).to_contain_text("Cause:")
    _shot(page, f"layout-{where}-390")
    wide = page.evaluate(
        "() => [...document.querySelectorAll('main *')].filter(e => e.scrollWidth >"
        " e.clientWidth + 1 && getComputedStyle(e).overflowX === 'visible').slice(-8)"
        ".map(e => e.tagName + '.' + e.className + '#' + e.id + ' ' + e.scrollWidth)"
    )
    width, inner = _doc_fits(page)
    assert width <= inner, (width, inner, wide)
