"""Same input, same verdict everywhere ("Done when", third bullet).

ONE table of realistic secrets (and hidden reasoning), each planted in a tool result of one
journal; every surface that shows or checks entry text must give the same verdict on each:
:mod:`journal_app.privacy` itself, the recovery read and search services, ``POST /validate``,
the entries API (filtered by default), the UI entry page (filtered, with a "filtered: why"
note), and the audited raw read (unfiltered for a tenant admin, 403 for a client key, one
audit event per read). Export carries the stored bytes and so needs the raw-read role.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

import pytest
from django.test import Client

from audit_app.models import AuditEvent
from audit_app.reads import RawReadDenied
from journal_app import privacy
from journal_app.auth import api_key_create
from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result
from journal_app.models import ApiKey, Entry, Membership
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from recovery_app.search import index_sync
from recovery_app.services import recovery_read, recovery_search
from recovery_app.session_transfer import session_export
from tests.factories import UserFactory

AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@dataclass(frozen=True)
class Planted:
    """One row: the text a tool printed, the value that must never show, and the label."""

    name: str
    text: str
    hidden: str
    label: str


SECRETS = [
    Planted(
        "keyword with a colon",
        "db password: Sup3rS3cretValue99",
        "Sup3rS3cretValue99",
        "secret: secret-keyword",
    ),
    Planted(
        "aws key as a command argument",
        f"aws configure set aws_secret_access_key {AWS}",
        AWS,
        "secret: aws-secret-key",
    ),
    Planted(
        "aws key as an option",
        f"aws s3 ls s3://bucket --secret-access-key {AWS} --region eu-west-1",
        AWS,
        "secret: aws-secret-key",
    ),
    Planted(
        "openai key",
        "OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
        "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
        "secret: openai-key",
    ),
    Planted(
        "anthropic key",
        "using sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe for the run",
        "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe",
        "secret: anthropic-key",
    ),
    Planted(
        "github token",
        "GH_PAT ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8 loaded",
        "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8",
        "secret: github-token",
    ),
    Planted(
        "private key block",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7xQ9fakefakefake\n"
        "-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEA7xQ9fakefakefake",
        "secret: private-key",
    ),
    Planted(
        "bearer header",
        "curl -H 'Authorization: Bearer abc123DEF456ghi789JKL012mno' https://api.example.com",
        "abc123DEF456ghi789JKL012mno",
        "secret: bearer-token",
    ),
    Planted(
        "jwt",
        "cookie eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.dGhpc2lzYXNpZ25hdHVyZQ set",
        "eyJzdWIiOiJ1c2VyLTQyIn0",
        "secret: jwt",
    ),
    Planted(
        "env assignment",
        "X_API_KEY=f00dBabe1234CafeD00d5678",
        "f00dBabe1234CafeD00d5678",
        "secret: credential",
    ),
    Planted(
        "slack token",
        "notify via xoxb-2048-4096-AbCdEfGhIjKlMnOp",
        "AbCdEfGhIjKlMnOp",
        "secret: slack-token",
    ),
    Planted(
        "google api key",
        "maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
        "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
        "secret: google-api-key",
    ),
    Planted(
        "connection string",
        "DATABASE_URL=postgres://app:Pg-pass-7781@db.internal:5432/app",
        "Pg-pass-7781",
        "secret: connection-string",
    ),
    Planted(
        "hidden reasoning",
        "<thinking>I will not mention the staging outage to the user</thinking>Deploying now.",
        "staging outage",
        "reasoning",
    ),
]
IDS = [p.name for p in SECRETS]
#: A search term planted right before each secret (the snippet is built around it).
TERM = "canary{}"


def verdict(filtered: bool, labels: list[str]) -> tuple[bool, frozenset[str]]:
    return filtered, frozenset(labels)


def expected(p: Planted) -> tuple[bool, frozenset[str]]:
    return True, frozenset({p.label})


@pytest.fixture
def planted(db):
    """A journal with each row as one tool call and its result: row ``i`` is at seq ``2i+3``
    (seq 1 is the user's request)."""
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key="secrets"))
    items = [message("user", "Check the deployment configuration.")]
    for i, p in enumerate(SECRETS):
        items += [
            tool_call(f"c{i}", "terminal", {"cmd": "cat notes"}),
            tool_result(f"c{i}", f"{TERM.format(i)} {p.text}"),
        ]
    journal_append(journal=journal, items=items)
    index_sync(journal=journal)
    journal.refresh_from_db()
    return journal


