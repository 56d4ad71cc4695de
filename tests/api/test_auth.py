"""Tenant API keys: stored hashed, shown once with a visible prefix, revocable, with
a role; the commands that create and revoke them; 401 for anything but a live key."""

from __future__ import annotations

import hashlib
import io

import pytest
from django.core.management import CommandError, call_command
from django.http import Http404
from django.test import Client

from journal_app.auth import ApiCaller, ApiKeyError, api_key_authenticate, api_key_create
from journal_app.models import ApiKey, Membership
from tests.api.conftest import BASE, Api
from tests.factories import UserFactory, journal_build

pytestmark = pytest.mark.django_db


def test_a_key_is_stored_as_its_sha256_only(tenant):
    key, raw = api_key_create(tenant=tenant, name="runtime")

    row = ApiKey.objects.get()
    assert raw.startswith(key.prefix + "_")
    assert len(key.prefix) == 11 and key.prefix.startswith("lk_")
    assert row.key_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in {row.name, row.prefix, row.key_hash}
    assert row.role == "client" and row.revoked_at is None


def test_two_keys_never_share_a_secret_or_prefix(tenant):
    (a, raw_a), (b, raw_b) = (api_key_create(tenant=tenant, name=n) for n in ("a", "b"))

    assert raw_a != raw_b and a.prefix != b.prefix


def test_a_live_key_authenticates_and_records_its_last_use(tenant):
    key, raw = api_key_create(tenant=tenant, name="runtime")

    found = api_key_authenticate(raw=raw)

    assert found == key
    key.refresh_from_db()
    assert key.last_used_at is not None


@pytest.mark.parametrize(
    "mangle",
    [lambda r: r[:-1] + ("A" if r[-1] != "A" else "B"), lambda r: r[:11], lambda r: "x" + r],
    ids=["wrong-secret", "prefix-only", "garbage"],
)
def test_a_wrong_key_does_not_authenticate(tenant, mangle):
    _, raw = api_key_create(tenant=tenant, name="runtime")

    assert api_key_authenticate(raw=mangle(raw)) is None


def test_a_reviewer_key_needs_a_reviewer_user(tenant):
    operator = UserFactory(username="oscar")
    Membership.objects.create(user=operator, tenant=tenant, role=Membership.Role.OPERATOR)

    with pytest.raises(ApiKeyError, match="needs the user"):
        api_key_create(tenant=tenant, name="desk", role="reviewer")
    with pytest.raises(ApiKeyError, match="not a reviewer or admin"):
        api_key_create(tenant=tenant, name="desk", role="reviewer", user=operator)
    assert not ApiKey.objects.exists()


@pytest.mark.parametrize(
    "header",
    [None, "Bearer", "Bearer lk_00000000_" + "a" * 43, "Basic dXNlcjpwYXNz", "lk_abc"],
    ids=["none", "empty-bearer", "unknown-key", "basic", "no-scheme"],
)
def test_anything_but_a_live_key_is_401(client, tenant, header):
    kwargs = {"HTTP_AUTHORIZATION": header} if header else {}

    r = client.get(BASE + "/sessions", **kwargs)

    assert r.status_code == 401
    assert r.json()["code"] == "unauthenticated"
    assert r["WWW-Authenticate"].startswith("Bearer")


def test_a_revoked_key_is_401(tenant, client):
    key, raw = api_key_create(tenant=tenant, name="runtime")
    api = Api(client, raw)
    assert api.get("/sessions").status_code == 200

    call_command("revoke_api_key", key.prefix, stdout=io.StringIO())

    assert api.get("/sessions").status_code == 401


def test_the_schema_and_docs_need_no_key():
    client = Client()

    schema = client.get(BASE + "/openapi.json")
    docs = client.get(BASE + "/docs")

    assert schema.status_code == 200
    assert schema.json()["info"]["title"] == "ledgerkeep API"
    assert "bearer" in str(schema.json()["components"]["securitySchemes"]).lower()
    assert docs.status_code == 200


def test_create_api_key_shows_the_key_once_with_its_prefix(db):
    out = io.StringIO()

    call_command("create_api_key", "acme", "--name", "ci runtime", stdout=out)

    lines = out.getvalue().strip().splitlines()
    key = ApiKey.objects.get()
    assert lines[0] == f"Created client key {key.prefix} ('ci runtime') for tenant acme."
    assert "not shown again" in lines[1]
    assert lines[2].startswith(key.prefix + "_")
    assert api_key_authenticate(raw=lines[2]) == key


def test_create_api_key_quiet_prints_only_the_key_and_reviewer_keys_name_their_user(tenant):
    user = UserFactory(username="rita")
    Membership.objects.create(user=user, tenant=tenant, role=Membership.Role.REVIEWER)
    out = io.StringIO()

    call_command(
        "create_api_key", "acme", "--name", "desk", "--role", "reviewer", "--user", "rita",
        "--quiet", stdout=out,
    )  # fmt: skip

    key = api_key_authenticate(raw=out.getvalue().strip())
    assert (key.role, key.user) == ("reviewer", user)


def test_create_api_key_refuses_a_reviewer_without_user_and_an_unknown_user(db):
    with pytest.raises(CommandError, match="needs the user"):
        call_command("create_api_key", "acme", "--name", "desk", "--role", "reviewer")
    with pytest.raises(CommandError, match="no user 'ghost'"):
        call_command(
            "create_api_key", "acme", "--name", "d", "--role", "reviewer", "--user", "ghost"
        )
    assert not ApiKey.objects.exists()


def test_revoke_api_key_accepts_the_whole_key_and_refuses_unknown_prefixes(tenant):
    key, raw = api_key_create(tenant=tenant, name="runtime")
    out = io.StringIO()

    call_command("revoke_api_key", raw, stdout=out)
    first = ApiKey.objects.get().revoked_at
    call_command("revoke_api_key", key.prefix, stdout=io.StringIO())

    assert out.getvalue().startswith(f"Revoked client key {key.prefix} ('runtime') of tenant acme")
    assert ApiKey.objects.get().revoked_at == first
    with pytest.raises(CommandError, match="no API key has the prefix"):
        call_command("revoke_api_key", "lk_deadbeef")


def test_the_caller_resolves_journals_inside_its_tenant_only(tenant, other_tenant):
    journal_build(tenant=tenant, key="mine")
    journal_build(tenant=other_tenant, key="theirs")
    key, _ = api_key_create(tenant=tenant, name="runtime")
    caller = ApiCaller(key)

    assert caller.journal("mine").session.tenant == tenant
    assert (caller.tenant, caller.role, caller.is_reviewer) == (tenant, "client", False)
    with pytest.raises(Http404):
        caller.journal("theirs")
    with pytest.raises(Http404):
        caller.session("theirs")


def test_a_wrong_auth_scheme_never_logs_the_secret(client, caplog, settings):
    settings.DEBUG = True
    secret = "lk_deadbeef_" + "s" * 40
    with caplog.at_level("DEBUG"):
        r = client.get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Basic {secret}")
    assert r.status_code == 401
    assert secret not in caplog.text
