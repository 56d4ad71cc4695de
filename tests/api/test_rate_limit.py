"""API hygiene: per-key rate limits, and keys that follow their users."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from journal_app.auth import api_key_create
from journal_app.models import ApiKey, Membership
from tests.api.conftest import Api
from tests.factories import UserFactory


@pytest.fixture(autouse=True)
def _fresh_counters():
    cache.clear()
    yield
    cache.clear()


def test_a_key_over_its_rate_gets_429_in_the_error_shape_with_retry_after(api, settings):
    settings.API_RATE_LIMIT = "3/m"

    statuses = [api.get("/sessions").status_code for _ in range(3)]
    over = api.get("/sessions")

    assert statuses == [200, 200, 200]
    assert over.status_code == 429
    body = over.json()
    assert body["code"] == "rate_limited"
    assert set(body) == {"code", "message", "field", "entry"}
    assert body["message"].startswith(f"key {api.key[:11]} is over its rate limit of 3/m")
    assert 1 <= int(over["Retry-After"]) <= 60


def test_the_limit_counts_each_key_apart(api, other_api, settings):
    settings.API_RATE_LIMIT = "2/m"

    assert [api.get("/sessions").status_code for _ in range(3)] == [200, 200, 429]
    assert other_api.get("/sessions").status_code == 200


def test_a_limit_set_off_never_refuses(api, settings):
    settings.API_RATE_LIMIT = ""

    assert {api.get("/sessions").status_code for _ in range(20)} == {200}


def test_the_default_limit_is_generous_and_can_be_set(settings, monkeypatch):
    from config.env import SettingError, env_rate

    assert env_rate("API_RATE_LIMIT_UNSET_FOR_TEST", "6000/m") == "6000/m"
    monkeypatch.setenv("API_RATE_LIMIT_TEST", "500/5m")
    assert env_rate("API_RATE_LIMIT_TEST", "6000/m") == "500/5m"
    monkeypatch.setenv("API_RATE_LIMIT_TEST", "off")
    assert env_rate("API_RATE_LIMIT_TEST", "6000/m") == ""
    monkeypatch.setenv("API_RATE_LIMIT_TEST", "lots")
    with pytest.raises(SettingError, match="API_RATE_LIMIT_TEST"):
        env_rate("API_RATE_LIMIT_TEST", "6000/m")


def test_unauthenticated_requests_are_401_not_counted(client, settings):
    settings.API_RATE_LIMIT = "1/m"
    anonymous = Api(client, None)

    assert {anonymous.get("/sessions").status_code for _ in range(3)} == {401}


@pytest.fixture
def reviewer(tenant):
    user = UserFactory(username="rita")
    Membership.objects.create(user=user, tenant=tenant, role=Membership.Role.REVIEWER)
    key, raw = api_key_create(tenant=tenant, name="desk", role=ApiKey.Role.REVIEWER, user=user)
    return user, Api(Client(), raw)


def test_a_key_of_a_deactivated_user_is_refused(reviewer):
    user, api = reviewer
    assert api.get("/sessions").status_code == 200

    user.is_active = False
    user.save(update_fields=["is_active"])
    refused = api.get("/sessions")

    assert refused.status_code == 401 and refused.json()["code"] == "unauthenticated"


def test_a_key_whose_user_left_the_tenant_is_refused(reviewer, tenant):
    user, api = reviewer
    Membership.objects.filter(user=user, tenant=tenant).delete()

    assert api.get("/sessions").status_code == 401


def test_a_reviewer_key_whose_user_became_an_operator_is_refused(reviewer, tenant):
    user, api = reviewer
    Membership.objects.filter(user=user, tenant=tenant).update(role=Membership.Role.OPERATOR)

    assert api.get("/sessions").status_code == 401
    Membership.objects.filter(user=user, tenant=tenant).update(role=Membership.Role.ADMIN)
    assert api.get("/sessions").status_code == 200


def test_a_client_key_with_no_user_stands_on_its_own(api):
    assert api.get("/sessions").status_code == 200


def test_refused_keys_from_one_address_are_slowed_too(settings):
    """Fresh-eyes finding: only valid keys were counted, so guessing keys was
    never slowed. Refused keys count per address; over the rate the answer is 429."""
    settings.API_AUTH_FAILURE_RATE = "3/m"
    client = Client()
    statuses = [
        client.get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer lk_nothing_{n}").status_code
        for n in range(4)
    ]
    assert statuses == [401, 401, 401, 429]
    body = client.get("/api/v1/sessions", HTTP_AUTHORIZATION="Bearer lk_x").json()
    assert body["code"] == "rate_limited" and "refused API keys" in body["message"]