def seq_of(i: int) -> int:
    return 2 * i + 3


def entry_of(journal, i: int) -> Entry:
    return Entry.objects.get(journal=journal, seq=seq_of(i))


def test_the_table_is_realistic_and_each_row_is_caught_by_the_module():
    assert len(SECRETS) >= 11
    for p in SECRETS:
        f = privacy.filter_text(p.text)
        assert p.hidden not in f.text, p.name
        assert verdict(f.filtered, f.labels) == expected(p), p.name
        categories = {c for _, _, _, c in privacy.findings(p.text)}
        assert categories == {"reasoning" if p.label == "reasoning" else "secret"}, p.name


def test_recovery_read_and_search_give_the_same_verdict(planted):
    for i, p in enumerate(SECRETS):
        r = recovery_read(journal=planted, seq=seq_of(i))
        assert r.verified, p.name
        assert p.hidden not in r.text and p.hidden not in json.dumps(r.content), p.name
        assert verdict(r.filtered, r.filter_labels) == expected(p), p.name
        page = recovery_search(journal=planted, query=TERM.format(i))
        hits = [h for h in page.hits if h["seq"] == seq_of(i)]
        assert hits, p.name
        assert p.hidden not in hits[0]["snippet"], p.name
        assert verdict(hits[0]["filtered"], hits[0]["filter_labels"]) == expected(p), p.name


@pytest.fixture
def keys(planted):
    tenant = planted.session.tenant
    admin = UserFactory(username="ada")
    Membership.objects.create(user=admin, tenant=tenant, role=Membership.Role.ADMIN)
    operator = UserFactory(username="otto")
    Membership.objects.create(user=operator, tenant=tenant, role=Membership.Role.OPERATOR)
    _, client_key = api_key_create(tenant=tenant, name="runtime")
    _, admin_key = api_key_create(
        tenant=tenant, name="admin desk", role=ApiKey.Role.REVIEWER, user=admin
    )
    return {"admin": admin, "operator": operator, "client": client_key, "admin_key": admin_key}


def _get(path: str, key: str):
    return Client().get("/api/v1" + path, HTTP_AUTHORIZATION=f"Bearer {key}")


def test_validate_reports_each_row_as_the_module_does(keys):
    for p in SECRETS:
        body = {
            "messages": [
                {"role": "user", "content": "What did the tool print?"},
                {"role": "assistant", "content": p.text},
            ],
            "check_secrets": True,
        }
        r = Client().post(
            "/api/v1/validate",
            json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {keys['client']}",
        )
        assert r.status_code == 200, (p.name, r.content)
        problems = r.json()["problems"]
        labels = []
        for problem in problems:
            if problem["check"] == "no_secrets":
                labels += [f"secret: {k}" for k in problem["ref"].split(", ")]
            elif problem["check"] == "no_hidden_reasoning":
                labels.append("reasoning")
        assert verdict(bool(labels), labels) == expected(p), (p.name, problems)


def test_the_entries_api_shows_each_row_filtered_with_the_hash_verified(planted, keys):
    for i, p in enumerate(SECRETS):
        e = entry_of(planted, i)
        for path in (
            f"/entries/sha256:{e.entry_hash}",
            f"/sessions/secrets/main/main/entries/{e.seq}",
        ):
            r = _get(path, keys["client"])
            assert r.status_code == 200, (p.name, r.content)
            assert p.hidden not in r.content.decode(), (p.name, path)
            data = r.json()
            assert verdict(data["filtered"], data["filter_labels"]) == expected(p), p.name
            assert data["verification"]["ok"] is True, p.name  # over the stored bytes
            assert data["body_hash"] == f"sha256:{e.body_hash}"


