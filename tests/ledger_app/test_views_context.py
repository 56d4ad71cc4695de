"""The three context views side by side, and a fold's invariants panel (docs/design.md 6 and 8)."""

from __future__ import annotations

import html

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from ledger_app.models import Fold
from ledger_app.selectors.presenters import report_rows
from ledger_app.services.context import context_preview, fold_invariants
from tests.factories import MembershipFactory, TenantFactory, UserFactory, fold_build, journal_build

pytestmark = pytest.mark.django_db

SCOPE = ["acme", "refunds", "main", "main"]
PIN = "Never modify the payments tables without asking the user first."


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def journal():
    return journal_build(tenant=TenantFactory(slug="acme"), key="refunds")


@pytest.fixture
def member(journal):
    return MembershipFactory(tenant=journal.session.tenant, user=UserFactory(username="alice")).user


@pytest.fixture
def outsider():
    return MembershipFactory(
        tenant=TenantFactory(slug="globex"), user=UserFactory(username="mallory")
    ).user


def _view(client, view: str, **params: str) -> tuple[str, str]:
    """The whole page with ``view`` open, and the open view's section (from its heading)."""
    response = client.get(reverse("ledger:context", args=SCOPE), {**params, "view": view})
    assert response.status_code == 200
    body = response.content.decode()
    start = body.index(f'id="{view}-h"')
    return body, body[start : body.index("</section>", start)]


def test_it_shows_the_three_views_with_the_pin_in_the_model_view(client, member, journal):
    fold_build(journal)
    client.force_login(member)
    body, model = _view(client, "model")

    for heading in ("Model view", "Validation"):
        assert f">{heading}</h2>" in body
    for tab in ("Model view", "Frontend view", "Debug trace"):  # the others, collapsed
        assert f">{tab}</a>" in body
    assert 'id="frontend-h"' not in body and 'id="debug-h"' not in body
    assert PIN in model
    _, frontend = _view(client, "frontend")
    assert PIN not in frontend  # system instructions are not user-facing history
    assert "Correction: only change billing/refunds.py." in frontend
    _, debug = _view(client, "debug")
    assert "the request is" in debug and "nothing to compact" in debug
    assert "<code>pin_verbatim</code>: ok" in body and "<code>orphan_tool_call</code>: ok" in body
    # the default budgets are the settings' (LEDGER_FOLD_THRESHOLD_TOKENS, LEDGER_WINDOW_TOKENS)
    assert "working budget 32,000, hard limit 270,000" in body
    assert 'name="hard_limit" inputmode="numeric" value="270000"' in body
    assert Fold.objects.filter(journal=journal).count() == 1  # a preview writes nothing


def test_the_format_and_tail_come_from_the_query_string(client, member, journal):
    fold_build(journal)
    client.force_login(member)
    body, model = _view(client, "model", tail_tokens="50", format="anthropic")

    assert "anthropic-messages" in model and PIN in model
    _, debug = _view(client, "debug", tail_tokens="50", format="anthropic")
    assert "working 32,000, hard 270,000, tail 50" in debug


def test_the_default_budgets_follow_the_settings_like_the_invariants_panel(
    client, member, journal, settings
):
    settings.LEDGER_WINDOW_TOKENS = 90_000
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 12_000
    fold = fold_build(journal)
    client.force_login(member)

    body = client.get(reverse("ledger:context", args=SCOPE)).content.decode()
    panel = fold_invariants(fold=fold)
    preview = context_preview(journal=journal, revision=fold.revision, fold=fold)

    assert "working budget 12,000, hard limit 90,000" in body
    assert preview.debug_trace["budgets"]["hard_limit"] == 90_000  # the panel's defaults
    assert preview.debug_trace["budgets"]["working_budget"] == 12_000
    assert panel["status"] == "ok"


