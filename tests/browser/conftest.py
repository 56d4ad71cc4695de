"""Registers the ``browser`` marker (tests that drive headless Chromium) and the one
``browser`` fixture they share: Debian's Chromium launched headless through Playwright."""

import pytest

from tests.browser.chromium import ARGS, CHROMIUM


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "browser: drives headless Chromium through Playwright (needs /usr/bin/chromium)"
    )


@pytest.fixture
def browser():
    playwright_sync = pytest.importorskip("playwright.sync_api")
    with playwright_sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()
