"""The key and user commands log to the audit log as the admin does
(audit_app.services ``api_key_issue``, ``api_key_end``, ``account_ensure``)."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse

from audit_app.models import AuditEvent
from journal_app.models import ApiKey, Tenant

pytestmark = pytest.mark.django_db


def _events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("pk"))


def test_create_and_revoke_api_key_commands_are_audited_in_the_keys_tenant():
    call_command("create_api_key", "acme", "--name", "ci runner", "--quiet", stdout=io.StringIO())
    key = ApiKey.objects.get()
    (created,) = _events("api_key.create")
    assert (created.tenant.slug, created.object_type, created.object_id) == (
        "acme",
        "api_key",
        key.prefix,
    )
    assert created.actor is None and created.object_label == "ci runner"
    assert created.details["surface"] == "command" and created.details["role"] == "client"

    call_command("revoke_api_key", key.prefix, stdout=io.StringIO())
    call_command("revoke_api_key", key.prefix, stdout=io.StringIO())
    first, second = _events("api_key.revoke")
    assert first.tenant.slug == "acme" and first.object_id == key.prefix
    assert first.details == {"surface": "command", "already_revoked": False}
    assert second.details["already_revoked"] is True


def test_a_refused_key_command_writes_no_event():
    Tenant.objects.create(slug="acme", name="Acme")
    with pytest.raises(Exception, match="reviewer key needs"):
        call_command("create_api_key", "acme", "--name", "r", "--role", "reviewer")
    assert not AuditEvent.objects.filter(action__startswith="api_key.").exists()


def test_create_user_records_one_event_in_each_tenant_it_joins():
    Tenant.objects.create(slug="acme", name="Acme")
    Tenant.objects.create(slug="globex", name="Globex")
    call_command(
        "create_user", "rita", "--tenant", "acme:reviewer", "--tenant", "globex",
        "--password", "pw-rita-1", stdout=io.StringIO(),
    )  # fmt: skip
    events = _events("account.create")
    assert sorted(e.tenant.slug for e in events) == ["acme", "globex"]
    assert {e.object_id for e in events} == {"rita"}
    assert events[0].details["surface"] == "command"
    assert events[0].details["memberships"] == [["acme", "reviewer"], ["globex", "operator"]]


def test_a_superuser_without_a_tenant_is_logged_without_one():
    call_command("create_user", "root", "--superuser", stdout=io.StringIO())
    (event,) = _events("account.create")
    assert event.tenant is None and event.details["superuser"] is True


def test_the_admin_records_keys_through_the_same_service_with_its_user(client):
    root = get_user_model().objects.create_superuser("root", password="pw-root")
    client.force_login(root)
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    client.post(
        reverse("admin:journal_app_apikey_add"),
        {"tenant": tenant.pk, "name": "desk", "role": "client", "user": ""},
    )
    (event,) = _events("api_key.create")
    assert event.actor == root and event.tenant == tenant
    assert event.details == {"surface": "ui", "via": "admin", "role": "client", "name": "desk"}


def test_create_tenant_command_is_audited_once_and_a_bad_slug_writes_nothing():
    call_command("create_tenant", "globex", "--name", "Globex", stdout=io.StringIO())
    call_command("create_tenant", "globex", stdout=io.StringIO())  # exists: nothing logged
    (created,) = _events("tenant.create")
    assert (created.tenant.slug, created.object_type, created.object_id) == (
        "globex",
        "tenant",
        "globex",
    )
    assert created.object_label == "Globex" and created.actor is None
    assert created.details == {"surface": "command"}
    with pytest.raises(CommandError):
        call_command("create_tenant", "no way", stdout=io.StringIO())
    assert Tenant.objects.count() == 1 and len(_events("tenant.create")) == 1
