"""The server refuses what the OpenAPI document refuses, and no less (issue 16, item 10).

The document is JSON Schema 2020-12: ``5668.0`` is an integer there, so an integer field
takes it; a fraction, a numeric string or a boolean is refused by both.
"""

from __future__ import annotations

import jsonschema
import pytest

from config.api import api as ninja_api
from journal_app.models import Entry
from tests.api.conftest import pending_retirement

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
