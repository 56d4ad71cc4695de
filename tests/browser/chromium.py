"""Debian's Chromium for the browser tests: its path and the headless flags every test
launches it with (never a downloaded browser; README, "Tests")."""

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
