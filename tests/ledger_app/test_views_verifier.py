"""The verifier page of a fold: proposals, both verdicts per judge, repair, fallback (docs/design.md 5.3, 8)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.model_writer import FALLBACK_NOTE, ModelWriter
from ledger_app.services import ledger_fold
from tests.factories import MembershipFactory, TenantFactory, UserFactory
from tests.support import ScriptedServer
from tests.support.writers import ScriptedWriter

pytestmark = pytest.mark.django_db

SCOPE = ["acme", "deploy", "main", "main"]
RULE = "Never deploy to production outside the release pipeline."
CLAIM = "The production service was deployed and browser acceptance passed"


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def scripted():
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def journal():
    tenant = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=tenant, key="deploy"))
    journal_append(
        journal=j,
        items=[
            message("system", RULE),
            message("user", "Deploy the billing service to production and run browser acceptance."),
            message("assistant", "Reading the deploy configuration first."),
            tool_call("c1", "read_file", {"path": "deploy/production.yaml"}),
            tool_result("c1", "service: billing\nreplicas: 3\nacceptance: browser\n"),
            tool_call("d1", "exec", {"command": "./deploy.sh production"}),
            tool_result(
                "d1",
                "Deploying billing to production...\nError: health check failed on 2/3 replicas",
                is_error=True,
                exit_code=1,
            ),
            message(
                "assistant", "The production service was deployed and browser acceptance passed."
            ),
        ],
    )
    j.refresh_from_db()
    return j


@pytest.fixture
def member(journal):
    return MembershipFactory(tenant=journal.session.tenant, user=UserFactory(username="alice")).user


@pytest.fixture
def outsider():
    return MembershipFactory(
        tenant=TenantFactory(slug="globex"), user=UserFactory(username="mallory")
    ).user


def _fact(key, text, support, confidence="verified"):
    return {
        "key": key,
        "category": "verified_state",
        "priority": "P1",
        "confidence": confidence,
        "text": text,
        "support": support,
    }


def _verdict(key, reason, entailed=False):
    return {
        "key": key,
        "entailment": "entailed" if entailed else "not_entailed",
        "entailment_reason": reason,
        "temporal": "valid",
        "temporal_reason": "nothing is closed",
    }


@pytest.fixture
def fallback_fold(journal, scripted):
    """Proposal rejected, the one repair rejected too: the fold falls back (seed fixture)."""
    scripted.push_json({"facts": [_fact("f1", CLAIM, [5, 8])]})
    scripted.push_json({"verdicts": [_verdict("f1", "seq 5 is a config file")]})
    scripted.push_json(
        {"facts": [_fact("f1", "The production service was deployed", [5, 8], "reported")]}
    )
    scripted.push_json({"verdicts": [_verdict("f1", "seq 8 is the assistant's claim")]})
    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config())).fold
    assert fold.outcome == "fallback"
    return fold


def _url(number):
    return reverse("ledger:verdicts", args=[*SCOPE, number])


def test_it_shows_each_round_with_the_verifiers_rejection_reasons(client, member, fallback_fold):
    client.force_login(member)
    response = client.get(_url(fallback_fold.number))

    assert response.status_code == 200
    body = response.content.decode()
    assert CLAIM in body  # the proposal's claim
    assert "seq 5 is a config file" in body  # round 0: the verifier's reason
    assert "seq 8 is the assistant&#x27;s claim" in body  # round 1: the repair's reason
    assert "repair (the one repair, told why)" in body
    assert "verifier model" in body and "rules (the verifier" in body  # which judge said it
    assert "not_entailed" in body
    assert "the repair was rejected too" in body  # the fallback reason
    assert FALLBACK_NOTE in body  # the fallback's note
    # the cited evidence links to the raw entry
    config = Entry.objects.get(journal=fallback_fold.journal, seq=5)
    assert reverse("journal:entry", args=["sha256:" + config.entry_hash]) in body


def test_the_fold_page_links_the_verifier_page(client, member, fallback_fold):
    client.force_login(member)
    body = client.get(reverse("ledger:fold", args=[*SCOPE, fallback_fold.number])).content.decode()
    assert _url(fallback_fold.number) in body
    assert reverse("ledger:fold_invariants", args=[*SCOPE, fallback_fold.number]) in body


def test_a_mechanical_fold_shows_the_reducers_verdicts_and_names_the_writer(
    client, member, journal
):
    fold = ledger_fold(journal=journal, writer="mechanical").fold
    journal_append(journal=journal, items=[message("assistant", "Done for today.")])
    pin = next(f for f in fold.state_dict["facts"].values() if f.get("pin"))
    bad = ledger_fold(
        journal=journal,
        writer=ScriptedWriter([{"op": "retire", "id": pin["id"], "evidence": []}], "test-writer"),
    ).fold
    client.force_login(member)

    first = client.get(_url(fold.number)).content.decode()
    assert "No proposal was judged for this fold" in first and "<code>mechanical</code>" in first
    second = client.get(_url(bad.number)).content.decode()
    [verdict] = [v for v in bad.delta_dict["verdicts"] if v["status"] == "rejected"]
    assert 'class="verdict-rejected"' in second
    assert verdict["reason"].replace("'", "&#x27;") in second


def test_the_verifier_page_runs_a_fixed_number_of_queries(client, member, fallback_fold, scripted):
    client.force_login(member)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(_url(fallback_fold.number)).status_code == 200
    assert len(queries) <= 10, [q["sql"] for q in queries]


def test_another_tenants_user_gets_404_and_anonymous_is_sent_to_login(
    client, outsider, fallback_fold
):
    url = _url(fallback_fold.number)
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    assert client.get(reverse("ledger:verdicts", args=["globex", *SCOPE[1:], 1])).status_code == 404


def test_an_unknown_fold_is_404(client, member, fallback_fold):
    client.force_login(member)
    assert client.get(_url(fallback_fold.number + 5)).status_code == 404
