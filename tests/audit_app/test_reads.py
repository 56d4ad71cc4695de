"""The audited raw read: who may read stored bytes, and the audit trail."""

from __future__ import annotations

import pytest
from django.test import Client

from audit_app.models import AuditEvent
from audit_app.reads import RawReadDenied, entry_read_raw, raw_read_allowed
from journal_app.auth import api_key_create
from journal_app.formats.base import message
from journal_app.models import ApiKey, Entry, Membership
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from tests.factories import UserFactory

SECRET = "db password: Sup3rS3cretValue99"


@pytest.fixture
def entry(db):
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key="s"))
    journal_append(journal=journal, items=[message("assistant", SECRET)])
    return Entry.objects.select_related("journal__session__tenant").get(journal=journal, seq=1)


def member(entry, name: str, role: str):
    user = UserFactory(username=name)
    Membership.objects.create(user=user, tenant=entry.journal.session.tenant, role=role)
    return user


def test_an_admin_gets_the_stored_bytes_and_each_read_is_one_event(entry):
    admin = member(entry, "ada", Membership.Role.ADMIN)
    for n in (1, 2):
        data = entry_read_raw(entry=entry, actor=admin)
        assert data == entry.body.encode("utf-8") and b"Sup3rS3cretValue99" in data
        assert AuditEvent.objects.filter(action="entry.read_raw", actor=admin).count() == n
    event = AuditEvent.objects.filter(action="entry.read_raw").latest("pk")
    assert event.details == {"via": "ui", "bytes": len(data)}
    assert event.tenant == entry.journal.session.tenant


@pytest.mark.parametrize("role", [Membership.Role.OPERATOR, Membership.Role.REVIEWER])
def test_other_roles_are_refused_and_the_refusal_is_logged(entry, role):
    user = member(entry, "rita", role)
    assert not raw_read_allowed(actor=user, tenant=entry.journal.session.tenant)
    with pytest.raises(RawReadDenied) as exc:
        entry_read_raw(entry=entry, actor=user)
    assert exc.value.status == 403 and exc.value.code == "forbidden"
    assert not AuditEvent.objects.filter(action="entry.read_raw").exists()
    denied = AuditEvent.objects.get(action="entry.read_raw.denied")
    assert denied.actor == user and denied.details["role"] == role


def test_a_superuser_counts_as_admin_and_an_anonymous_user_does_not(entry):
    root = UserFactory(username="root", is_superuser=True)
    assert entry_read_raw(entry=entry, actor=root)
    with pytest.raises(RawReadDenied):
        entry_read_raw(entry=entry, actor=None)


def test_keys_act_as_their_user_and_a_client_key_never_reads_raw(entry):
    tenant = entry.journal.session.tenant
    admin = member(entry, "ada", Membership.Role.ADMIN)
    reviewer = member(entry, "rita", Membership.Role.REVIEWER)
    client_key, _ = api_key_create(tenant=tenant, name="runtime")
    admin_key, _ = api_key_create(tenant=tenant, name="a", role=ApiKey.Role.REVIEWER, user=admin)
    rev_key, _ = api_key_create(tenant=tenant, name="r", role=ApiKey.Role.REVIEWER, user=reviewer)
    assert entry_read_raw(entry=entry, actor=admin_key, via="api")
    for key in (client_key, rev_key):
        with pytest.raises(RawReadDenied):
            entry_read_raw(entry=entry, actor=key, via="api")
    assert AuditEvent.objects.filter(action="entry.read_raw.denied").count() == 2


def test_the_raw_endpoint_answers_404_for_another_tenants_entry(entry):
    other = tenant_ensure(slug="globex")
    boss = UserFactory(username="boss")
    Membership.objects.create(user=boss, tenant=other, role=Membership.Role.ADMIN)
    _, raw = api_key_create(tenant=other, name="g", role=ApiKey.Role.REVIEWER, user=boss)
    r = Client().get(
        f"/api/v1/entries/sha256:{entry.entry_hash}/raw", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )
    assert r.status_code == 404 and b"Sup3r" not in r.content
    assert not AuditEvent.objects.filter(action__startswith="entry.read_raw").exists()


@pytest.mark.parametrize(
    "role, offered",
    [
        (Membership.Role.ADMIN, True),
        (Membership.Role.REVIEWER, False),
        (Membership.Role.OPERATOR, False),
    ],
)
@pytest.mark.parametrize("debug", [True, False])
def test_the_entry_page_offers_the_unfiltered_bytes_only_to_who_may_read_them(
    entry, settings, role, offered, debug
):
    settings.DEBUG = debug
    client = Client()
    client.force_login(member(entry, "una", role))
    page = client.get(f"/e/sha256:{entry.entry_hash}/", secure=True).content.decode()
    assert "filtered:" in page  # the secret is filtered: the note is shown to everyone
    assert (f"/e/sha256:{entry.entry_hash}/raw/" in page) is offered
    assert ("The unfiltered bytes are for the tenant's admins" in page) is not offered
