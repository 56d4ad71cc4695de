"""The recovery endpoints: through the product API with a real key, and with a small test auth."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from ninja import NinjaAPI
from ninja.security import HttpBearer
from ninja.testing import TestClient

from journal_app.auth import api_key_create
from journal_app.formats.base import message
from journal_app.models import Journal
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from recovery_app.api import router
from tests.recovery_app.conftest import MIGRATE, build_migration_case

pytestmark = pytest.mark.django_db

BASE = "/api/v1/sessions/{}/main/main/recovery"
SECRET = "sk-proj-PLACEHOLDERnotArealKey000000000000"


def _key(tenant):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_key_create(tenant=tenant, name='agent')[1]}"}


def test_search_read_and_analyst_through_the_api(client):
    case = build_migration_case()
    journal_append(
        journal=case.journal, items=[message("assistant", f"OPENAI_API_KEY={SECRET} noted")]
    )
    auth = _key(case.journal.session.tenant)
    base = BASE.format("mig")

    page = client.get(base + "/search", {"q": "0042_add_refund_index", "limit": 1}, **auth)
    assert page.status_code == 200, page.content
    body = page.json()
    assert [h["seq"] for h in body["hits"]] == [case.call.seq]
    assert body["next_cursor"] and body["revision"] == case.journal.head_seq
    nxt = client.get(
        base + "/search",
        {"q": "0042_add_refund_index", "limit": 1, "cursor": body["next_cursor"]},
        **auth,
    )
    assert nxt.status_code == 200 and [h["seq"] for h in nxt.json()["hits"]] == [case.result.seq]

    changed = body["next_cursor"][:-2] + ("AA" if body["next_cursor"][-2:] != "AA" else "BB")
    bad = client.get(base + "/search", {"q": "0042_add_refund_index", "cursor": changed}, **auth)
    assert bad.status_code == 400 and "cursor refused (tampered)" in bad.json()["message"]

    read = client.get(base + f"/read/seq/{case.call.seq}", **auth)
    assert read.status_code == 200 and read.json()["verified"] is True
    assert read.json()["content"]["arguments"]["command"] == MIGRATE
    secret = client.get(base + f"/read/seq/{case.journal.head_seq}", **auth).json()
    assert secret["filtered"] is True and SECRET not in secret["text"]

    answer = client.post(
        base + "/analyst", {"question": "What did migration 0042_add_refund_index do?"},
        content_type="application/json", **auth,
    )  # fmt: skip
    assert answer.status_code == 200, answer.content
    out = answer.json()
    assert out["outcome"] == "recovered" and out["receipt"] > 0
    cites = [c for claim in out["claims"] for c in claim["citations"]]
    assert any(
        c["entry"] == "sha256:" + case.call.entry_hash and "--fake" in c["quote"] for c in cites
    )


def test_the_api_refuses_other_scopes_and_bad_input(client):
    case = build_migration_case()
    other = build_migration_case(key="other")
    auth = _key(case.journal.session.tenant)
    token = client.get(BASE.format("mig") + "/search", {"q": "billing", "limit": 1}, **auth).json()[
        "next_cursor"
    ]
    reused = client.get(BASE.format("other") + "/search", {"q": "billing", "cursor": token}, **auth)
    assert reused.status_code == 400 and "(scope)" in reused.json()["message"]
    assert (
        client.get(BASE.format("other") + f"/read/entry/{case.call.entry_hash}", **auth).status_code
        == 404
    )
    assert client.get(BASE.format("mig") + "/search", {"q": "--"}, **auth).status_code == 422
    stranger = _key(tenant_ensure(slug="globex"))
    assert (
        client.get(BASE.format("mig") + "/search", {"q": "billing"}, **stranger).status_code == 404
    )
    assert client.get(BASE.format("mig") + "/search", {"q": "billing"}).status_code == 401
    assert other.journal.pk != case.journal.pk


@dataclass
class BoundCaller:
    """A caller whose credentials and session resolve to one journal."""

    journal: Journal


class BoundAuth(HttpBearer):
    def authenticate(self, request, token):
        return BoundCaller(Journal.objects.get(pk=int(token)))


def test_the_router_works_with_a_journal_bound_by_the_callers_session():
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key="bound"))
    k = journal_ensure(session=session_ensure(tenant=t, key="elsewhere"))
    journal_append(journal=j, items=[message("user", "quokka 1"), message("user", "quokka 2")])
    api = NinjaAPI(auth=BoundAuth(), urls_namespace="recovery-test")
    api.add_router("/", router)
    c = TestClient(api)
    ok = c.get(
        "/sessions/bound/main/main/recovery/search?q=quokka",
        headers={"Authorization": f"Bearer {j.pk}"},
    )
    assert ok.status_code == 200 and [h["seq"] for h in ok.json()["hits"]] == [1, 2]
    # the path cannot widen a bound caller's scope
    wrong = c.get(
        "/sessions/bound/main/main/recovery/search?q=quokka",
        headers={"Authorization": f"Bearer {k.pk}"},
    )
    assert wrong.status_code == 404
