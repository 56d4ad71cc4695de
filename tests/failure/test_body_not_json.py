"""An entry whose stored body is not JSON (damaged in place) is shown raw with a warning on
every surface that shows it, never a 500 (README "REST API")."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from journal_app.auth import api_key_create
from journal_app.models import Entry
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build

pytestmark = pytest.mark.django_db

DAMAGED = "not json {refund"


@pytest.fixture
def damaged():
    acme = TenantFactory(slug="acme")
    user = MembershipFactory(tenant=acme, user=UserFactory(username="alice")).user
    journal = journal_build(tenant=acme, key="refunds")
    entry = Entry.objects.get(journal=journal, seq=2)
    with connection.cursor() as cur:  # behind the model layer (and the trigger)
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = replica")
        cur.execute("UPDATE journal_app_entry SET body = %s WHERE id = %s", [DAMAGED, entry.pk])
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = DEFAULT")
    _, key = api_key_create(tenant=acme, name="runtime")
    return user, entry, key


def test_the_timeline_and_the_entry_api_show_a_damaged_body_raw(client, damaged):
    user, entry, key = damaged
    client.force_login(user)
    r = client.get("/t/acme/refunds/main/main/")
    assert r.status_code == 200
    assert DAMAGED in r.content.decode()

    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    r = api.get("/api/v1/sessions/refunds/main/main/entries/2")
    assert r.status_code == 200, r.content[:300]
    body = r.json()
    assert body["content"] == {"text": DAMAGED, "output": DAMAGED, "body_not_json": True}
    assert body["verification"]["ok"] is False  # and the damage is named
    assert any(p.startswith("body_hash: stored") for p in body["verification"]["problems"])