def test_the_ui_entry_page_shows_each_row_filtered_and_says_why(planted, keys):
    client = Client()
    client.force_login(keys["operator"])
    for i, p in enumerate(SECRETS):
        e = entry_of(planted, i)
        r = client.get(f"/e/sha256:{e.entry_hash}/")
        assert r.status_code == 200, p.name
        html = r.content.decode()
        assert p.hidden not in html, p.name
        assert 'id="filtered-note"' in html and f"{p.label}" in html, p.name
        assert "hash verified" in html, p.name
        # the chunk a support link highlights is shown filtered too
        r = client.get(f"/e/sha256:{e.entry_hash}/?chunk=0")
        assert p.hidden not in r.content.decode(), p.name
    timeline = client.get("/t/acme/secrets/main/main/").content.decode()
    assert not [p.name for p in SECRETS if p.hidden in timeline]


def test_the_raw_read_is_unfiltered_for_an_admin_audited_and_refused_to_a_client_key(planted, keys):
    for i, p in enumerate(SECRETS):
        e = entry_of(planted, i)
        before = AuditEvent.objects.filter(action="entry.read_raw").count()
        r = _get(f"/entries/sha256:{e.entry_hash}/raw", keys["admin_key"])
        assert r.status_code == 200, (p.name, r.content)
        data = r.json()
        assert p.hidden in json.loads(data["body"])["output"], p.name
        assert data["body"].encode() == e.body.encode() and data["hash_verified"] is True
        assert AuditEvent.objects.filter(action="entry.read_raw").count() == before + 1
        event = AuditEvent.objects.filter(action="entry.read_raw").latest("pk")
        assert event.actor == keys["admin"] and event.object_id == f"sha256:{e.entry_hash}"
        assert event.details["via"] == "api"

        refused = _get(f"/entries/sha256:{e.entry_hash}/raw", keys["client"])
        assert refused.status_code == 403, p.name
        assert refused.json()["code"] == "forbidden"
        assert p.hidden not in refused.content.decode()
    denied = AuditEvent.objects.filter(action="entry.read_raw.denied")
    assert denied.count() == len(SECRETS)
    assert denied.first().actor is None and denied.first().details["key"]


def test_the_raw_ui_page_is_for_admins_only_and_each_view_is_logged(planted, keys):
    e = entry_of(planted, 0)
    admin = Client()
    admin.force_login(keys["admin"])
    page = admin.get(f"/e/sha256:{e.entry_hash}/raw/")
    assert page.status_code == 200 and SECRETS[0].hidden in page.content.decode()
    assert AuditEvent.objects.filter(action="entry.read_raw", actor=keys["admin"]).count() == 1
    operator = Client()
    operator.force_login(keys["operator"])
    assert operator.get(f"/e/sha256:{e.entry_hash}/raw/").status_code == 403
    assert AuditEvent.objects.filter(
        action="entry.read_raw.denied", actor=keys["operator"]
    ).exists()


def test_export_keeps_the_stored_bytes_and_needs_the_raw_read_role(planted, keys):
    out = io.BytesIO()
    session_export(session=planted.session, out=out, actor=keys["admin"])
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    bodies = [r["body"] for r in records if r["type"] == "entry"]
    assert all(p.hidden in "".join(bodies) for p in SECRETS)  # re-importable hash for hash
    with pytest.raises(RawReadDenied):
        session_export(session=planted.session, out=io.BytesIO(), actor=keys["operator"])
    assert AuditEvent.objects.filter(action="session.export_raw.denied").count() == 1


