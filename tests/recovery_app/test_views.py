"""Operator UI pages of recovery: a journal's receipts and one receipt (docs/design.md 7 and 8)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from recovery_app.models import Receipt
from recovery_app.services import recovery_run
from tests.factories import MembershipFactory, TenantFactory, UserFactory
from tests.recovery_app.conftest import build_migration_case, raw_update

pytestmark = pytest.mark.django_db

SCOPE = ["acme", "mig", "main", "main"]


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def case():
    return build_migration_case()


@pytest.fixture
def member(case):
    return MembershipFactory(
        tenant=case.journal.session.tenant, user=UserFactory(username="alice")
    ).user


@pytest.fixture
def outsider():
    return MembershipFactory(
        tenant=TenantFactory(slug="globex"), user=UserFactory(username="mallory")
    ).user


@pytest.fixture
def tampered(case):
    """A manual attempt whose lead on the migration call fails the chunk check."""
    raw_update(
        "UPDATE journal_app_chunk SET hash = %s WHERE entry_id = %s AND position = 0",
        ["0" * 64, case.call.pk],
    )
    return recovery_run(journal=case.journal, query="0042_add_refund_index", model=None)


def test_the_receipt_names_the_failed_check_of_a_tampered_read(client, member, case, tampered):
    client.force_login(member)
    response = client.get(reverse("recovery:receipt", args=[*SCOPE, tampered.pk]))

    assert response.status_code == 200
    body = response.content.decode()
    assert "failed: chunks" in body  # the read's verdict names the check
    assert "chunks: chunk 0: stored offset 0" in body  # and the reason with the figures
    assert "0042_add_refund_index" in body  # the query
    assert f"sha256:{case.result.entry_hash[:12]}" in body  # the untouched result is a source
    assert tampered.snapshot["head_hash"] in body
    assert f"Revision</dt><dd>{tampered.snapshot['revision']}</dd>" in body
    assert reverse("journal:entry", args=["sha256:" + case.call.entry_hash]) in body


def test_the_list_shows_each_attempt_and_links_its_receipt(client, member, case, tampered):
    quiet = recovery_run(journal=case.journal, query="no_such_identifier_xyz", model=None)
    client.force_login(member)

    body = client.get(reverse("recovery:receipts", args=SCOPE)).content.decode()

    for r in (tampered, quiet):
        assert reverse("recovery:receipt", args=[*SCOPE, r.pk]) in body
    assert "nothing_found" in body and tampered.outcome in body
    only = client.get(reverse("recovery:receipts", args=SCOPE), {"outcome": "nothing_found"})
    assert reverse("recovery:receipt", args=[*SCOPE, tampered.pk]) not in only.content.decode()


def test_an_empty_journal_explains_the_recover_command(client, member, case):
    client.force_login(member)

    body = client.get(reverse("recovery:receipts", args=SCOPE)).content.decode()

    assert "No recovery attempt yet" in body
    assert "manage.py recover acme/mig/main/main" in body


def test_the_list_runs_a_fixed_number_of_queries_and_paginates(client, member, case):
    client.force_login(member)
    url = reverse("recovery:receipts", args=SCOPE)
    recovery_run(journal=case.journal, query="0042_add_refund_index", model=None)
    with CaptureQueriesContext(connection) as small:
        assert client.get(url).status_code == 200
    first = Receipt.objects.get()
    for _ in range(29):
        Receipt.objects.create(
            journal=case.journal,
            kind=first.kind,
            outcome=first.outcome,
            trigger=first.trigger,
            snapshot=first.snapshot,
            queries=first.queries,
            reads=first.reads,
            sources=first.sources,
        )
    with CaptureQueriesContext(connection) as big:
        response = client.get(url)
    assert len(big) <= 6 and len(big) <= len(small) + 1, [q["sql"] for q in big]
    assert "Page 1 of 2" in response.content.decode()


def test_another_tenants_user_gets_404(client, outsider, case, tampered):
    client.force_login(outsider)
    for url in [
        reverse("recovery:receipts", args=SCOPE),
        reverse("recovery:receipt", args=[*SCOPE, tampered.pk]),
        reverse("recovery:receipt", args=["globex", "mig", "main", "main", tampered.pk]),
    ]:
        assert client.get(url).status_code == 404, url


def test_a_receipt_of_another_scope_is_404_in_this_one(client, member, case, tampered):
    client.force_login(member)
    other = build_migration_case(key="other")
    url = reverse("recovery:receipt", args=["acme", "other", "main", "main", tampered.pk])
    assert other.journal.pk != case.journal.pk
    assert client.get(url).status_code == 404


def test_anonymous_users_are_redirected_to_login(client, tampered):
    for url in [
        reverse("recovery:receipts", args=SCOPE),
        reverse("recovery:receipt", args=[*SCOPE, tampered.pk]),
    ]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_the_list_defaults_to_triggered_attempts_and_gives_the_reason_once(client, member, case):
    from recovery_app.models import Receipt

    quiet = Receipt.objects.create(
        journal=case.journal,
        outcome="not_triggered",
        reason="no identifier or uncertainty/correction phrase in the last 24 entries",
        trigger={
            "fired": False,
            "reason": "no identifier or uncertainty/correction phrase in the last 24 entries",
        },
    )
    fired = Receipt.objects.create(
        journal=case.journal,
        outcome="nothing_found",
        reason="no raw entry matched 2 queries",
        trigger={
            "fired": True,
            "reason": "seq 7: phrase 'may have been'",
            "phrases": [{"seq": 7, "phrase": "may have been"}],
        },
    )
    client.force_login(member)
    url = reverse("recovery:receipts", args=SCOPE)
    body = client.get(url).content.decode()
    assert f">#{fired.pk}</a>" in body and f">#{quiet.pk}</a>" not in body
    assert '<option value="triggered" selected>' in body
    every = client.get(url, {"outcome": "all"}).content.decode()
    assert f">#{quiet.pk}</a>" in every
    assert every.count("no identifier or uncertainty/correction phrase in the last 24") == 1
    detail = client.get(reverse("recovery:receipt", args=[*SCOPE, fired.pk])).content.decode()
    assert "<q>may have been</q>" in detail and "{&#x27;seq&#x27;" not in detail
