"""Tenant isolation over the whole URLconf: every UI URL with an object id answers 404 to a
user of another tenant (docs/design.md sections 8 and 9).

The URLconf is walked, not listed: a new pattern with a parameter this test does not know
fails it until the parameter gets a value here. Skipped, with the reason: ``admin/`` (staff
only; the admin site is not tenant-scoped by design) and ``api/`` (the REST API
authenticates by API key, whose tenant is the scope; its own tests cover isolation).
"""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Artifact, Entry
from recovery_app.services import recovery_run
from tests.factories import journal_build

pytestmark = pytest.mark.django_db

SKIPPED_PREFIXES = ("admin/", "api/")


def _walk(patterns, prefix="", namespace=None):
    for p in patterns:
        if isinstance(p, URLResolver):
            ns = p.namespace or namespace
            yield from _walk(p.url_patterns, prefix + str(p.pattern), ns)
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), namespace, p.name, list(p.pattern.converters)


def _ui_patterns_with_ids():
    out = []
    for route, namespace, name, params in _walk(get_resolver().url_patterns):
        if route.startswith(SKIPPED_PREFIXES) or route.startswith("^api/"):
            continue
        if params:
            out.append((route, f"{namespace}:{name}" if namespace else name, params))
    return out


@pytest.fixture
def objects(settings, acme, perm_journal, retirement):
    settings.ARTIFACT_THRESHOLD_TOKENS = 50
    journal_build(
        tenant=acme,
        key="perm",
        lane="build",
        items=[
            message("user", "Run the build."),
            tool_call("b1", "exec", {"command": "make"}),
            tool_result("b1", "build log line\n" * 400),
        ],
    )
    return {
        "tenant": "acme",
        "session": "perm",
        "lane": "main",
        "branch": "main",
        "entry_hash": "sha256:" + Entry.objects.get(journal=perm_journal, seq=1).entry_hash,
        "content_hash": Artifact.objects.get().content_hash,
        "number": 1,
        "a": 1,
        "b": 2,
        "pk": retirement.pk,
        "fact_id": retirement.fact_id,
        "receipt": recovery_run(journal=perm_journal, query="permission", model=None).pk,
    }


def test_the_walk_finds_the_ui_patterns():
    names = {name for _, name, _ in _ui_patterns_with_ids()}
    assert {
        "journal:timeline",
        "journal:entry",
        "journal:artifact",
        "ledger:facts",
        "ledger:fold_diff",
        "ledger:review",
        "ledger:fact",
        "ledger:export",
        "journal:audit_log",
    } <= names


def test_every_url_with_an_object_id_is_404_for_another_tenant(client, objects, operator, outsider):
    checked = []
    for route, name, params in _ui_patterns_with_ids():
        unknown = [p for p in params if p not in objects]
        assert not unknown, f"{route}: give parameter(s) {unknown} a value in this test"
        url = reverse(name, kwargs={p: objects[p] for p in params})
        client.force_login(operator)  # control: the URL names a real object of acme
        own = client.get(url)
        assert own.status_code in (200, 302, 403, 405), (url, own.status_code)
        client.force_login(outsider)
        response = client.get(url)
        if response.status_code == 405:
            response = client.post(url, {"text": "x", "decision": "approve", "comment": "x"})
        assert response.status_code == 404, f"{url} answered {response.status_code} to globex"
        checked.append(name)
    assert len(checked) >= 12


def test_a_tenant_in_the_path_cannot_reach_another_tenants_objects(client, objects, outsider):
    """The outsider's own tenant slug with acme's session or artifact is still a 404."""
    client.force_login(outsider)
    for url in [
        reverse("journal:session", args=["globex", "perm"]),
        reverse("journal:artifact", args=["globex", objects["content_hash"]]),
        reverse("ledger:facts", args=["globex", "perm", "main", "main"]),
    ]:
        assert client.get(url).status_code == 404, url
    body = client.get(reverse("ledger:reviews")).content.decode()
    assert reverse("ledger:review", args=[objects["pk"]]) not in body
