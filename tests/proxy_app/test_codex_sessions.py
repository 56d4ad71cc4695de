"""Codex through the proxy: its own session id (the ``session_id`` header, ``conversation_id``
in older versions) names the automatic session, so two Codex sessions that begin alike are
two sessions and one whose history changes at its start stays one."""

from __future__ import annotations

import re

import pytest
from django.test import RequestFactory

from journal_app.models import Session
from journal_app.schemas import SCOPE_PART
from proxy_app.services.scope import codex_session_id, runtime_session_key
from tests.proxy_app.conftest import entries
from tests.proxy_app.test_responses import FIRST, _codex_body, _stream

ONE = "0199a213-81c0-7800-8aa1-bbab2a035a53"
TWO = "0199a214-02d7-7c31-9d1e-5f0c64b1e2aa"


def test_two_codex_sessions_with_the_same_first_message_are_two_sessions(
    live_server, key, upstream
):
    upstream.push(text="Two files.")
    upstream.push(text="Three files.")

    first, _ = _stream(live_server, key, _codex_body(FIRST), session_id=ONE)
    second, _ = _stream(live_server, key, _codex_body(FIRST), session_id=TWO)

    assert first.status_code == second.status_code == 200
    assert first.headers["X-Ledgerkeep-Session"] == f"px-codex-{ONE}"
    assert second.headers["X-Ledgerkeep-Session"] == f"px-codex-{TWO}"
    assert [e.text for e in entries(f"px-codex-{ONE}")][-1] == "Two files."
    assert [e.text for e in entries(f"px-codex-{TWO}")][-1] == "Three files."
    assert (
        not Session.objects.filter(key__startswith="px-")
        .exclude(key__startswith="px-codex-")
        .exists()
    )


def test_one_codex_session_whose_history_is_replaced_stays_one_session(live_server, key, upstream):
    """Codex compacts a long session by replacing its history: the first messages differ,
    which a key derived from them would file as another session."""
    upstream.push(text="Two files.")
    upstream.push(text="Continuing.")
    first, _ = _stream(live_server, key, _codex_body(FIRST), session_id=ONE)
    compacted = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Summary so far: listed the files."}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go on."}]},
    ]
    second, _ = _stream(live_server, key, _codex_body(compacted), session_id=ONE)

    assert first.headers["X-Ledgerkeep-Session"] == second.headers["X-Ledgerkeep-Session"]
    assert Session.objects.filter(tenant__slug="acme").count() == 1
    # the replaced history is a branch of the one session, never a rewrite of it
    assert second.headers["X-Ledgerkeep-Branch"] != "main"
    assert [e.text for e in entries(f"px-codex-{ONE}")][-1] == "Two files."


def test_older_codex_sends_conversation_id_and_the_session_header_still_wins(
    live_server, key, upstream
):
    upstream.push(text="One.")
    upstream.push(text="Two.")
    older, _ = _stream(live_server, key, _codex_body(FIRST), conversation_id=ONE)
    named, _ = _stream(
        live_server,
        key,
        _codex_body(FIRST),
        session_id=TWO,
        **{"X-Ledgerkeep-Session": "mine"},
    )
    assert older.headers["X-Ledgerkeep-Session"] == f"px-codex-{ONE}"
    assert named.headers["X-Ledgerkeep-Session"] == "mine"
    assert not Session.objects.filter(key=f"px-codex-{TWO}").exists()


def test_a_call_without_a_codex_id_keeps_its_derived_session(live_server, key, upstream):
    upstream.push(text="A.")
    upstream.push(text="B.")
    first, _ = _stream(live_server, key, _codex_body(FIRST))
    again, _ = _stream(live_server, key, _codex_body(FIRST), session_id="")  # blank
    session = first.headers["X-Ledgerkeep-Session"]
    assert session.startswith("px-") and not session.startswith("px-codex-")
    assert again.headers["X-Ledgerkeep-Session"] == session


@pytest.mark.parametrize(
    ("runtime_id", "expected"),
    [
        (ONE, f"px-codex-{ONE}"),
        ("thread.7_b", "px-codex-thread.7_b"),
    ],
)
def test_a_clean_id_is_the_key_as_it_is(runtime_id, expected):
    assert runtime_session_key(runtime_id) == expected


def test_ids_a_key_cannot_hold_get_a_hash_and_never_meet():
    slash, colon = runtime_session_key("a/b"), runtime_session_key("a:b")
    assert slash.startswith("px-codex-a-b-") and colon.startswith("px-codex-a-b-")
    assert slash != colon
    long = runtime_session_key("x" * 200)
    assert len(long) == 100 and long.startswith("px-codex-xxx")
    assert long != runtime_session_key("x" * 201)
    for key in (slash, colon, long, runtime_session_key("é")):
        assert re.fullmatch(SCOPE_PART, key), key


def test_a_wsgi_request_carries_the_id_in_meta():
    factory = RequestFactory()
    assert codex_session_id(factory.post("/", headers={"session_id": ONE})) == ONE
    assert codex_session_id(factory.post("/", headers={"conversation_id": TWO})) == TWO
    assert codex_session_id(factory.post("/")) is None