def test_the_context_builders_frontend_view_gives_the_same_verdict(planted, keys):
    r = Client().post(
        "/api/v1/sessions/secrets/context",
        json.dumps({"working_budget": 200_000, "hard_limit": 270_000, "views": ["frontend"]}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {keys['client']}",
    )
    assert r.status_code == 200, r.content
    view = r.json()["frontend_view"]
    by_seq = {item["seq"]: item for item in view["items"]}
    for i, p in enumerate(SECRETS):
        item = by_seq[seq_of(i)]
        assert p.hidden not in item["text"], p.name
        assert verdict(item.get("filtered", False), item.get("labels", [])) == expected(p), p.name
    assert not [p.name for p in SECRETS if p.hidden in r.content.decode()]


def test_typed_thinking_blocks_are_hidden_on_the_page_and_in_the_api(planted, keys):
    thought = "the staging database is still broken, do not tell anyone"
    journal_append(
        journal=planted,
        items=[
            ParsedEntry(
                kind="message",
                role="assistant",
                content={"text": "Done.", "blocks": [{"type": "thinking", "thinking": thought}]},
            )
        ],
    )
    e = Entry.objects.filter(journal=planted).latest("seq")
    assert thought in e.body  # stored as given
    data = _get(f"/entries/sha256:{e.entry_hash}", keys["client"]).json()
    assert thought not in json.dumps(data)
    assert verdict(data["filtered"], data["filter_labels"]) == (True, frozenset({"reasoning"}))
    client = Client()
    client.force_login(keys["operator"])
    html = client.get(f"/e/sha256:{e.entry_hash}/?chunk=0").content.decode()
    assert thought not in html and "filtered:</strong> reasoning" in html
    assert "hash verified" in html


def test_a_secret_straddling_a_chunk_boundary_never_shows_in_any_chunk(db, settings):
    settings.JOURNAL_CHUNK_BYTES = 64
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key="small"))
    text = "x" * 40 + f" aws configure set aws_secret_access_key {AWS} " + "y" * 80
    journal_append(journal=journal, items=[message("assistant", text)])
    e = Entry.objects.get(journal=journal, seq=1)
    assert e.chunks.count() >= 3
    user = UserFactory(username="otto")
    Membership.objects.create(user=user, tenant=tenant, role=Membership.Role.OPERATOR)
    client = Client()
    client.force_login(user)
    for n in range(e.chunks.count()):
        html = client.get(f"/e/sha256:{e.entry_hash}/?chunk={n}").content.decode()
        assert all(piece not in html for piece in (AWS[:12], AWS[12:24], AWS[-12:])), n
        assert html.count("[filtered: aws-secret-key]") == 2  # the text and the body


def test_the_model_view_and_debug_trace_hold_no_planted_secret_or_hidden_reasoning(planted, keys):
    """What leaves for the model (and what operators see of it) gets the same verdict: every
    row filtered, hidden reasoning in assistant text left out; pins stay verbatim."""
    journal_append(
        journal=planted,
        items=[message("assistant", "<thinking>private plan: skip the review</thinking>Done.")],
    )
    r = Client().post(
        "/api/v1/sessions/secrets/context",
        json.dumps({"working_budget": 200_000, "hard_limit": 270_000, "views": ["model", "debug"]}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {keys['client']}",
    )
    assert r.status_code == 200, r.content
    body = r.json()
    assert not body.get("frontend_view"), "only the views asked for"
    sent = json.dumps(body.get("model_view")) + json.dumps(body.get("debug_trace"))
    assert [p.name for p in SECRETS if p.hidden in sent] == []
    assert "private plan" not in sent and "[filtered: reasoning]" in sent
    assert "Check the deployment configuration." in sent  # the pin, verbatim


def test_a_fold_its_loss_report_and_its_receipt_hold_no_planted_secret(planted):
    """The fold's manifest (loss report: lost paths, commands, numbers), its facts and the
    recovery receipt written before it quote the journal filtered, like every other surface."""
    from ledger_app.services import ledger_fold
    from recovery_app.models import Receipt

    result = ledger_fold(journal=planted, writer="mechanical")
    stored = json.dumps(result.fold.manifest) + json.dumps(
        [f for f in result.fold.state_dict["facts"].values() if not f.get("pin")]
    )
    stored += json.dumps(
        [(r.trigger, r.queries, r.claims, r.reads) for r in Receipt.objects.filter(journal=planted)]
    )
    assert [p.name for p in SECRETS if p.hidden in stored] == []
