"""An unknown path under ``/proxy/`` answers the proxy's JSON 404, never Django's HTML page."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/proxy/openai/v1/nonexistent"),
        ("get", "/proxy/anthropic/v1/foo"),
        ("get", "/proxy/"),
    ],
)
def test_an_unknown_proxy_path_is_a_json_404_naming_it_and_the_served_endpoints(db, method, path):
    client = Client(enforce_csrf_checks=True)
    if method == "post":
        r = client.post(path, data="{}", content_type="application/json")
    else:
        r = client.get(path)
    assert r.status_code == 404
    assert r["Content-Type"] == "application/json"
    body = r.json()
    assert body["code"] == "not_found"
    assert body["field"] is None and body["entry"] is None
    assert f"no proxy endpoint at {path};" in body["message"]
    for served in (
        "/proxy/openai/v1/chat/completions",
        "/proxy/openai/v1/responses",
        "/proxy/openai/v1/models",
        "/proxy/openai/v1/embeddings",
        "/proxy/anthropic/v1/messages",
        "/proxy/anthropic/v1/messages/count_tokens",
        "/proxy/anthropic/v1/models",
    ):
        assert served in body["message"], served


def test_a_served_endpoint_is_not_shadowed_by_the_404(db):
    r = Client().get("/proxy/openai/v1/chat/completions")
    assert r.status_code == 405
    assert r.json()["code"] == "method_not_allowed"


def test_the_readme_lists_the_404():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    errors = readme.split("#### Proxy errors")[1].split("\n#")[0]
    assert "| 404 | `not_found` |" in errors
