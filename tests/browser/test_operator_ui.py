"""The operator UI journeys of issue 17 in headless Chromium, with DEBUG on and off.

On the largest corpus session (the Codex rollout: 403 entries with source times and provider
token usage) and on a generated 20,000-entry session: errors that keep the page, evidence
highlighted in a side panel, tables that fit at 1280 px and on a phone, state in the URL
(Back/Forward), failures first-class, time and cost, the diff, keyboard shortcuts, dark mode,
the log-scale chart and the audit link for admins only. axe-core (vendored under
``tests/browser/vendor``) runs on every page visited and must report no violation.
Screenshots go to ``test-output/screenshots/`` (prefixed ``ui-``).

The test runner turns DEBUG off; the ``debug`` parameter turns it back on for the live server
(``make demo`` runs with DEBUG on, where django-htmx's DEBUG handler used to replace the
whole page with any 400/403/404/500 reply).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry, Membership
from journal_app.services import journal_append, journal_import
from ledger_app.models import FoldAttempt, RetirementRequest
from ledger_app.services import ledger_fold, retirement_review
from tests.browser.chromium import ARGS, CHROMIUM  # noqa: F401 (re-exported)
from tests.factories import (
    PASSWORD,
    MembershipFactory,
    TenantFactory,
    UserFactory,
    journal_build,
)
from tests.support.writers import ScriptedWriter

SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
LARGEST = "codex-rollout-jsonl/codex-vscode-long-monorepo-session.jsonl"
GENERATED_ENTRIES = 20_000

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="Playwright for Python is not installed (pip install playwright)"
)
expect = playwright_sync.expect
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason=f"no Chromium at {CHROMIUM} (apt-get install -y chromium)",
    ),
]


@pytest.fixture(autouse=True)
def _sync_db_in_playwright(monkeypatch, settings, tmp_path):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.LEDGER_MODEL_PRICES = {"gpt-5-codex": [1.25, 10.0]}


def _shot(page, name: str) -> str:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"ui-{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return str(path)


def _axe(page, where: str) -> None:
    """axe-core on the page as it is now: no violation of any rule (WCAG 2.x A/AA tags)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        # evaluated over the devtools protocol, which the page's Content-Security-Policy
        # does not govern (a <script> tag added to the page would be refused by it)
        page.evaluate(AXE.read_text() + "\n;undefined")
    result = page.evaluate(
        "async () => (await axe.run(document, {runOnly: {type: 'tag', values: "
        "['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}})).violations"
        ".map(v => ({id: v.id, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target)}))"
    )
    assert result == [], f"axe on {where}: {json.dumps(result, indent=1)}"


def _login(page, base: str, username: str) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form.login button[type=submit]")
    page.wait_for_url(base + "/")


def _users(tenant):
    return {
        role: MembershipFactory(
            tenant=tenant, user=UserFactory(username=name), role=getattr(Membership.Role, role)
        ).user
        for name, role in (("ada", "ADMIN"), ("rita", "REVIEWER"), ("oscar", "OPERATOR"))
    }


@pytest.fixture
def largest(corpus):
    """The Codex rollout in tenant acme, folded by the importer; then a scripted fold that
    adds a quoted decision, a fact citing a whole entry, a fact citing chunk 1 of a
    multi-chunk entry, an unsupported claim (rejected), and the retirement of two pins
    (two pending reviews); and a failed attempt (model unreachable)."""
    acme = TenantFactory(slug="acme")
    users = _users(acme)
    journal = journal_import(path=corpus / LARGEST, tenant="acme", session="codex").journal
    if not journal.folds.exists():
        assert ledger_fold(journal=journal).fold is not None
    journal_append(
        journal=journal,
        items=[
            message("user", "Update: the earlier instructions about the sheet no longer apply.")
        ],
    )
    journal.refresh_from_db()
    later = Entry.objects.get(journal=journal, seq=journal.head_seq)
    user_msg = Entry.objects.filter(journal=journal, kind="message", role="user").order_by("seq")
    goal = next(e for e in user_msg if len(e.text) > 40)
    quote = goal.text[10:50]
    big = next(
        e
        for e in Entry.objects.filter(journal=journal).order_by("-byte_length")[:5]
        if e.chunks.count() > 1
    )
    assistant = Entry.objects.filter(journal=journal, kind="message", role="assistant")[0]
    latest = journal.folds.order_by("-number").first()
    pins = [f for f in latest.state_dict["facts"].values() if f.get("pin")]
    ops = [
        _add("goal-1", "decision", "The user asked for the sheet refactor.", goal, quote=quote),
        _add("whole-1", "decision", "The user wrote this request.", goal),
        _add("chunk-1", "decision", "The biggest result was read.", big, chunk=1),
        {
            "op": "add",
            "fact": {
                "id": "claim-1",
                "category": "verified_state",
                "priority": "P1",
                "confidence": "verified",
                "text": "Everything was deployed.",
                "support": [{"entry": assistant.entry_hash}],
                "author": "writer",
            },
        },
        *[{"op": "retire", "id": p["id"], "evidence": [later.entry_hash]} for p in pins[:2]],
    ]
    fold = ledger_fold(journal=journal, writer=ScriptedWriter(ops, "scripted-ui")).fold
    assert fold is not None and fold.ops_rejected >= 1
    FoldAttempt.objects.create(
        journal=journal,
        number=fold.number + 1,
        seq_start=fold.seq_end or 1,
        seq_end=journal.head_seq,
        revision=journal.head_seq,
        range_hash="0" * 64,
        writer="openai:gpt-5",
        outcome=FoldAttempt.Outcome.FAILED,
        error="model endpoint unreachable: connection refused (http://model:8000/v1)",
    )
    return {"journal": journal, "users": users, "fold": fold, "goal": goal, "quote": quote}


