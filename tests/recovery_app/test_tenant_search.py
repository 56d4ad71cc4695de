"""Content search across a tenant's sessions: every session of the tenant, none of another's,
secrets masked, pages, a clear error for an empty query (README "The UI", Search)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from journal_app.formats.base import message
from recovery_app import tenant_search as ts
from recovery_app.lexical import QueryInvalid
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build

pytestmark = pytest.mark.django_db

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"


@pytest.fixture
def world():
    acme, globex = TenantFactory(slug="acme"), TenantFactory(slug="globex")
    user = MembershipFactory(tenant=acme, user=UserFactory(username="oscar"), role="operator").user
    journal_build(
        tenant=acme, key="one", items=[message("user", "the refund rounding bug in billing")]
    )
    journal_build(
        tenant=acme,
        key="two",
        items=[
            message("user", f"refund rounding again, key {SECRET} for the api"),
            message("assistant", "ok"),
        ],
    )
    journal_build(tenant=globex, key="other", items=[message("user", "refund rounding at globex")])
    return acme, globex, user


def test_it_finds_entries_in_every_session_of_the_tenant_only(world):
    acme, _, _ = world

    page = ts.tenant_search(tenant=acme, raw_query="refund rounding")

    assert sorted(h.journal.session.key for h in page.hits) == ["one", "two"]
    assert page.journals == 2 and page.has_next is False


def test_a_snippet_never_shows_a_secret(world):
    acme, _, _ = world

    [hit] = ts.tenant_search(tenant=acme, raw_query="again").hits

    assert SECRET not in hit.snippet
    assert "refund rounding again" in hit.snippet


def test_one_session_narrows_and_pages_follow(world, monkeypatch):
    acme, _, _ = world
    monkeypatch.setattr(ts, "PER_PAGE", 1)

    first = ts.tenant_search(tenant=acme, raw_query="refund")
    second = ts.tenant_search(tenant=acme, raw_query="refund", page=2)
    only = ts.tenant_search(tenant=acme, raw_query="refund", session_key="one")

    assert (len(first.hits), first.has_next, second.has_next) == (1, True, False)
    assert first.hits[0].entry.pk != second.hits[0].entry.pk
    assert [h.journal.session.key for h in only.hits] == ["one"]


def test_an_unsearchable_query_is_refused(world):
    acme, _, _ = world
    with pytest.raises(QueryInvalid, match="nothing searchable"):
        ts.tenant_search(tenant=acme, raw_query="!!!")


def test_the_page_searches_the_users_tenant_and_404s_another(world, client):
    _, _, user = world
    client.force_login(user)
    url = reverse("recovery:search")

    found = client.get(url, {"q": "refund rounding"}).content.decode()
    other = client.get(url, {"q": "refund", "tenant": "globex"})
    bad = client.get(url, {"q": "!!!"})

    assert "Results 1–2" in found and "globex" not in found
    assert 'id="permalink"' in found
    assert other.status_code == 404
    assert bad.status_code == 400 and "nothing searchable" in bad.content.decode()


def test_the_api_reads_the_same_hits_for_the_keys_tenant_only(world, client):
    from journal_app.auth import api_key_create

    acme, globex, _ = world
    _, raw = api_key_create(tenant=acme, name="runtime")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}

    body = client.get("/api/v1/search", {"q": "refund rounding"}, **headers).json()
    bad = client.get("/api/v1/search", {"q": "!!!"}, **headers)

    page = ts.tenant_search(tenant=acme, raw_query="refund rounding")
    assert [(h["session"], h["seq"]) for h in body["hits"]] == [
        (h.journal.session.key, h.entry.seq) for h in page.hits
    ]
    assert all(SECRET not in h["snippet"] for h in body["hits"])
    assert (bad.status_code, bad.json()["code"]) == (422, "invalid_query")
