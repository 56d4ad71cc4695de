"""Operator UI pages of the ledger: facts at a fold, fold list, fold detail (DESIGN.md 8)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from journal_app.formats.base import tool_result
from journal_app.hashing import display
from journal_app.models import Entry, Journal
from journal_app.services import journal_append
from ledger_app.models import Fold
from ledger_app.services import ledger_fold
from ledger_app.writers import ScriptedWriter
from tests.factories import MembershipFactory, TenantFactory, UserFactory, fold_build, journal_build

pytestmark = pytest.mark.django_db

SCOPE = ["acme", "refunds", "main", "main"]
FACTS_URL = "/ledger/acme/refunds/main/main/"


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def acme():
    return TenantFactory(slug="acme")


@pytest.fixture
def member(acme):
    return MembershipFactory(tenant=acme, user=UserFactory(username="alice")).user


@pytest.fixture
def outsider():
    return MembershipFactory(
        tenant=TenantFactory(slug="globex"), user=UserFactory(username="mallory")
    ).user


@pytest.fixture
def journal(acme):
    return journal_build(tenant=acme, key="refunds")


@pytest.fixture
def folded(journal):
    fold_build(journal)
    return journal


def _writer_fold(journal: Journal, ops: list[dict]) -> Fold:
    """Answer the interrupted call, then fold seq 11-12 with a scripted writer's ``ops``."""
    journal_append(journal=journal, items=[tool_result("t2", "14 passed")])
    result = ledger_fold(journal=journal, writer=ScriptedWriter(ops, "test-writer"))
    assert result.fold is not None, result.reason
    return result.fold


def _entry(journal, seq):
    return Entry.objects.get(journal=journal, seq=seq)


def _ops(journal):
    goal = _entry(journal, 2)
    return [
        {
            "op": "add",
            "fact": {
                "id": "d1",
                "category": "decision",
                "priority": "P1",
                "confidence": "reported",
                "text": "The fix is limited to the refund rounding.",
                "support": [{"entry": goal.entry_hash, "quote": "refund rounding"}],
                "author": "writer",
            },
        },
        {
            "op": "add",
            "fact": {
                "id": "d2",
                "category": "verified_state",
                "priority": "P1",
                "confidence": "verified",
                "text": "All tests pass.",
                "support": [{"entry": goal.entry_hash}],
                "author": "writer",
            },
        },
    ]


# Login and tenant isolation ---------------------------------------------------------------


def test_it_redirects_anonymous_users_to_login(client, folded):
    for url in [FACTS_URL, FACTS_URL + "folds/", FACTS_URL + "folds/1/"]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_it_answers_404_for_another_tenants_ledger(client, outsider, folded):
    client.force_login(outsider)
    for url in [
        reverse("ledger:facts", args=SCOPE),
        reverse("ledger:folds", args=SCOPE),
        reverse("ledger:fold", args=[*SCOPE, 1]),
    ]:
        assert client.get(url).status_code == 404, url


# Facts ------------------------------------------------------------------------------------


def test_it_shows_facts_with_pins_verbatim_and_support_links(client, member, folded):
    client.force_login(member)
    response = client.get(FACTS_URL)
    body = response.content.decode()
    assert response.status_code == 200
    assert "pin, verbatim" in body
    assert (
        '<pre class="pin">Never modify the payments tables without asking the user first.</pre>'
        in body
    )
    system = _entry(folded, 1)
    assert 'href="' + reverse("journal:entry", args=[display(system.entry_hash)]) + '"' in body
    assert "FAILED:" in body  # the failed pytest run is a blocker
    assert "did not complete" not in body  # the trailing interrupted round is not folded yet
    assert '<th scope="col">Confidence</th>' in body
    assert "Permalink" in body and "?fold=1" in body


def test_it_says_when_the_fold_is_a_mechanical_fallback(client, member, folded):
    client.force_login(member)
    body = client.get(FACTS_URL).content.decode()
    assert (
        "mechanical facts only: retrieve raw journal evidence before relying on omitted state"
        in body
    )


def test_it_filters_facts(client, member, folded):
    client.force_login(member)
    body = client.get(FACTS_URL, {"priority": "P0"}).content.decode()
    assert "3 of 6 facts after fold 1 matching priority = P0." in body
    assert body.count("pin, verbatim</span>") == 3
    assert "FAILED:" not in body
    body = client.get(FACTS_URL, {"category": "blocker", "lifecycle": "active"}).content.decode()
    assert "1 of 6 facts" in body
    assert "FAILED:" in body and "pin, verbatim</span>" not in body


