"""Bad input on every write endpoint (docs/design.md section 9): the documented error,
and nothing written.

The four writes: append entries, import a transcript (multipart), queue a fold, review a
retirement. Each gets malformed JSON, wrong types, unknown fields, an oversized body and a
lone UTF-16 surrogate; a 280,000-character message is accepted where messages go.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from journal_app.models import Artifact, Chunk, Entry, Journal, Session
from ledger_app.models import Fold, RetirementRequest, TaskRun
from tests.api.conftest import Api, pending_retirement

pytestmark = pytest.mark.django_db

APPEND = "/sessions/s1/main/main/entries"
FOLDS = "/sessions/perm/main/main/folds"
LONG = 280_000


def _snapshot() -> dict[str, Any]:
    return {
        "sessions": Session.objects.count(),
        "journals": list(Journal.objects.order_by("pk").values_list("head_seq", "head_hash")),
        "entries": Entry.objects.count(),
        "chunks": Chunk.objects.count(),
        "artifacts": Artifact.objects.count(),
        "folds": Fold.objects.count(),
        "tasks": TaskRun.objects.count(),
        "retirements": list(RetirementRequest.objects.values_list("status", flat=True)),
    }


@pytest.fixture
def world(tenant):
    """A folded journal with a pending retirement: something every write could damage."""
    _, retirement, _ = pending_retirement(tenant)
    return retirement


def _message(text: str = "hello") -> dict[str, Any]:
    return {"kind": "message", "role": "user", "content": {"text": text}}


def _json_writes(world) -> dict[str, tuple[Callable[[Api], Api], str, dict[str, Any]]]:
    review = f"/retirements/{world.pk}/review"
    return {
        "append": (lambda a: a, APPEND, {"start_seq": 1, "entries": [_message()]}),
        "fold": (lambda a: a, FOLDS, {"upto": 3}),
        "review": (lambda a: a, review, {"decision": "approve", "comment": "ok"}),
    }


WRITES = ["append", "fold", "review"]


def _caller(name: str, api: Api, reviewer_api: Api) -> Api:
    return reviewer_api if name == "review" else api


def _assert_error(r, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.content
    body = r.json()
    assert set(body) == {"code", "message", "field", "entry"}
    assert body["code"] == code, body
    return body


@pytest.mark.parametrize("name", WRITES)
@pytest.mark.parametrize(
    "raw",
    [
        b'{"start_seq": 1, "entries": [',
        b"{'single': 'quotes'}",
        b'{"upto": NaN}',
        b"\xff\xfe not utf-8",
    ],
    ids=["truncated", "single-quotes", "nan", "not-utf8"],
)
def test_malformed_json_is_400_and_writes_nothing(name, raw, world, api, reviewer_api):
    _, path, _ = _json_writes(world)[name]
    before = _snapshot()

    r = _caller(name, api, reviewer_api).post_raw(path, raw)

    body = _assert_error(r, 400, "malformed_json")
    assert body["message"].startswith(("malformed JSON", "the body is not valid UTF-8"))
    assert _snapshot() == before


WRONG_TYPES = {
    "append": [
        ({"start_seq": "1", "entries": [_message()]}, "start_seq"),
        ({"start_seq": 1, "entries": {"kind": "message"}}, "entries"),
        ({"start_seq": 1, "entries": [{**_message(), "kind": 7}]}, "entries[0].kind"),
        ({"start_seq": 1, "entries": [{**_message(), "derived": "yes"}]}, "entries[0].derived"),
        ({"start_seq": 1, "entries": [{**_message(), "content": "hi"}]}, "entries[0].content"),
        ({"start_seq": 0, "entries": [_message()]}, "start_seq"),
        ({"start_seq": 1, "entries": []}, "entries"),
        ({"entries": [_message()]}, "start_seq"),
        ([_message()], ""),
    ],
    "fold": [({"upto": "3"}, "upto"), ({"upto": -1}, "upto"), ({"upto": 2.5}, "upto")],
    "review": [
        ({"decision": True}, "decision"),
        ({"decision": "maybe"}, "decision"),
        ({"decision": "approve", "comment": ["no"]}, "comment"),
        ({"comment": "no decision"}, "decision"),
    ],
}


@pytest.mark.parametrize(
    ("name", "body", "field"),
    [(name, body, field) for name, cases in WRONG_TYPES.items() for body, field in cases],
)
def test_wrong_types_are_422_naming_the_field(name, body, field, world, api, reviewer_api):
    _, path, _ = _json_writes(world)[name]
    before = _snapshot()

    r = _caller(name, api, reviewer_api).post(path, body)

    result = _assert_error(r, 422, "validation_error")
    assert (result["field"] or "") == field
    assert _snapshot() == before


@pytest.mark.parametrize("name", WRITES)
def test_unknown_fields_are_422_and_write_nothing(name, world, api, reviewer_api):
    _, path, body = _json_writes(world)[name]
    before = _snapshot()

    r = _caller(name, api, reviewer_api).post(path, {**body, "priority": "high"})

    result = _assert_error(r, 422, "validation_error")
    assert result["field"] == "priority"
    assert "unknown field" in result["message"]
    assert _snapshot() == before


def test_an_unknown_field_inside_an_entry_names_the_entry(world, api):
    before = _snapshot()

    r = api.post(APPEND, {"start_seq": 1, "entries": [_message(), {**_message(), "seq": 2}]})

    result = _assert_error(r, 422, "validation_error")
    assert (result["field"], result["entry"]) == ("entries[1].seq", "entries[1]")
    assert _snapshot() == before


@pytest.mark.parametrize("name", WRITES)
def test_an_oversized_body_is_413_and_writes_nothing(name, world, api, reviewer_api, settings):
    settings.API_MAX_BODY_BYTES = 2_000
    _, path, body = _json_writes(world)[name]
    padded = json.dumps(body)[:-1] + ', "pad": "' + "x" * 3_000 + '"}'
    before = _snapshot()

    r = _caller(name, api, reviewer_api).post_raw(path, padded)

    result = _assert_error(r, 413, "payload_too_large")
    assert "limit is 2000 bytes" in result["message"]
    assert _snapshot() == before


@pytest.mark.parametrize("name", WRITES)
@pytest.mark.parametrize(
    "escape",
    ["\\ud800", "\\udfff", "x\\ud83d", "\\ude00\\ud83d"],
    ids=["high", "low", "tail", "swapped"],
)
def test_a_lone_surrogate_is_400_invalid_unicode_and_writes_nothing(
    name, escape, world, api, reviewer_api
):
    _, path, body = _json_writes(world)[name]
    raw = json.dumps({**body, "sneaky": "@@"}).replace("@@", escape)
    if name == "append":
        raw = json.dumps({"start_seq": 1, "entries": [_message("ok"), _message("@@")]}).replace(
            "@@", escape
        )
    before = _snapshot()

    r = _caller(name, api, reviewer_api).post_raw(path, raw)

    result = _assert_error(r, 400, "invalid_unicode")
    expected = "entries[1].content.text" if name == "append" else "sneaky"
    assert result["field"] == expected
    assert _snapshot() == before


def test_a_lone_surrogate_in_an_object_key_is_refused(world, api):
    raw = '{"start_seq": 1, "entries": [{"kind": "message", "role": "user", "content": {"\\ud800": "k"}}]}'

    r = api.post_raw(APPEND, raw)

    assert _assert_error(r, 400, "invalid_unicode")["field"] == "entries[0].content.(key)"


def test_a_valid_surrogate_pair_is_stored_verbatim(world, api):
    raw = json.dumps({"start_seq": 1, "entries": [_message("@@")]}).replace("@@", "\\ud83d\\ude00")

    r = api.post_raw(APPEND, raw)

    assert r.status_code == 200, r.content
    assert Entry.objects.get(journal__session__key="s1").text == "\U0001f600"


def test_a_280000_character_message_is_appended_verbatim_and_pinned_whole(
    world, api, django_capture_on_commit_callbacks
):
    text = ("All refunds above 500 EUR need a second approver. " * 6000)[:LONG]

    with django_capture_on_commit_callbacks(execute=True):  # the auto-scheduled fold runs
        r = api.post(APPEND, {"start_seq": 1, "entries": [_message(text)]})

    assert r.status_code == 200, r.content
    entry = Entry.objects.get(journal__session__key="s1")
    assert entry.text == text and len(entry.text) == LONG
    assert api.get(APPEND + "/1").json()["content"]["text"] == text
    ledger = api.get("/sessions/s1/main/main/ledger").json()
    assert [f["text"] for f in ledger["facts"] if f["pin"]] == [text]


# --- the multipart import ------------------------------------------------------------

IMPORT = "/sessions/upload/main/main/import"


def _transcript(tmp_path, text: str, name: str = "chat.json") -> Any:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_import_of_malformed_json_is_422_naming_file_and_line(world, api, tmp_path):
    path = _transcript(tmp_path, '[{"role": "user", "content": "hi"},\n {"role": ')
    before = _snapshot()

    with path.open("rb") as fh:
        r = api.upload(IMPORT, {"file": fh})

    body = _assert_error(r, 422, "invalid_transcript")
    assert body["message"].startswith("chat.json, line 2")
    assert _snapshot() == before


def test_import_of_a_malformed_multipart_body_is_refused(world, api):
    before = _snapshot()

    no_boundary = api.post_raw(IMPORT, b"--xx\r\nnot a part", content_type="multipart/form-data")
    broken_part = api.post_raw(
        IMPORT, b"--xx\r\nnot a part", content_type="multipart/form-data; boundary=xx"
    )

    assert "boundary" in _assert_error(no_boundary, 400, "malformed_request")["message"]
    assert _assert_error(broken_part, 422, "validation_error")["field"] == "file"
    assert _snapshot() == before


def test_import_with_wrong_types_is_422(world, api, tmp_path):
    path = _transcript(tmp_path, json.dumps([{"role": "user", "content": "hi"}]))
    before = _snapshot()

    with path.open("rb") as fh:
        unknown_format = api.upload(IMPORT, {"file": fh, "format": "word-document"})
    no_file = api.upload(IMPORT, {"format": "openai-chat"})
    json_instead = api.post(IMPORT, {"file": "[]"})

    assert _assert_error(unknown_format, 422, "validation_error")["field"] == "format"
    assert _assert_error(no_file, 422, "validation_error")["field"] == "file"
    assert _assert_error(json_instead, 422, "validation_error")["field"] == "file"
    assert _snapshot() == before


def test_import_with_an_unknown_field_is_422(world, api, tmp_path):
    path = _transcript(tmp_path, json.dumps([{"role": "user", "content": "hi"}]))
    before = _snapshot()

    with path.open("rb") as fh:
        r = api.upload(IMPORT, {"file": fh, "lane": "other"})

    body = _assert_error(r, 422, "validation_error")
    assert body["field"] == "lane"
    assert _snapshot() == before


def test_import_of_an_oversized_file_is_413(world, api, tmp_path, settings):
    settings.API_MAX_BODY_BYTES = 10_000
    path = _transcript(tmp_path, json.dumps([{"role": "user", "content": "x" * 20_000}]))
    before = _snapshot()

    with path.open("rb") as fh:
        r = api.upload(IMPORT, {"file": fh})

    _assert_error(r, 413, "payload_too_large")
    assert _snapshot() == before


def test_import_of_a_lone_surrogate_is_refused_and_writes_nothing(world, api, tmp_path):
    path = _transcript(
        tmp_path,
        '[{"role": "user", "content": "bad \\ud800 here"}, {"role": "assistant", "content": "ok"}]',
    )
    before = _snapshot()

    with path.open("rb") as fh:
        r = api.upload(IMPORT, {"file": fh})

    body = _assert_error(r, 422, "invalid_transcript")
    assert "surrogate" in body["message"] and body["entry"] == "index 0"
    assert _snapshot() == before


def test_import_of_a_280000_character_message_is_accepted(world, api, tmp_path, settings):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    text = ("Do not deploy on Fridays; ask the release manager first. " * 5000)[:LONG]
    path = _transcript(
        tmp_path,
        json.dumps([{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]),
    )

    with path.open("rb") as fh:
        r = api.upload(IMPORT, {"file": fh})

    assert r.status_code == 200, r.content
    entry = Entry.objects.get(journal__session__key="upload", seq=1)
    assert entry.text == text
