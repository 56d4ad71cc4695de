#!/usr/bin/env bash
# Browser tests drive Debian's chromium through Playwright (never a downloaded browser).
# Install it when missing and we can (root with apt-get); otherwise say the tests will skip.
set -u
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser tests"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
    && exit 0
fi
echo "warning: /usr/bin/chromium is missing; the browser tests will be skipped" >&2
exit 0