def test_budgets_too_small_show_the_explicit_failure_and_the_broken_invariant(
    client, member, journal
):
    client.force_login(member)
    response = client.get(
        reverse("ledger:context", args=SCOPE), {"working_budget": "100", "hard_limit": "150"}
    )

    body = response.content.decode()
    assert response.status_code == 200
    assert "Why no request was built" in body and "the request cannot be made valid" in body
    assert '<code>within_working_budget</code>: <span class="reason">the request is' in body
    assert "over the working budget of 100" in body
    start = body.index('id="model-h"')
    assert "no request (explicit failure)" in body[start:]
    assert not Fold.objects.filter(journal=journal).exists()  # nothing folded by a preview


def test_a_bad_budget_answers_400_with_the_field_named(client, member, journal):
    client.force_login(member)
    url = reverse("ledger:context", args=SCOPE)

    bad = client.get(url, {"working_budget": "lots"})
    assert bad.status_code == 400
    assert (
        "working_budget: &#x27;lots&#x27; is not a whole number of tokens" in bad.content.decode()
    )
    fmt = client.get(url, {"format": "gemini"})
    assert fmt.status_code == 400 and "format" in fmt.content.decode()
    beyond = client.get(url, {"revision": str(journal.head_seq + 5)})
    assert beyond.status_code == 400 and "is not between 0 and the head" in beyond.content.decode()


