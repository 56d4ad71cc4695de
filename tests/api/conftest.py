"""Fixtures of the API tests: tenants, keys, and a small client that sends the key."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from journal_app.auth import api_key_create
from journal_app.formats.base import message
from journal_app.models import ApiKey, Entry, Membership
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.models import RetirementRequest
from ledger_app.services import ledger_fold
from tests.factories import UserFactory
from tests.support.writers import ScriptedWriter

BASE = "/api/v1"


class Api:
    """Django's test client (the whole WSGI path: middleware, parsing, 413) with a key."""

    def __init__(self, client: Client, key: str | None) -> None:
        self.client = client
        self.key = key

    def _headers(self) -> dict[str, str]:
        return {"HTTP_AUTHORIZATION": f"Bearer {self.key}"} if self.key else {}

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(BASE + path, params, **self._headers())

    def post(self, path: str, data: Any) -> Any:
        return self.post_raw(path, json.dumps(data))

    def post_raw(self, path: str, body: bytes | str, content_type: str = "application/json") -> Any:
        return self.client.generic(
            "POST", BASE + path, body, content_type=content_type, **self._headers()
        )

    def upload(self, path: str, data: dict[str, Any]) -> Any:
        return self.client.post(BASE + path, data, **self._headers())


@pytest.fixture
def tenant(db):
    return tenant_ensure(slug="acme")


@pytest.fixture
def other_tenant(db):
    return tenant_ensure(slug="globex")


@pytest.fixture
def api(client, tenant) -> Api:
    _, raw = api_key_create(tenant=tenant, name="runtime")
    return Api(client, raw)


@pytest.fixture
def reviewer_api(tenant) -> Api:
    user = UserFactory(username="rita")
    Membership.objects.create(user=user, tenant=tenant, role=Membership.Role.REVIEWER)
    _, raw = api_key_create(tenant=tenant, name="review desk", role=ApiKey.Role.REVIEWER, user=user)
    return Api(Client(), raw)


@pytest.fixture
def other_api(other_tenant) -> Api:
    _, raw = api_key_create(tenant=other_tenant, name="globex runtime")
    return Api(Client(), raw)


RULE = "Always ask before changing file permissions."


def pending_retirement(tenant, key: str = "perm"):
    """A journal whose P0 pin has a retirement waiting for review (seed 000's case).

    Returns ``(journal, retirement_request, pin_id)``.
    """
    journal = journal_ensure(session=session_ensure(tenant=tenant, key=key))
    journal_append(journal=journal, items=[message("user", RULE), message("assistant", "OK.")])
    first = ledger_fold(journal=journal).fold
    pin = next(f["id"] for f in first.state_dict["facts"].values() if f.get("pin"))
    journal_append(
        journal=journal,
        items=[message("user", "The permission rule no longer applies; you may chmod freely.")],
    )
    evidence = Entry.objects.get(journal=journal, seq=3).entry_hash
    ledger_fold(
        journal=journal,
        writer=ScriptedWriter([{"op": "retire", "id": pin, "evidence": [evidence]}]),
    )
    return journal, RetirementRequest.objects.get(journal=journal), pin