def _add(fact_id, category, text, entry, *, quote="", chunk=None):
    item = {"entry": entry.entry_hash}
    if quote:
        item["quote"] = quote
    if chunk is not None:
        item["chunk"] = chunk
    return {
        "op": "add",
        "fact": {
            "id": fact_id,
            "category": category,
            "priority": "P1",
            "confidence": "reported",
            "text": text,
            "support": [item],
            "author": "writer",
        },
    }


def _scope_url(base, journal, page=""):
    s = journal.session
    prefix = "/ledger" if page in ("facts", "folds", "context") else "/t"
    rest = {"facts": "", "folds": "folds/", "context": "context/", "timeline": ""}[
        page or "timeline"
    ]
    return f"{base}{prefix}/{s.tenant.slug}/{s.key}/{journal.lane}/{journal.branch}/{rest}"


@pytest.mark.parametrize("debug", [True, False], ids=["debug-on", "debug-off"])
def test_operator_journeys_on_the_largest_corpus_session(
    live_server, browser, largest, settings, debug
):
    settings.DEBUG = debug
    tag = "debug" if debug else "prod"
    base = live_server.url
    journal = largest["journal"]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    _login(page, base, "ada")

    # sessions list: sort, totals, search over fact text
    page.goto(base + "/?sort=entries")
    expect(page.locator("#session-table tfoot")).to_contain_text("Totals over 1 session")
    expect(page.locator("#session-table tfoot")).to_contain_text("active blocker")
    _axe(page, "sessions")
    page.fill("#session-q", "zzz-in-no-fact")
    page.wait_for_url(re.compile(r"q=zzz"))
    expect(page.locator("#session-table .empty")).to_be_visible()
    page.fill("#session-q", "sheet refactor")  # in a fact's text only, not in key or title
    page.wait_for_url(re.compile(r"q=sheet"))
    expect(page.locator("#session-table tbody tr")).to_have_count(1)
    _shot(page, f"sessions-{tag}")

    # overview: failures with their reason, log-scale chart, audit link for the admin
    page.goto(f"{base}/t/acme/codex/")
    expect(page.locator("#failed-attempts")).to_contain_text("connection refused")
    expect(page.locator("table.journals-table")).to_contain_text("1 failed attempt")
    expect(page.locator("main a:text('Audit log')")).to_have_count(1)
    expect(page.locator("nav a:text('Audit log')")).to_have_count(1)  # the nav entry, admins
    assert "logarithmic" in page.locator("#chart-title").text_content() or "log" in (
        page.locator("#chart-title").text_content()
    )
    _axe(page, "overview")
    _shot(page, f"overview-{tag}")

    # timeline: source times, gaps, provider figures next to ours, round durations, jump
    page.goto(_scope_url(base, journal))
    expect(page.locator("time.entry-time").first).to_be_visible()
    expect(page.locator(".provider-tokens").first).to_contain_text("provider: in")
    expect(page.locator(".round-meta").first).to_be_visible()
    assert page.locator(".provider-tokens:has-text('$')").count() > 0  # cost from the table
    _axe(page, "timeline")
    _shot(page, f"timeline-time-{tag}")
    page.fill("#jump-seq", "250")
    page.press("#jump-seq", "Enter")
    page.wait_for_url(re.compile(r"page=3#seq-250$"))
    expect(page.locator("#seq-250")).to_be_in_viewport()
    # j/k between rounds, / to search, ? for help
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(page.locator("section.round.kbd-current")).to_have_count(1)
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "entry-q"
    page.keyboard.press("Escape")
    page.locator("h1").click()
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_be_visible()
    _axe(page, "shortcuts dialog")
    page.keyboard.press("Escape")
    # htmx pagination keeps the page and pushes the URL
    page.click("nav.pagination >> nth=0 >> a[rel=next]")
    page.wait_for_url(re.compile(r"page=4"))
    expect(page.locator("#entry-list .summary")).to_contain_text("Entries 301–")

    # facts: the table fits at 1280 px, every column in reach
    facts = _scope_url(base, journal, "facts")
    page.goto(facts)
    fits = page.evaluate(
        "() => { const w = document.querySelector('#fact-table .table-wrap');"
        " const t = w.querySelector('table'); return [t.scrollWidth, w.clientWidth,"
        " document.documentElement.scrollWidth, innerWidth,"
        " document.querySelector('#fact-table thead th:last-child').getBoundingClientRect().right] }"
    )
    assert fits[0] <= fits[1] + 1, f"fact table {fits[0]}px in a {fits[1]}px box"
    assert fits[2] <= fits[3] and fits[4] <= fits[3], fits
    _axe(page, "facts")

    # state in the URL: two filters, Back, the controls and the table agree
    page.select_option("#filter-category", "decision")
    page.wait_for_url(re.compile(r"category=decision"))
    expect(page.locator("#fact-table .summary")).to_contain_text("category = decision")
    page.select_option("#filter-priority", "P1")
    page.wait_for_url(re.compile(r"priority=P1"))
    expect(page.locator("#fact-table .summary")).to_contain_text("priority = P1")
    expect(page.locator("#permalink")).to_have_attribute(
        "href", re.compile(r"category=decision.*priority=P1|priority=P1.*category=decision")
    )
    page.go_back()
    page.wait_for_url(lambda url: "priority=P1" not in url and "category=decision" in url)
    expect(page.locator("#fact-table .summary")).not_to_contain_text("priority = P1")
    assert page.locator("#filter-category").input_value() == "decision"
    assert page.locator("#filter-priority").input_value() == ""
    expect(page.locator("#permalink")).not_to_have_attribute("href", re.compile("priority"))
    page.go_forward()
    page.wait_for_url(re.compile(r"priority=P1"))
    assert page.locator("#filter-priority").input_value() == "P1"
    assert page.locator("#filter-category").input_value() == "decision"
    _shot(page, f"facts-filtered-back-forward-{tag}")

    # evidence: the quoted support opens in the side panel, highlighted and in view
    row = page.locator("#fact-table tr:has(code:text-is('goal-1'))")
    row.locator("ul.support a.hash").first.click()
    panel = page.locator("#side-panel")
    expect(panel.locator("mark.cited")).to_have_text(largest["quote"])
    expect(panel.locator("mark.cited")).to_be_in_viewport()
    expect(panel.locator(".verify-ok")).to_contain_text("hash verified")
    assert "panel=" in page.url and "category=decision" in page.url
    _axe(page, "facts + entry panel")
    _shot(page, f"evidence-panel-quote-{tag}")
    # the panel is in the URL: a reload reopens it, Back closes it
    page.reload()
    expect(page.locator("#side-panel mark.cited")).to_have_text(largest["quote"])
    page.go_back()
    expect(page.locator("#side-panel mark.cited")).to_have_count(0)
    # a support item naming nothing finer: the whole entry marked as cited
    page.goto(facts + "?q=id:whole-1")
    page.locator("#fact-table ul.support a.hash").first.click()
    expect(panel.locator("mark.cited-whole").first).to_be_visible()
    expect(panel).to_contain_text("the whole entry is cited")
    # a chunk: the full page, scrolled to the marked chunk
    page.goto(facts + "?q=id:chunk-1")
    href = page.locator("#fact-table ul.support a.hash").first.get_attribute("href")
    page.goto(base + href)
    expect(page.locator("mark#chunk-1")).to_be_in_viewport()
    _axe(page, "entry page at chunk 1")
    _shot(page, f"evidence-chunk-page-{tag}")
    # a fact and a fold in the panel too
    page.goto(facts)
    page.locator("#fact-table a.fact-id").first.click()
    expect(panel.locator("h2")).to_contain_text("Fact")
    panel.locator("a:text('Close')").click()
    expect(panel.locator("h2")).to_have_count(0)
    assert "panel=" not in page.url

    # failures first-class: the folds page filter and the attempts with their reason
    page.goto(_scope_url(base, journal, "folds"))
    page.select_option("#fold-show", "rejections")
    page.wait_for_url(re.compile(r"show=rejections"))
    # the scripted fold's rejected claim, and any fold whose offline claims the rules rejected
    rejecting = journal.folds.filter(ops_rejected__gt=0).count()
    assert rejecting >= 1
    expect(page.locator("table.folds tbody tr")).to_have_count(min(rejecting, 100))
    expect(page.locator("table.folds")).to_contain_text("proposal")
    page.select_option("#fold-show", "failures")
    page.wait_for_url(re.compile(r"show=failures"))
    expect(page.locator("#failed-attempts")).to_contain_text("connection refused")
    _axe(page, "folds (failures)")
    _shot(page, f"folds-failures-{tag}")
    page.go_back()
    assert page.locator("#fold-show").input_value() == "rejections"

    # the diff: born-in fold, htmx filter "only added"
    n = largest["fold"].number
    page.goto(f"{_scope_url(base, journal, 'folds')}0/diff/{n}/")
    expect(page.locator("table.diff")).to_contain_text("born in fold")
    page.select_option("#diff-status", "added")
    page.wait_for_url(re.compile(r"status=added"))
    expect(page.locator("table.diff tbody tr.diff-changed")).to_have_count(0)
    _axe(page, "diff")
    _shot(page, f"diff-{tag}")

    # errors keep the page: a context build past the head (400 fragment in place)
    page.goto(_scope_url(base, journal, "context"))
    page.fill("input[name=revision]", str(journal.head_seq + 1000))
    page.click("#context-form button[type=submit]")
    expect(page.locator("#context-views")).to_contain_text("Not built")
    expect(page.locator("h1")).to_contain_text("Context views")
    _shot(page, f"error-context-400-{tag}")
    # a 404 reply to htmx: a toast, the page stays
    page.goto(facts)
    page.evaluate(
        "htmx.ajax('GET', location.pathname + 'facts/no-such-fact/', "
        "{target: '#side-panel', swap: 'outerHTML'})"
    )
    expect(page.locator("#toasts .toast")).to_contain_text("Not found (404)")
    expect(page.locator("#fact-table")).to_be_visible()
    _axe(page, "facts + toast")
    _shot(page, f"error-toast-404-{tag}")
    # the server unreachable: a toast, and the select goes back to what the table shows
    page.goto(facts)
    unreachable = lambda url: "category=blocker" in url  # noqa: E731
    page.route(unreachable, lambda route: route.abort())
    page.select_option("#filter-category", "blocker")
    expect(page.locator("#toasts .toast").last).to_contain_text("could not be reached")
    expect(page.locator("#filter-category")).to_have_value("")
    page.select_option("#filter-category", "blocker")  # the same error: one toast, not two
    expect(page.locator("#filter-category")).to_have_value("")
    expect(page.locator("#toasts .toast")).to_have_count(1)
    page.unroute(unreachable)
    page.select_option("#filter-category", "blocker")  # the server answers: errors cleared
    page.wait_for_url(re.compile(r"category=blocker"))
    expect(page.locator("#toasts .toast")).to_have_count(0)

    # a reviewer deciding a request already decided in another tab (409), in place
    first, second = RetirementRequest.objects.filter(status="pending").order_by("pk")[:2]
    page.click("form.logout button")
    _login(page, base, "rita")
    page.goto(f"{base}/ledger/reviews/{first.pk}/")
    retirement_review(
        request=first, actor=largest["users"]["ADMIN"], decision="refuse", comment="other tab"
    )
    page.fill("#review-comment", "Approving from a stale tab.")
    page.click("button[value=approve]")
    expect(page.locator("#review-decision")).to_contain_text("already")
    expect(page.locator("h1")).to_be_visible()
    _shot(page, f"error-review-409-{tag}")

    # an operator is not offered Approve/Refuse: a note names who decides (the server still
    # refuses a decision from them: tests/ledger_app/test_views.py); no audit link
    page.click("form.logout button")
    _login(page, base, "oscar")
    page.goto(f"{base}/ledger/reviews/{second.pk}/")
    expect(page.locator("button[value=approve]")).to_have_count(0)
    expect(page.locator("#review-who")).to_contain_text("only reviewers and admins decide")
    expect(page.locator("h1")).to_be_visible()
    _axe(page, "review not offered")
    _shot(page, f"error-review-403-{tag}")
    page.goto(f"{base}/t/acme/codex/")
    expect(page.locator("a:text('Audit log')")).to_have_count(0)
    assert RetirementRequest.objects.get(pk=second.pk).status == "pending"
    assert page_errors == [], page_errors
    context.close()

    # a phone: no page scrolls sideways, the facts are stacked cards
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = phone.new_page()
    _login(page, base, "ada")
    for name, url in [
        ("facts", facts),
        ("timeline", _scope_url(base, journal)),
        ("folds", _scope_url(base, journal, "folds")),
        ("diff", f"{_scope_url(base, journal, 'folds')}0/diff/{n}/"),
    ]:
        page.goto(url)
        overflow = page.evaluate("document.documentElement.scrollWidth - innerWidth")
        assert overflow <= 1, f"{name} is {overflow}px wider than the phone"
        if name == "facts":
            assert (
                page.evaluate(
                    "getComputedStyle(document.querySelector('#fact-table tbody tr')).display"
                )
                == "block"
            )
            page.locator("#fact-table tbody tr").first.scroll_into_view_if_needed()
            _shot(page, f"phone-facts-{tag}")
        _axe(page, f"phone {name}")
    phone.close()

    # dark mode follows the system setting
    dark = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    page = dark.new_page()
    _login(page, base, "ada")
    page.goto(facts)
    bg = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert bg == "rgb(21, 25, 29)", bg
    _axe(page, "facts, dark")
    _shot(page, f"dark-facts-{tag}")
    dark.close()