def test_it_returns_only_the_fact_table_to_htmx(client, member, folded):
    client.force_login(member)
    response = client.get(FACTS_URL, {"priority": "P0"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="fact-table"')
    assert "<html" not in body and "<form" not in body
    assert "3 of 6 facts" in body


def test_it_keeps_a_no_js_filter_form(client, member, folded):
    client.force_login(member)
    body = client.get(FACTS_URL).content.decode()
    assert f'method="get" action="{FACTS_URL}"' in body
    assert 'hx-target="#fact-table"' in body
    assert '<label for="filter-priority">Priority</label>' in body


def test_it_selects_the_state_after_a_given_fold(client, member, folded):
    _writer_fold(folded, _ops(folded))
    client.force_login(member)
    latest = client.get(FACTS_URL).content.decode()
    assert "7 of 7 facts after fold 2" in latest
    assert "The fix is limited to the refund rounding." in latest
    assert "mechanical facts only" not in latest  # fold 2 was accepted, not a fallback
    first = client.get(FACTS_URL, {"fold": 1}).content.decode()
    assert "6 of 6 facts after fold 1" in first
    assert "The fix is limited" not in first
    assert client.get(FACTS_URL, {"fold": 9}).status_code == 404
    assert client.get(FACTS_URL, {"fold": "x"}).status_code == 404


def test_it_links_quoted_support_to_the_highlighted_entry(client, member, folded):
    _writer_fold(folded, _ops(folded))
    goal = _entry(folded, 2)
    client.force_login(member)
    body = client.get(FACTS_URL, {"category": "decision"}).content.decode()
    link = reverse("journal:entry", args=[display(goal.entry_hash)]) + "?quote=refund+rounding"
    assert f'href="{link}"' in body
    entry_page = client.get(link).content.decode()
    assert '<mark id="quote">refund rounding</mark>' in entry_page
    assert "hash verified" in entry_page


def test_it_explains_how_to_fold_when_there_is_no_fold(client, member, journal):
    client.force_login(member)
    body = client.get(FACTS_URL).content.decode()
    assert "No fold yet" in body
    assert "manage.py fold acme/refunds/main/main" in body
    assert "manage.py fold SCOPE" in body


def test_it_renders_the_facts_page_with_bounded_queries(
    client, member, folded, django_assert_max_num_queries
):
    _writer_fold(folded, _ops(folded))
    client.force_login(member)
    with django_assert_max_num_queries(7):
        response = client.get(FACTS_URL)
    assert response.status_code == 200


# Folds ------------------------------------------------------------------------------------


def test_it_lists_folds(client, member, folded):
    _writer_fold(folded, _ops(folded))
    client.force_login(member)
    body = client.get(reverse("ledger:folds", args=SCOPE)).content.decode()
    assert reverse("ledger:fold", args=[*SCOPE, 1]) in body
    assert reverse("ledger:fold", args=[*SCOPE, 2]) in body
    assert "fallback" in body and "accepted" in body
    assert "mechanical" in body and "test-writer" in body
    assert '<strong class="bad">1</strong>' in body  # fold 2 rejected one op
    assert "1–10" in body  # fold 1's seq range: the trailing interrupted call is left out


def test_it_shows_fold_ops_with_verdicts_and_rejections_highlighted(client, member, folded):
    _writer_fold(folded, _ops(folded))
    client.force_login(member)
    response = client.get(reverse("ledger:fold", args=[*SCOPE, 2]))
    body = response.content.decode()
    assert response.status_code == 200
    assert '<tr id="op-1" class="verdict-rejected">' in body
    assert "needs a tool result that demonstrates it" in body
    assert '<tr id="op-0" class="verdict-accepted">' in body
    assert "1 rejected" in body
    assert "Manifest" in body and "&quot;id&quot;: &quot;test-writer&quot;" in body
    assert reverse("ledger:fold", args=[*SCOPE, 1]) in body  # previous fold link


def test_it_shows_the_mechanical_fold_manifest(client, member, folded):
    client.force_login(member)
    body = client.get(reverse("ledger:fold", args=[*SCOPE, 1])).content.decode()
    assert "mechanical (no model)" in body
    assert "&quot;entry_hashes&quot;" in body
    assert "mechanical facts only" in body
    assert client.get(reverse("ledger:fold", args=[*SCOPE, 5])).status_code == 404
