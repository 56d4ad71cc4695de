"""Dropped database connections and API requests.

A connection the server ends in the middle of a request gives the API's clear error (503
``database_unavailable`` in the error shape, ``Retry-After``), and the next request works;
with ``CONN_MAX_AGE`` a kept connection that the server ended between two requests is
replaced (``CONN_HEALTH_CHECKS``) instead of failing the next request.

Django's test client leaves out the ``close_old_connections`` call that every real request
starts and ends with (``request_started``/``request_finished``); the tests make it where a
server would.
"""

from __future__ import annotations

import pytest
from django.db import close_old_connections, connection

from journal_app import auth
from journal_app.auth import api_key_create
from journal_app.services import tenant_ensure

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def key(postgres_only) -> str:
    return api_key_create(tenant=tenant_ensure(slug="acme"), name="runtime")[1]


def _get(client, key: str):
    return client.get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {key}")


def _terminate(side) -> None:
    connection.ensure_connection()
    side.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])


def test_a_connection_dropped_mid_request_is_503_in_the_error_shape_then_works(
    client, key, side, monkeypatch
):
    real = auth.api_key_authenticate
    calls = []

    def dropping(*, raw: str):
        calls.append(raw)
        if len(calls) == 1:
            _terminate(side)
        return real(raw=raw)

    monkeypatch.setattr(auth, "api_key_authenticate", dropping)
    dropped = _get(client, key)

    assert dropped.status_code == 503
    assert dropped.json()["code"] == "database_unavailable"
    assert set(dropped.json()) == {"code", "message", "field", "entry"}
    assert dropped["Retry-After"] == "1"
    close_old_connections()  # the end of the failed request: the broken connection goes
    assert _get(client, key).status_code == 200


def test_a_kept_connection_dropped_between_requests_is_replaced(client, key, side):
    assert connection.settings_dict["CONN_HEALTH_CHECKS"] is True
    connection.settings_dict["CONN_MAX_AGE"] = 60
    connection.close()
    try:
        close_old_connections()
        assert _get(client, key).status_code == 200
        kept = connection.connection
        _terminate(side)
        close_old_connections()  # the start of the next request
        assert _get(client, key).status_code == 200
        assert connection.connection is not kept  # replaced, not reused
    finally:
        connection.settings_dict["CONN_MAX_AGE"] = 0
        connection.close()
