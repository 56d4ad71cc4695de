"""The server refuses what the OpenAPI document refuses, and no less.

The document is JSON Schema 2020-12: ``5668.0`` is an integer there, so an integer field
takes it; a fraction, a numeric string or a boolean is refused by both.
"""

from __future__ import annotations

import jsonschema
import pytest

from config.api import api as ninja_api
from journal_app.formats.base import message
from journal_app.models import Entry
from tests.api.conftest import pending_retirement
from tests.factories import journal_build

pytestmark = pytest.mark.django_db

APPEND = "/sessions/s1/main/main/entries"
APPEND_OP = "/api/v1/sessions/{session}/{lane}/{branch}/entries"
MESSAGE = {"kind": "message", "role": "user", "content": {"text": "hello"}}


def _body_schema(path: str, method: str = "post") -> dict:
    doc = ninja_api.get_openapi_schema()
    op = doc["paths"][path][method]
    schema = op["requestBody"]["content"]["application/json"]["schema"]
    return {**schema, "components": doc["components"]}


@pytest.mark.parametrize(
    ("start_seq", "status"),
    [(1, 200), (1.0, 200), (1e0, 200), (1.5, 422), ("1", 422), (True, 422)],
)
def test_an_integer_field_takes_what_the_schema_takes(api, start_seq, status):
    body = {"start_seq": start_seq, "entries": [MESSAGE]}
    valid = jsonschema.Draft202012Validator(_body_schema(APPEND_OP)).is_valid(body)

    r = api.post(APPEND, body)

    assert r.status_code == status, r.content
    assert valid == (status == 200)
    assert Entry.objects.count() == (1 if status == 200 else 0)


def test_an_integral_float_past_the_maximum_is_refused_by_both(api):
    body = {"start_seq": 2.0**63, "entries": [MESSAGE]}
    assert not jsonschema.Draft202012Validator(_body_schema(APPEND_OP)).is_valid(body)
    r = api.post(APPEND, body)
    assert r.status_code == 422 and r.json()["field"] == "start_seq"


def test_a_fold_request_takes_an_integral_upto(tenant, api):
    pending_retirement(tenant)
    ok = api.post("/sessions/perm/main/main/folds", {"upto": 3.0})
    bad = api.post("/sessions/perm/main/main/folds", {"upto": 2.5})
    assert ok.status_code < 300, ok.content
    assert bad.status_code == 422 and bad.json()["field"] == "upto"


@pytest.mark.parametrize(
    "path",
    [
        "/sessions/s1/main/main/entries?after=1&pad=" + "x" * 5000,  # an operation
        "/sessions/" + "s" * 5000 + "/main/main/entries",  # a path no pattern takes
        "/no-such-thing/" + "x" * 5000,  # no operation at all
    ],
)
def test_an_over_long_url_is_414_in_the_error_shape(api, path):
    r = api.client.get("/api/v1" + path, **api._headers())
    assert r.status_code == 414
    body = r.json()
    assert set(body) == {"code", "message", "field", "entry"}
    assert body["code"] == "uri_too_long" and "at most 4,000" in body["message"]


def test_the_url_limit_is_a_setting(api, settings):
    settings.API_MAX_URL_BYTES = 100
    assert api.get("/sessions", pad="x" * 200).status_code == 414
    assert api.get("/sessions").status_code == 200


READ = "/api/v1/sessions/{session}/{lane}/{branch}/recovery/read"


def test_the_schema_says_a_read_names_exactly_one_of_seq_and_entry(api):
    """Two routes, each with its one required path parameter: a request the schema allows
    always names exactly one, which is what the service enforces."""
    paths = api.client.get("/api/v1/openapi.json").json()["paths"]
    reads = sorted(p for p in paths if p.startswith(READ))
    assert reads == [READ + "/entry/{entry}", READ + "/seq/{seq}"]
    for path, name in ((READ + "/seq/{seq}", "seq"), (READ + "/entry/{entry}", "entry")):
        params = {p["name"]: p for p in paths[path]["get"]["parameters"]}
        in_path = {n for n, p in params.items() if p["in"] == "path"}
        assert in_path == {"session", "lane", "branch", name}
        assert params[name]["in"] == "path" and params[name]["required"] is True
        # by entry, an optional character range (what an attachment's receipt names)
        assert {n: p["in"] for n, p in params.items() if n not in in_path} == (
            {"start": "query", "end": "query"} if name == "entry" else {}
        )
    seq = {p["name"]: p for p in paths[READ + "/seq/{seq}"]["get"]["parameters"]}["seq"]
    assert seq["schema"]["type"] == "integer" and seq["schema"]["minimum"] == 1


def test_both_read_routes_read_the_same_entry(api, tenant):
    journal = journal_build(tenant=tenant, key="s1", items=[message("user", "hello")])
    entry = Entry.objects.get(journal=journal, seq=1)
    base = "/sessions/s1/main/main/recovery/read"
    by_seq = api.get(base + "/seq/1")
    by_hash = api.get(base + f"/entry/sha256:{entry.entry_hash}")
    assert by_seq.status_code == 200, by_seq.content
    assert by_seq.json() == by_hash.json()
    assert by_seq.json()["entry"] == "sha256:" + entry.entry_hash
    assert api.get(base + "/seq/2").status_code == 404
    assert api.get(base + "/seq/0").json()["field"] == "seq"


def test_the_import_form_schema_refuses_unknown_fields_as_the_server_does(api):
    doc = api.client.get("/api/v1/openapi.json").json()
    body = doc["paths"]["/api/v1/sessions/{session}/{lane}/{branch}/import"]["post"]
    schema = body["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"file", "format"}
