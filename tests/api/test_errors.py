"""The API's error mapping (config/api.py, STYLE.md point 3): the pure surrogate scan, every
documented error code provoked through a real endpoint, every domain error class through the
one handler, and the OpenAPI document listing each status."""

from __future__ import annotations

import json

import pytest

from audit_app.services import CommentInvalid
from config.api import api as ninja_api
from config.api_body import lone_surrogate_path
from journal_app.auth import PayloadTooLarge
from journal_app.errors import DomainError, MalformedBody
from journal_app.filters import FilterError
from journal_app.schemas import ERROR_STATUSES
from journal_app.services import (
    ArtifactStoreFull,
    CommittedConnectionLost,
    CommitUnconfirmed,
    ConflictError,
    GapError,
    JournalError,
)
from ledger_app.services import FoldFailed, FoldRefused, LedgerError, ReviewError, ReviewForbidden
from recovery_app.cursors import CursorRefused
from recovery_app.lexical import QueryInvalid
from recovery_app.services import EntryNotFound, RecoveryError
from recovery_app.snapshot import Denied
from tests.api.conftest import BASE, pending_retirement

SHAPE = {"code", "message", "field", "entry"}
SCOPE = "/sessions/s1/main/main"

HIGH = json.loads('"\\ud800"')


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": [1, {"b": "fine"}]}, None),
        ("\U0001f600 a real pair", None),
        (HIGH, ""),
        ({"entries": [{"content": {"text": "ok"}}, {"content": {"text": "x" + HIGH}}]},
         "entries[1].content.text"),
        ({"a": {HIGH: 1}}, "a.(key)"),
        ([[["deep", HIGH]]], "[0][0][1]"),
        ({"first": HIGH, "second": HIGH}, "first"),
    ],
)  # fmt: skip
def test_it_finds_the_first_lone_surrogate_and_names_its_path(value, path):
    assert lone_surrogate_path(value) == path


def test_it_walks_deep_values_without_recursing():
    value: list = ["end" + HIGH]
    for _ in range(50_000):
        value = [value]

    assert lone_surrogate_path(value) == "[0]" * 50_000 + "[0]"


@pytest.mark.django_db
def test_json_nested_past_the_parser_limit_is_400(api):
    r = api.post_raw("/sessions/s1/main/main/entries", "[" * 100_000 + "]" * 100_000)

    assert r.status_code == 400
    assert r.json()["code"] == "malformed_json"


