"""``/healthz``: database and broker reachability as JSON."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_the_embedded_default_is_healthy_without_a_broker(client):
    r = client.get("/healthz")

    assert r.status_code == 200
    assert r.json() == {
        "status": "ok",
        "database": {"ok": True, "vendor": connection.vendor},
        "broker": {"ok": True, "transport": "memory", "eager": True},
    }
    assert "no-cache" in r["Cache-Control"]


def test_an_unreachable_broker_is_503_without_the_url(client, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_URL = "redis://:hunter2@127.0.0.1:1/0"

    r = client.get("/healthz")

    assert r.status_code == 503
    body = r.json()
    assert body["status"] == "fail"
    assert body["database"]["ok"] is True
    assert (body["broker"]["ok"], body["broker"]["transport"]) == (False, "redis")
    assert "hunter2" not in r.content.decode()


def test_an_unreachable_database_is_503(client, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("connection refused")

    monkeypatch.setattr(connection, "cursor", refuse)

    r = client.get("/healthz")

    assert r.status_code == 503
    assert r.json()["database"] == {"ok": False, "vendor": connection.vendor, "error": "OSError"}


def test_healthz_answers_get_and_head_only(client):
    assert client.head("/healthz").status_code == 200
    assert client.post("/healthz").status_code == 405
