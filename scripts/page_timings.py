"""First-view and later-view server times of the operator pages on a 20,000-entry session.

    DATABASE_URL=postgres://... python scripts/page_timings.py build     # once: the session
    DATABASE_URL=postgres://... python scripts/page_timings.py measure   # the table

``build`` writes tenant ``walk`` with the generated session of
``tests/support/timed_session.py`` (source times, provider usage) through the append service,
and user ``walker`` (admin of ``walk``). ``measure`` starts one fresh Python process per page
(a "start": empty caches, no template loaded, no stored check read yet) and times, through
Django's test client (the whole request: middleware, queries, template), the first GET and
then three more (the median is "later"). Run it with ``DEBUG=1`` and ``DEBUG=0``. A
measurement, not a test: no assertion on the times.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ["DJANGO_DEBUG"] = os.environ.get("DEBUG", "0")  # the settings read this at start
os.environ.setdefault("DJANGO_SECRET_KEY", "page-timings-" + "x" * 50)  # required with DEBUG off
os.environ.setdefault("LEDGER_MODEL_PRICES", '{"gpt-5-codex": [1.25, 10.0]}')

SCOPE = "walk/gen20k/main/main/"
PAGES = {
    "sessions by cost": "/?sort=cost",
    "overview": "/t/walk/gen20k/",
    "timeline": "/t/" + SCOPE,
    "timeline, last page": "/t/" + SCOPE + "?page=200",
    "waterfall": "/t/" + SCOPE + "waterfall/",
    "waterfall, last page": "/t/" + SCOPE + "waterfall/?page=67",
    "facts": "/ledger/" + SCOPE,
    "folds": "/ledger/" + SCOPE + "folds/",
    "fold 1": "/ledger/" + SCOPE + "folds/1/",
    "context": "/ledger/" + SCOPE + "context/",
    "receipts": "/recovery/" + SCOPE,
    "dashboard": "/ledger/dashboard/?sort=cost",
    "search": "/recovery/search/?tenant=walk&q=refund+rounding",
    "audit log": "/audit/walk/",
}


def _setup() -> None:
    import django

    django.setup()


def build(entries: int = 20_000) -> None:
    _setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from journal_app.models import Membership, Session
    from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
    from tests.support.timed_session import timed_items

    call_command("migrate", verbosity=0)
    tenant = tenant_ensure(slug="walk")
    if Session.objects.filter(tenant=tenant, key="gen20k").exists():
        print("already built")
        return
    user, _ = get_user_model().objects.get_or_create(username="walker")
    Membership.objects.get_or_create(user=user, tenant=tenant, role=Membership.Role.ADMIN)
    from audit_app.roles import user_roles_sync

    user_roles_sync(user)
    journal = journal_ensure(
        session=session_ensure(tenant=tenant, key="gen20k", title="walk", source_format="test")
    )
    items = timed_items(entries)
    t0 = time.perf_counter()
    for start in range(0, len(items), 2000):
        journal_append(journal=journal, items=items[start : start + 2000], start_seq=start + 1)
    print(f"built {entries:,} entries in {time.perf_counter() - t0:.1f} s")


def one(url: str) -> None:
    _setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    settings.DEBUG = os.environ.get("DEBUG", "0") == "1"
    client = Client()
    client.force_login(get_user_model().objects.get(username="walker"))
    warm = os.environ.get("WARM") == "1"
    if warm:  # the process's own start-up (handler, middleware, connection, base template)
        client.get("/healthz", secure=True)
        client.get("/accounts/login/", secure=True)
    times = []
    for _ in range(4):
        t0 = time.perf_counter()
        r = client.get(url, secure=True)
        times.append(time.perf_counter() - t0)
        if r.status_code != 200:
            print(f"{r.status_code}", end=" ")
    print(f"{times[0] * 1000:.0f} {statistics.median(times[1:]) * 1000:.0f}")


def _run(url: str, warm: bool) -> tuple[float, float, str]:
    env = {**os.environ, "WARM": "1" if warm else "0"}
    out = subprocess.run(
        [sys.executable, __file__, "one", url], capture_output=True, text=True, check=False, env=env
    )
    parts = out.stdout.split()
    if len(parts) < 2:
        raise RuntimeError(out.stderr.strip().splitlines()[-1:])
    return float(parts[-2]), float(parts[-1]), " ".join(parts[:-2])


def measure() -> None:
    debug = os.environ.get("DEBUG", "0")
    print(f"DEBUG={debug}; server time in ms; a fresh process per page and column")
    print("cold: the process's first request; warm: the page's first view after /healthz and")
    print("the login page warmed the process; later: median of the next three views")
    print(f"{'page':<24} {'cold':>7} {'warm':>7} {'later':>7} {'warm/later':>10}")
    for name, url in PAGES.items():
        try:
            cold, _, note = _run(url, warm=False)
            first, later, note2 = _run(url, warm=True)
        except RuntimeError as exc:
            print(f"{name:<24} failed: {exc}")
            continue
        ratio = first / later
        print(f"{name:<24} {cold:>7.0f} {first:>7.0f} {later:>7.0f} {ratio:>10.2f} {note}{note2}")


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "measure"
    if command == "build":
        build(int(sys.argv[2]) if len(sys.argv) > 2 else 20_000)
    elif command == "one":
        one(sys.argv[2])
    else:
        measure()