def test_an_htmx_request_gets_only_the_views(client, member, journal):
    client.force_login(member)
    response = client.get(reverse("ledger:context", args=SCOPE), HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="context-views">')
    assert "<html" not in body and PIN in body


def test_a_problem_links_the_entry_it_names():
    digest = "ab" * 32
    report = {
        "ok": False,
        "tokens": 10,
        "token_source": "tiktoken:o200k_base",
        "checks": ["pin_verbatim"],
    }
    problem = {
        "check": "pin_verbatim",
        "message": "pin p0-1 differs",
        "index": 0,
        "ref": "p0-1",
        "entry": "sha256:" + digest,
    }
    out = render_to_string(
        "ledger_app/_report.html",
        {
            "r": {
                "name": "model",
                "report": {**report, "problems": [problem]},
                "rows": report_rows({**report, "problems": [problem]}),
            }
        },
    )
    assert "pin p0-1 differs" in out and "(p0-1)" in out
    assert reverse("journal:entry", args=["sha256:" + digest]) in out
    assert "1 problem<" in out


def test_the_invariants_panel_of_a_fold(client, member, journal):
    fold = fold_build(journal)
    client.force_login(member)
    url = reverse("ledger:fold_invariants", args=[*SCOPE, fold.number])

    page = client.get(url)
    assert page.status_code == 200
    body = page.content.decode()
    assert f"revision {fold.revision}" in body and "<code>pin_verbatim</code>: ok" in body
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<section id="invariants"') and "<html" not in fragment
    fold_page = client.get(reverse("ledger:fold", args=[*SCOPE, fold.number])).content.decode()
    assert html.escape(url) in fold_page or url in fold_page


def test_the_scope_nav_links_the_context_and_recovery_pages(client, member, journal):
    client.force_login(member)
    body = client.get(reverse("journal:timeline", args=SCOPE)).content.decode()
    assert reverse("ledger:context", args=SCOPE) in body
    assert reverse("recovery:receipts", args=SCOPE) in body


def test_another_tenants_user_gets_404_and_anonymous_is_sent_to_login(client, outsider, journal):
    fold = fold_build(journal)
    urls = [
        reverse("ledger:context", args=SCOPE),
        reverse("ledger:fold_invariants", args=[*SCOPE, fold.number]),
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    client.force_login(outsider)
    for url in [*urls, reverse("ledger:context", args=["globex", *SCOPE[1:]])]:
        assert client.get(url).status_code == 404, url


def test_a_failure_names_its_cause_the_fold_and_a_budget_that_would_work(client, member, journal):
    fold_build(journal)
    client.force_login(member)
    url = reverse("ledger:context", args=SCOPE)
    body = client.get(url, {"working_budget": "100", "hard_limit": "150"}).content.decode()
    failure = body[
        body.index('id="context-failure"') : body.index(
            "</section>", body.index('id="context-failure"')
        )
    ]
    assert "<strong>Cause:</strong> the mandatory part" in failure
    assert "is over the working budget of 100 tokens" in failure
    fold_url = reverse("ledger:fold", args=[*SCOPE, 1])
    assert f'href="{fold_url}">Fold 1</a>' in failure
    budget = int(failure.split("working_budget=")[1].split("&")[0].split('"')[0])
    assert budget > 100 and budget % 1000 == 0
    retry = client.get(url, {"working_budget": str(budget)}).content.decode()
    assert "Status <strong>ok</strong>" in retry  # the suggested budget does build
    # the preview's "no checkpoint" is a note, not a second error
    assert 'id="context-checkpoint"' in body and "writes nothing" in body
    assert "no checkpoint: the ledger has moved past" not in body


def test_the_continuation_record_comes_before_the_validation_and_all_ok_is_folded(
    client, member, journal
):
    fold_build(journal)
    client.force_login(member)
    body, _ = _view(client, "model")
    assert body.index('id="continuation-record"') < body.index('id="validation-h"')
    assert "Every check passed" in body


def test_odd_budgets_and_revisions_are_refused_with_the_apis_bounds(client, member, journal):
    """The page and the API accept the same budgets (at most 100,000,000 tokens); a revision
    is a seq, not tokens."""
    client.force_login(member)
    url = reverse("ledger:context", args=SCOPE)
    huge = client.get(url, {"working_budget": "99999999999999999999"})
    assert huge.status_code == 400
    assert "is over 100,000,000 tokens" in huge.content.decode()
    revision = client.get(url, {"revision": "abc"}).content.decode()
    assert "is not a whole number of entries (a seq)" in revision
    reserve = client.get(url, {"output_reserve": "50", "view": "debug"})
    assert reserve.status_code == 200
    assert 'name="output_reserve" inputmode="numeric" value="50"' in reserve.content.decode()


def test_a_hard_limit_too_small_gets_a_hard_limit_that_would_hold_it(client, member, journal):
    fold_build(journal)
    client.force_login(member)
    url = reverse("ledger:context", args=SCOPE)
    body = client.get(url, {"working_budget": "32000", "hard_limit": "150"}).content.decode()
    failure = body[body.index('id="context-failure"') :]
    hard = int(failure.split("hard_limit=")[1].split("&")[0].split('"')[0])
    assert hard > 150 and hard % 1000 == 0
    assert "the one given is 150" in failure
    retry = client.get(url, {"working_budget": "32000", "hard_limit": str(hard)})
    assert "Status <strong>ok</strong>" in retry.content.decode()


def test_each_suggested_budget_link_sets_both_budgets_and_builds(client, member, journal):
    """Working budget and hard limit both too small: the working-budget link sets the
    suggested hard limit too (and the other way round), so following either builds."""
    fold_build(journal)
    client.force_login(member)
    url = reverse("ledger:context", args=SCOPE)
    body = client.get(url, {"working_budget": "100", "hard_limit": "150"}).content.decode()
    start = body.index('id="context-failure"')
    failure = body[start : body.index("</section>", start)]
    links = [
        html.unescape(part.split('"')[0])
        for part in failure.split('href="?')[1:]
        if "budget" in part.split('"')[0] or "hard_limit" in part.split('"')[0]
    ]
    assert len(links) == 2, links
    for link in links:
        assert "working_budget=100&" not in link + "&" and "hard_limit=150&" not in link + "&"
        built = client.get(url + "?" + link).content.decode()
        assert "Status <strong>ok</strong>" in built, link


def test_the_api_failure_names_a_hard_limit_when_the_one_sent_is_too_small(journal):
    from ledger_app.services.context import context_build

    fold_build(journal)
    result = context_build(journal=journal, working_budget=100, hard_limit=150)
    step = result.failure["next_step"]
    assert step["working_budget"] > 100 and step["hard_limit"] >= step["working_budget"] - 1000
    again = context_build(
        journal=journal, working_budget=step["working_budget"], hard_limit=step["hard_limit"]
    )
    assert again.status == "ok", again.failure


@pytest.mark.parametrize("debug", [True, False])
def test_a_failed_context_request_is_found_on_the_sessions_overview(
    client, member, journal, settings, debug
):
    """A context request that fails (the API or the proxy: one that may write) is recorded;
    the overview lists it with its surface, budgets, cause and a link that opens the context
    page at that revision and those budgets, where it is explained. A preview records none."""
    from audit_app.models import AuditEvent
    from ledger_app.services.context import context_build

    settings.DEBUG = debug
    fold_build(journal)
    context_preview(journal=journal, working_budget=100, hard_limit=150)
    assert not AuditEvent.objects.filter(action="context.failed").exists()
    result = context_build(journal=journal, working_budget=100, hard_limit=150)
    assert result.status == "failed"
    step = result.failure["next_step"]
    assert step["working_budget"] > 100 and "over the working budget of 100" in step["cause"]
    event = AuditEvent.objects.get(action="context.failed")
    assert event.details["working_budget"] == 100 and event.details["surface"] == "command"
    client.force_login(member)
    page = client.get(reverse("journal:session", args=SCOPE[:2])).content.decode()
    assert "1 context failure</a>" in page
    section = page[page.index('id="context-failures"') :]
    assert "via command, at seq" in section
    assert f"a working budget of {step['working_budget']:,} tokens would fit" in section
    link = html.unescape(section.split('href="')[1].split('"')[0])
    assert "working_budget=100" in link and "hard_limit=150" in link
    explained = client.get(link).content.decode()
    assert 'id="context-failure"' in explained and "over the working budget of 100" in explained


def test_the_frontend_view_shows_a_calls_arguments_readably(client, member, journal):
    """A tool call in the frontend view reads as the timeline's: a command as shell, not one
    escaped JSON line."""
    from journal_app.formats.base import message, tool_call, tool_result

    journal_build(
        tenant=journal.session.tenant,
        key="calls",
        items=[
            message("user", "run them"),
            tool_call("c1", "bash", {"command": "pytest -x\necho done"}),
            tool_result("c1", "1 passed"),
        ],
    )
    client.force_login(member)
    url = reverse("ledger:context", args=["acme", "calls", "main", "main"])
    body = client.get(url, {"view": "frontend"}).content.decode()
    section = body[body.index('id="frontend-h"') :]
    assert '<pre class="shell" tabindex="0"><code>$ pytest -x\necho done</code></pre>' in section
    assert "\\n" not in section.split("</section>")[0]


def test_the_overview_counts_every_failed_context_request_and_lists_the_newest(
    client, member, journal
):
    from ledger_app.services.context import context_build, context_failure_record

    fold_build(journal)
    failed = context_build(journal=journal, working_budget=100, hard_limit=150)
    for _ in range(20):
        context_failure_record(journal=journal, result=failed, target_format="openai")
    client.force_login(member)
    page = client.get(reverse("journal:session", args=SCOPE[:2])).content.decode()
    assert "21 context failures</a>" in page
    assert "the 20 newest of 21" in page
    section = page[page.index('id="context-failures"') :]
    assert section.split("</ul>")[0].count("<li>") == 20


@pytest.mark.parametrize("debug", [True, False])
def test_a_failed_model_call_is_listed_on_the_overview(client, member, journal, settings, debug):
    """A proxied call the upstream did not answer is listed with its status, error (secrets
    filtered) and a link to its messages on the timeline."""
    from proxy_app.services import upstream_failure_record
    from proxy_app.services.placement import Recorded

    settings.DEBUG = debug
    recorded = Recorded(journal=journal, revision=journal.head_seq, appended=0)
    upstream_failure_record(
        surface="openai",
        recorded=recorded,
        status=500,
        detail=b'{"error": "boom, key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"}',
    )
    client.force_login(member)
    page = client.get(reverse("journal:session", args=SCOPE[:2])).content.decode()
    assert "1 failed model call</a>" in page
    section = page[page.index('id="model-call-failures"') :].split("</section>")[0]
    assert "<strong>HTTP 500</strong>" in section and "boom" in section
    assert "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD" not in section
    assert f"?seq={journal.head_seq}" in section
