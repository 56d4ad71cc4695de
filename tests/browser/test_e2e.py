"""End to end in headless Chromium.

A reviewer logs in, opens a session imported from the corpus, filters the facts, follows a
support hash to the raw entry (quote highlighted, hash verified), opens a fold whose
scripted writer had an op rejected, and approves a P0 retirement; an operator is refused
the same action. Also: the phone width, keyboard focus order and the pages without
JavaScript. Each page is saved as a PNG under ``test-output/screenshots/``.

Needs Debian's ``chromium`` at ``/usr/bin/chromium`` and Playwright for Python (never
``playwright install``: the browser is the system's). Skipped, saying so, without them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from journal_app.formats.base import message
from journal_app.models import Entry, Membership
from journal_app.services import journal_append, journal_import
from ledger_app.models import RetirementRequest
from ledger_app.services import ledger_fold
from tests.browser.chromium import ARGS, CHROMIUM  # noqa: F401 (re-exported)
from tests.factories import PASSWORD, MembershipFactory, TenantFactory, UserFactory
from tests.support.writers import ScriptedWriter

SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
CORPUS_FILE = "openai-chat-tool-calls/taubench-gpt4o-airline-task3.json"
ARTIFACT_FILE = "mini-swe-agent-traj/minisweagent-gemini3-requests-1142-oversized-output.traj.json"
QUOTE = "change my flight back from Denver to Houston"

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="Playwright for Python is not installed (pip install playwright)"
)
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
    # Playwright's sync API runs an event loop in this thread; the ORM calls made by the
    # test itself (not by the server) are plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def session_data(corpus):
    """The tau-bench airline transcript in tenant acme, folded twice.

    Fold 1 is mechanical (pins, tool outcomes). Fold 2 (scripted writer) covers a later
    user message and proposes: a decision quoting the user's goal (accepted), an
    assistant claim marked verified (rejected: no tool result shows it), and the
    retirement of both P0 pins with the later user message as evidence (two pending
    reviews).
    """
    acme = TenantFactory(slug="acme")
    users = {
        "rita": MembershipFactory(
            tenant=acme, user=UserFactory(username="rita"), role=Membership.Role.REVIEWER
        ).user,
        "oscar": MembershipFactory(
            tenant=acme, user=UserFactory(username="oscar"), role=Membership.Role.OPERATOR
        ).user,
    }
    journal = journal_import(path=corpus / CORPUS_FILE, tenant="acme", session="airline").journal
    assert ledger_fold(journal=journal).fold is not None
    journal_append(
        journal=journal,
        items=[message("user", "Update: the policy section on basic economy no longer applies.")],
    )
    later = Entry.objects.get(journal=journal, seq=journal.head_seq)
    goal = Entry.objects.filter(journal=journal, kind="message", role="user").order_by("seq")[0]
    assistant = Entry.objects.filter(journal=journal, kind="message", role="assistant")[0]
    pins = [
        f
        for f in journal.folds.get(number=1).state_dict["facts"].values()
        if f.get("pin") and f.get("lifecycle") == "active"
    ]
    ops = [
        {
            "op": "add",
            "fact": {
                "id": "goal-1",
                "category": "decision",
                "priority": "P1",
                "confidence": "reported",
                "text": "The user wants the quickest flight back from Denver to Houston on May 27.",
                "support": [{"entry": goal.entry_hash, "quote": QUOTE}],
                "author": "writer",
            },
        },
        {
            "op": "add",
            "fact": {
                "id": "claim-1",
                "category": "verified_state",
                "priority": "P1",
                "confidence": "verified",
                "text": "The reservation was changed.",
                "support": [{"entry": assistant.entry_hash}],
                "author": "writer",
            },
        },
        *[{"op": "retire", "id": p["id"], "evidence": [later.entry_hash]} for p in pins[:2]],
    ]
    fold = ledger_fold(journal=journal, writer=ScriptedWriter(ops, "scripted-e2e")).fold
    assert fold is not None and fold.ops_rejected == 1
    assert RetirementRequest.objects.filter(status="pending").count() == 2
    return {"journal": journal, "users": users, "goal": goal}


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _login(page, base: str, username: str) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form.login button[type=submit]")
    page.wait_for_url(base + "/")


def test_a_reviewer_follows_evidence_and_decides_an_operator_is_refused(
    live_server, browser, session_data
):
    base = live_server.url
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    expect = playwright_sync.expect

    page.goto(base + "/accounts/login/")
    _shot(page, "01-login")
    _login(page, base, "rita")
    expect(page.locator("#session-table")).to_contain_text("airline")
    _shot(page, "02-sessions")

    page.click("#session-table a[href='/t/acme/airline/']")
    expect(page.locator("h1")).to_contain_text("Session airline")
    expect(page.locator("figure.chart svg")).to_be_visible()
    _shot(page, "03-session-overview")

    page.click("table.journals-table a:text('timeline')")
    expect(page.locator("section.round").first).to_be_visible()
    _shot(page, "04-timeline")

    # Filter the facts through the expression box (an htmx swap of #fact-table).
    page.click("nav.tabs >> text=Ledger facts")
    expect(page.locator("#fact-table")).to_contain_text("facts after fold 2")
    page.fill("#fact-q", "category:decision text:quickest")
    page.press("#fact-q", "Enter")
    expect(page.locator("#fact-table .summary")).to_contain_text("matching")
    expect(page.locator("#fact-table tbody tr")).to_have_count(1)
    expect(page.locator("#fact-table")).to_contain_text("quickest flight back")
    assert "q=category%3Adecision" in page.url  # hx-push-url: the filtered view is a permalink
    _shot(page, "05-facts-filtered")
    # a select filter swaps the table too
    page.fill("#fact-q", "")
    page.select_option("#filter-priority", "P0")
    expect(page.locator("#fact-table .summary")).to_contain_text("priority = P0")
    page.select_option("#filter-priority", "")
    page.fill("#fact-q", "category:decision text:quickest")
    page.press("#fact-q", "Enter")
    expect(page.locator("#fact-table tbody tr")).to_have_count(1)

    # Follow the support hash: the side panel, then its full page: the raw entry, the quote
    # highlighted, the hash recomputed.
    page.click("#fact-table ul.support a.hash")
    expect(page.locator("#side-panel mark#quote-p")).to_have_text(QUOTE)
    page.click("#side-panel a:text('Full page')")
    expect(page.locator("h1")).to_contain_text(f"Entry {session_data['goal'].seq}")
    expect(page.locator("mark#quote")).to_have_text(QUOTE)
    expect(page.locator(".verify-ok")).to_contain_text("hash verified")
    expect(page.locator(".verify-bad")).to_have_count(0)
    _shot(page, "06-entry-highlighted")

    # A verifier rejection: fold 2's delta, the rejected op with its reason.
    page.click("nav.tabs >> text=Folds")
    _shot(page, "07-folds")
    page.click("table.folds a[href$='/folds/2/']")  # the side panel first
    expect(page.locator("#side-panel")).to_contain_text("Rejected on the way")
    page.click("#side-panel a:text('Full page')")
    expect(page.locator("#rejected-h")).to_contain_text("Rejected: 1 op")
    expect(page.locator("tr.verdict-rejected")).to_contain_text("needs a tool result")
    _shot(page, "08-fold-rejection")
    page.click("a:text('what this fold changed')")
    expect(page.locator("table.diff")).to_contain_text("quickest flight back")
    _shot(page, "09-fold-diff")

    # Approve a retirement as a reviewer.
    page.click("nav[aria-label=Main] >> text=Review queue")
    expect(page.locator("table.reviews tbody tr")).to_have_count(2)
    _shot(page, "10-review-queue")
    first, second = (
        RetirementRequest.objects.filter(status="pending")
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    page.goto(f"{base}/ledger/reviews/{first}/")
    page.fill("#review-comment", "The user lifted this section in the later message.")
    page.click("button[value=approve]")
    expect(page.locator("#review-decision")).to_contain_text("approved")
    expect(page.locator("#review-decision")).to_contain_text("rita")
    _shot(page, "11-review-approved")
    assert RetirementRequest.objects.get(pk=first).status == "approved"

    # An operator is offered no decision (a note names who can) and the server refuses one
    # sent anyway.
    page.click("form.logout button")
    _login(page, base, "oscar")
    page.goto(f"{base}/ledger/reviews/{second}/")
    expect(page.locator("#review-decision")).to_contain_text("Your role in acme is operator")
    expect(page.locator("#review-who")).to_contain_text("rita")
    expect(page.locator("#review-comment")).to_have_count(0)
    expect(page.locator("button[value=approve]")).to_have_count(0)
    _shot(page, "12-review-operator")
    token = next(c["value"] for c in context.cookies() if c["name"] == "csrftoken")
    refused = page.request.post(
        f"{base}/ledger/reviews/{second}/",
        form={"comment": "I think it is fine.", "decision": "approve"},
        headers={"X-CSRFToken": token},
    )
    assert refused.status == 403
    assert "oscar is not a reviewer of tenant acme" in refused.text()
    # without JavaScript the page offers no form either
    nojs = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    page = nojs.new_page()
    _login(page, base, "oscar")
    page.goto(f"{base}/ledger/reviews/{second}/")
    expect(page.locator("#review-who")).to_contain_text("only reviewers and admins decide")
    expect(page.locator("#review-comment")).to_have_count(0)
    _shot(page, "14-operator-no-form")
    assert RetirementRequest.objects.get(pk=second).status == "pending"
    nojs.close()
    context.close()


def test_an_artifact_receipt_expands_and_the_artifact_verifies(
    live_server, browser, session_data, corpus
):
    journal_import(path=corpus / ARTIFACT_FILE, tenant="acme", session="oversized")
    base = live_server.url
    expect = playwright_sync.expect
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    _login(page, base, "rita")
    page.goto(base + "/t/acme/oversized/main/main/?q=kind:tool_result+tokens:>2000")
    receipt = page.locator("details.receipt").first
    expect(receipt).to_be_visible()
    receipt.locator("summary").click()
    expect(receipt.locator("dl")).to_contain_text("artifact://acme/")
    _shot(page, "15-timeline-artifact-receipt")
    receipt.locator("a[href^='/a/acme/']").click()
    expect(page.locator(".verify-ok")).to_contain_text(
        "content hash recomputed from the stored bytes"
    )
    _shot(page, "16-artifact")
    context.close()


def test_phone_width_keyboard_and_no_javascript(live_server, browser, session_data):
    base = live_server.url
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = phone.new_page()
    _login(page, base, "rita")
    for name, path in [
        ("phone-sessions", "/"),
        ("phone-overview", "/t/acme/airline/"),
        ("phone-timeline", "/t/acme/airline/main/main/"),
        ("phone-facts", "/ledger/acme/airline/main/main/"),
        ("phone-fold", "/ledger/acme/airline/main/main/folds/2/"),
    ]:
        page.goto(base + path)
        # wide tables scroll inside their wrapper; the page itself never scrolls sideways
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{path} is {overflow}px wider than the phone"
        _shot(page, name)
    phone.close()

    desktop = browser.new_context(viewport={"width": 1280, "height": 900})
    page = desktop.new_page()
    _login(page, base, "rita")
    page.goto(base + "/ledger/acme/airline/main/main/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("location.hash") == "#main"
    desktop.close()

    nojs = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    page = nojs.new_page()
    _login(page, base, "rita")
    page.goto(base + "/ledger/acme/airline/main/main/")
    page.fill("#fact-q", "pin:true")
    page.click("#fact-filters button[type=submit]")
    assert "q=pin%3Atrue" in page.url
    playwright_sync.expect(page.locator("#fact-table .summary")).to_contain_text("pin:true")
    page.click("#fact-table ul.support a.hash >> nth=0")
    playwright_sync.expect(page.locator(".verify-ok")).to_contain_text("hash verified")
    _shot(page, "nojs-entry")
    nojs.close()
