"""The sessions list fits at 1280 px and stacks on a phone (fresh-eyes finding).

Headless Chromium (Debian's, through Playwright) with DEBUG on and off: at 1280 x 800 neither
the page nor the table scrolls sideways (``scrollWidth <= clientWidth``); at 390 x 844 (a
phone) each session is a stacked card with every column's label and the page does not
scroll sideways either. axe-core reports no violation. Screenshots under
``test-output/screenshots/`` (``ui-sessions-*.png``).
"""

from __future__ import annotations

import os

import pytest

from journal_app.formats.base import message, tool_call, tool_result
from tests.browser.test_operator_ui import ARGS, CHROMIUM, _axe, _login, _shot, playwright_sync
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}"),
]


def _sessions(n: int = 6):
    tenant = TenantFactory(slug="acme-platform-engineering")
    user = MembershipFactory(tenant=tenant, user=UserFactory(username="sam")).user
    items = [
        message("user", "Make the refund rounding half-even and keep the tests green."),
        tool_call("c1", "shell", {"cmd": "pytest -q"}),
        tool_result("c1", "245 passed in 12.03s"),
    ]
    for i in range(n):
        journal_build(
            tenant=tenant,
            key=f"codex-vscode-long-monorepo-session-{i:02d}-with-a-long-key",
            title="Updating a team to assign a lead or change from viewer to contributor is VERY "
            f"slow; evaluate the TeamSheet and refactor it to be much faster ({i})",
            items=items,
        )
    return user


def _overflow(page) -> dict:
    return page.evaluate(
        "() => { const w = document.querySelector('#session-table .table-wrap');"
        " return {wrap: w ? [w.scrollWidth, w.clientWidth] : null,"
        " doc: [document.documentElement.scrollWidth, innerWidth],"
        " row: getComputedStyle(document.querySelector('table.sessions tbody tr')).display,"
        " labels: [...document.querySelectorAll('table.sessions tbody tr:first-child [data-label]')]"
        ".map(c => getComputedStyle(c, '::before').content)}; }"
    )


@pytest.mark.parametrize("debug", [False, True])
def test_the_sessions_list_fits_at_1280_px_and_stacks_on_a_phone(
    live_server, settings, monkeypatch, tmp_path, debug
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # the live server's ORM calls
    settings.MEDIA_ROOT, settings.DEBUG = tmp_path / "media", debug
    user = _sessions()
    base = live_server.url
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for name, (width, height) in {"desktop": (1280, 800), "phone": (390, 844)}.items():
            context = browser.new_context(viewport={"width": width, "height": height})
            page = context.new_page()
            _login(page, base, user.username)
            page.goto(base + "/")
            page.wait_for_selector("table.sessions")
            seen = _overflow(page)
            _shot(page, f"sessions-{name}{'-debug' if debug else ''}")
            assert seen["doc"][0] <= seen["doc"][1], (name, seen)
            assert seen["wrap"][0] <= seen["wrap"][1], (name, seen)
            if name == "phone":
                assert seen["row"] in ("block", "grid"), seen  # a card per session
                assert '"Key"' in seen["labels"] and '"Tokens"' in seen["labels"], seen
            else:
                assert seen["row"] == "table-row", seen
            _axe(page, f"sessions list at {width} px")
            context.close()
        browser.close()