@pytest.mark.django_db
def test_an_unexpected_error_is_a_logged_json_500(api, monkeypatch, caplog):
    def broken(**kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("journal_app.api.journal_verify", broken)
    api.post("/sessions/s1/main/main/entries", {"start_seq": 1, "entries": [
        {"kind": "message", "role": "user", "content": {"text": "hi"}}
    ]})  # fmt: skip

    r = api.get("/sessions/s1/main/main/verify")

    assert r.status_code == 500
    assert r.json() == {
        "code": "internal_error",
        "message": "unexpected server error; it has been logged",
        "field": None,
        "entry": None,
    }
    assert "disk on fire" in caplog.text


@pytest.mark.django_db
def test_unknown_api_paths_answer_the_json_404(api):
    r = api.get("/no/such/operation")

    assert r.status_code == 404
    assert r.json()["code"] == "not_found"
    assert r["Content-Type"] == "application/json; charset=utf-8"


@pytest.mark.django_db
def test_a_path_parameter_outside_its_pattern_is_422(api):
    r = api.get("/sessions/bad name!")

    assert r.status_code == 422
    assert r.json()["field"] == "session"


# Every documented code, provoked through a real endpoint (the whole WSGI path) -------------


def _journal(api):
    r = api.post(SCOPE + "/entries", {"start_seq": 1, "entries": [
        {"kind": "message", "role": "user", "content": {"text": "migrate billing"}},
    ]})  # fmt: skip
    assert r.status_code == 200, r.content


def _unauthenticated(api, client, tenant, settings):
    return client.get(BASE + "/sessions")


def _malformed_json(api, client, tenant, settings):
    return api.post_raw(SCOPE + "/entries", "{not json")


def _invalid_unicode(api, client, tenant, settings):
    return api.post_raw(
        SCOPE + "/entries",
        '{"start_seq": 1, "entries": [{"kind": "message", "role": "user", '
        '"content": {"text": "\\ud800"}}]}',
    )


def _cursor_refused(api, client, tenant, settings):
    _journal(api)
    return api.get(SCOPE + "/recovery/search", q="billing", cursor="not-a-cursor")


def _forbidden(api, client, tenant, settings):
    _, req, _ = pending_retirement(tenant)
    return api.post(f"/retirements/{req.pk}/review", {"decision": "approve", "comment": "ok"})


def _not_found(api, client, tenant, settings):
    return api.get("/sessions/nobody")


def _no_operation(api, client, tenant, settings):
    return api.get("/no/such/operation")


def _method_not_allowed(api, client, tenant, settings):
    return api.client.delete(BASE + "/sessions", **api._headers())


def _conflict(api, client, tenant, settings):
    _journal(api)
    return api.post(SCOPE + "/entries", {"start_seq": 1, "entries": [
        {"kind": "message", "role": "user", "content": {"text": "something else"}},
    ]})  # fmt: skip


def _gap(api, client, tenant, settings):
    return api.post(SCOPE + "/entries", {"start_seq": 5, "entries": [
        {"kind": "message", "role": "user", "content": {"text": "x"}},
    ]})  # fmt: skip


def _too_large(api, client, tenant, settings):
    settings.API_MAX_BODY_BYTES = 100
    return api.post(SCOPE + "/entries", {"start_seq": 1, "entries": [
        {"kind": "message", "role": "user", "content": {"text": "x" * 500}},
    ]})  # fmt: skip


def _validation_error(api, client, tenant, settings):
    return api.post(SCOPE + "/entries", {"start_seq": "1", "entries": []})


def _invalid_entry(api, client, tenant, settings):
    return api.post(SCOPE + "/entries", {"start_seq": 1, "entries": [
        {"kind": "tool_result", "role": "tool", "content": {"output": "x"}},
    ]})  # fmt: skip


def _invalid_query(api, client, tenant, settings):
    _journal(api)
    return api.get(SCOPE + "/recovery/search", q="--")


REAL = [
    (_malformed_json, 400, "malformed_json"),
    (_invalid_unicode, 400, "invalid_unicode"),
    (_cursor_refused, 400, "cursor_refused"),
    (_unauthenticated, 401, "unauthenticated"),
    (_forbidden, 403, "forbidden"),
    (_not_found, 404, "not_found"),
    (_no_operation, 404, "not_found"),
    (_method_not_allowed, 405, "method_not_allowed"),
    (_conflict, 409, "conflict"),
    (_gap, 409, "gap"),
    (_too_large, 413, "payload_too_large"),
    (_validation_error, 422, "validation_error"),
    (_invalid_entry, 422, "invalid_entry"),
    (_invalid_query, 422, "invalid_query"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("provoke", "status", "code"), REAL, ids=[c for _, _, c in REAL])
def test_each_error_answers_its_status_and_code_in_the_one_shape(
    provoke, status, code, api, client, tenant, settings
):
    r = provoke(api, client, tenant, settings)

    assert r.status_code == status, r.content
    assert r["Content-Type"] == "application/json; charset=utf-8"
    body = r.json()
    assert set(body) == SHAPE
    assert body["code"] == code
    assert body["message"]


@pytest.mark.django_db
def test_a_refused_cursor_names_itself_not_malformed_request(api):
    _journal(api)

    body = api.get(SCOPE + "/recovery/search", q="billing", cursor="AAAA").json()

    assert body["code"] == "cursor_refused"
    assert body["message"].startswith("cursor refused (")
    assert body["field"] == "cursor"


@pytest.mark.django_db
def test_a_wrong_method_is_json_and_keeps_allow(api):
    r = api.client.put(BASE + SCOPE + "/entries", "{}", content_type="application/json")

    assert r.status_code == 405
    assert r.json()["code"] == "method_not_allowed"
    assert set(r["Allow"].replace(" ", "").split(",")) == {"GET", "POST"}
    assert "PUT" in r.json()["message"]


# Every domain error class, through the one DomainError handler -----------------------------

DOMAIN = [
    (JournalError("bad scope"), 422, "invalid_request", None, None),
    (ConflictError(7, "a" * 64, "b" * 64), 409, "conflict", None, "seq 7"),
    (GapError("seq 9 would leave a gap"), 409, "gap", "start_seq", None),
    (PayloadTooLarge(10, 5), 413, "payload_too_large", None, None),
    (MalformedBody("not JSON"), 400, "malformed_json", None, None),
    (FilterError(3, "x:", "unknown field"), 422, "invalid_filter", None, None),
    (LedgerError("no"), 422, "invalid_request", None, None),
    (FoldRefused("pin p1 differs"), 409, "fold_refused", None, None),
    (FoldFailed("model down", attempt=None), 503, "model_unavailable", None, None),
    (ReviewError("already approved"), 409, "review_conflict", None, None),
    (ReviewForbidden("not a reviewer"), 403, "forbidden", None, None),
    (RecoveryError("no"), 422, "invalid_request", None, None),
    (EntryNotFound("no seq 9"), 404, "not_found", None, None),
    (CursorRefused("expired", "too old"), 400, "cursor_refused", "cursor", None),
    (QueryInvalid("empty query"), 422, "invalid_query", None, None),
    (Denied("revision", "beyond the head"), 403, "forbidden", None, None),
    (CommentInvalid("a comment needs text"), 400, "invalid_comment", None, None),
    (DomainError("plain", field="f", entry="seq 1"), 400, "invalid_request", "f", "seq 1"),
    (CommitUnconfirmed("lost at commit"), 503, "commit_unconfirmed", None, None),
    (CommittedConnectionLost("committed, then lost"), 503, "committed_then_lost", None, None),
    (ArtifactStoreFull("the artifact store is full"), 507, "artifact_store_full", None, None),
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("error", "status", "code", "field", "entry"),
    DOMAIN,
    ids=[type(e).__name__ for e, *_ in DOMAIN],
)
def test_every_domain_error_maps_to_its_status_and_code(
    error, status, code, field, entry, api, monkeypatch
):
    _journal(api)

    def refuse(**kwargs):
        raise error

    monkeypatch.setattr("journal_app.api.journal_verify", refuse)

    r = api.get(SCOPE + "/verify")

    assert r.status_code == status
    assert r.json() == {"code": code, "message": str(error), "field": field, "entry": entry}


def test_the_domain_errors_share_one_root():
    for error, *_ in DOMAIN:
        assert isinstance(error, DomainError)


# The OpenAPI document lists every error status on every operation -------------------------


def test_openapi_lists_every_error_status_with_the_error_shape():
    schema = json.loads(json.dumps(ninja_api.get_openapi_schema()))  # as served: str keys
    expected = {str(s) for s in (400, 401, 403, 404, 405, 409, 413, 414, 422, 429, 503, 507)}
    assert {str(s) for s in ERROR_STATUSES} == expected
    operations = [(p, m, op) for p, ops in schema["paths"].items() for m, op in ops.items()]
    assert len(operations) > 20
    for path, method, op in operations:
        listed = set(op["responses"])
        assert expected <= listed, (method, path, expected - listed)
        error = op["responses"]["405"]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/ErrorOut"}, (method, path)
    assert set(schema["components"]["schemas"]["ErrorOut"]["properties"]) == SHAPE


@pytest.mark.django_db
def test_openapi_json_is_served_with_the_statuses(client):
    doc = client.get(BASE + "/openapi.json").json()

    search = doc["paths"]["/api/v1/sessions/{session}/{lane}/{branch}/recovery/search"]["get"]
    assert {"400", "405", "503"} <= set(search["responses"])


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/openapi.json", "/docs"])
def test_a_post_to_the_schema_or_docs_is_a_json_405_not_the_csrf_page(path):
    from django.test import Client

    r = Client(enforce_csrf_checks=True).post(
        BASE + path, data="{}", content_type="application/json"
    )

    assert r.status_code == 405, r.content[:200]
    assert r.json()["code"] == "method_not_allowed"
    assert r["Allow"] == "GET, HEAD"
