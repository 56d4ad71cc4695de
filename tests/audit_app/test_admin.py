"""Tenants, memberships and API keys in the Django admin, each change in the audit log."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from audit_app.models import AuditEvent
from journal_app.auth import api_key_authenticate
from journal_app.models import ApiKey, Membership, Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser("root", password="pw-root")
    client.force_login(user)
    return client


def test_an_admin_creates_a_key_sees_its_secret_once_and_revokes_it(admin_client):
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    response = admin_client.post(
        reverse("admin:journal_app_apikey_add"),
        {"tenant": tenant.pk, "name": "ci runner", "role": "client", "user": ""},
        follow=True,
    )
    key = ApiKey.objects.get()
    shown = [str(m) for m in response.context["messages"]]
    raw = next(m for m in shown if key.prefix in m).split(" is ")[1].split(" :")[0]
    assert api_key_authenticate(raw=raw) == key
    admin_client.post(
        reverse("admin:journal_app_apikey_changelist"),
        {"action": "revoke", "_selected_action": [key.pk]},
    )
    key.refresh_from_db()
    assert key.revoked_at is not None and api_key_authenticate(raw=raw) is None
    actions = list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))
    assert actions[-2:] == ["api_key.create", "api_key.revoke"]


def test_a_refused_key_writes_nothing_and_says_why(admin_client):
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    response = admin_client.post(
        reverse("admin:journal_app_apikey_add"),
        {"tenant": tenant.pk, "name": "rev", "role": "reviewer", "user": ""},
        follow=True,
    )
    assert not ApiKey.objects.exists()
    assert "No key created: a reviewer key needs the user" in response.content.decode()


def test_memberships_are_managed_and_audited(admin_client):
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    user = get_user_model().objects.create_user("olga")
    admin_client.post(
        reverse("admin:journal_app_membership_add"),
        {"user": user.pk, "tenant": tenant.pk, "role": "reviewer"},
    )
    assert Membership.objects.get(user=user).role == "reviewer"
    event = AuditEvent.objects.get(action="membership.set")
    assert event.details["role"] == "reviewer"
    assert (
        admin_client.get(reverse("admin:journal_app_tenant_change", args=[tenant.pk])).status_code
        == 200
    )