def _generated_items(n: int):
    items = [message("user", "Run every check and fix what fails.")]
    i = 0
    while len(items) < n:
        failed = i % 97 == 0
        items += [
            message("assistant", f"Step {i}: running check {i}."),
            tool_call(f"c{i}", "exec", {"command": f"pytest -k t{i}"}),
            tool_result(
                f"c{i}",
                f"check {i}: {'FAILED' if failed else 'ok'} " + "x" * 120,
                exit_code=1 if failed else 0,
            ),
        ]
        i += 1
    return items[:n]


def test_a_20k_entry_session_with_debug_on_and_off(live_server, browser, settings):
    """One generated 20,000-entry session (built once for both settings): the pages answer,
    fit, keep the URL state, and pass axe with DEBUG on and off."""
    acme = TenantFactory(slug="acme")
    _users(acme)
    journal = journal_build(tenant=acme, key="gen20k", items=_generated_items(GENERATED_ENTRIES))
    if not journal.folds.exists():
        ledger_fold(journal=journal)
    assert journal.head_seq == GENERATED_ENTRIES
    base = live_server.url
    scope = _scope_url(base, journal)
    for debug in (True, False):
        settings.DEBUG = debug
        tag = "debug" if debug else "prod"
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        _login(page, base, "ada")
        page.goto(base + "/?sort=tokens")
        expect(page.locator("#session-table tfoot")).to_contain_text("20,000")
        page.goto(f"{base}/t/acme/gen20k/")
        expect(page.locator("figure.chart svg")).to_be_visible()
        _axe(page, "20k overview")
        _shot(page, f"20k-overview-{tag}")
        page.goto(scope + "?seq=19999")
        page.wait_for_url(re.compile(r"page=200#seq-19999$"))
        expect(page.locator("#seq-19999")).to_be_in_viewport()
        _axe(page, "20k timeline, last page")
        page.goto(scope + "?q=kind:tool_result+text:FAILED")
        expect(page.locator("#entry-list .summary")).to_contain_text("match")
        facts = _scope_url(base, journal, "facts")
        page.goto(facts)
        page.select_option("#filter-category", "blocker")
        page.wait_for_url(re.compile(r"category=blocker"))
        page.select_option("#filter-priority", "P1")
        page.wait_for_url(re.compile(r"priority=P1"))
        page.go_back()
        page.wait_for_url(lambda url: "priority=P1" not in url)
        assert page.locator("#filter-category").input_value() == "blocker"
        assert page.locator("#filter-priority").input_value() == ""
        query = parse_qs(urlsplit(page.locator("#permalink").get_attribute("href")).query)
        assert query.get("category") == ["blocker"] and "priority" not in query
        _axe(page, "20k facts")
        _shot(page, f"20k-facts-{tag}")
        page.goto(_scope_url(base, journal, "folds"))
        expect(page.locator("table.folds tbody tr").first).to_be_visible()
        _axe(page, "20k folds")
        context.close()
