"""Registers the ``browser`` marker (tests that drive headless Chromium)."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "browser: drives headless Chromium through Playwright (needs /usr/bin/chromium)"
    )
