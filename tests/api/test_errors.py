"""The API's error mapping (config/api.py, STYLE.md point 3): the pure surrogate scan, and
the shapes of the errors no other test provokes."""

from __future__ import annotations

import json

import pytest

from config.api import lone_surrogate_path

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
