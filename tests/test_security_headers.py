"""Content-Security-Policy (django-csp; README "Security headers"): every page answers with a
policy that runs and applies only this site's own static scripts and stylesheets, and no
template carries what such a policy would refuse (an inline script, a ``style=`` attribute,
an inline event handler). The htmx pages working under it is shown in the browser
(tests/browser/test_csp.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build

TEMPLATES = sorted(Path(settings.BASE_DIR, "templates").rglob("*.html"))
#: what a policy without 'unsafe-inline' refuses, as it appears in a template
REFUSED = {
    "inline script": re.compile(r"<script\b(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")"),
    "style attribute": re.compile(r"\sstyle\s*="),
    "style element": re.compile(r"<style\b"),
    "event handler": re.compile(r"\son[a-z]+\s*=|\shx-on[:-]"),
    "javascript: URL": re.compile(r"javascript:", re.I),
}


def directives(header: str) -> dict[str, list[str]]:
    out = {}
    for part in header.split(";"):
        name, *values = part.split()
        out[name] = values
    return out


@pytest.mark.django_db
@pytest.mark.parametrize("logged_in", [False, True], ids=["login page", "facts page"])
def test_pages_answer_with_a_policy_that_allows_only_own_static_files(logged_in):
    client = Client()
    url = "/accounts/login/"
    if logged_in:
        tenant = TenantFactory(slug="acme")
        journal_build(tenant=tenant, key="s1")
        client.force_login(MembershipFactory(tenant=tenant, user=UserFactory()).user)
        url = "/ledger/acme/s1/main/main/"
    response = client.get(url)
    assert response.status_code == 200
    policy = directives(response["Content-Security-Policy"])
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in response["Content-Security-Policy"]
    assert "'unsafe-eval'" not in response["Content-Security-Policy"]


def test_the_template_scan_finds_what_the_policy_refuses():
    samples = {
        "inline script": "<script>alert(1)</script>",
        "style attribute": '<p style="color:red">',
        "style element": "<style>p{}</style>",
        "event handler": '<a onclick="go()">',
        "javascript: URL": '<a href="javascript:go()">',
    }
    for name, pattern in REFUSED.items():
        assert pattern.search(samples[name]), name
    assert not REFUSED["inline script"].search('<script src="/static/js/app.js" defer></script>')


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: str(p.relative_to(settings.BASE_DIR)))
def test_no_template_holds_what_the_policy_refuses(template):
    text = template.read_text()
    found = {name: p.findall(text) for name, p in REFUSED.items() if p.search(text)}
    assert found == {}
