"""Signed pagination cursors (pure): expired, changed, reused elsewhere: each refused."""

import pytest

from recovery_app.cursors import Cursor, CursorRefused, cursor_open, cursor_sign, derive_key

KEY = derive_key("test-secret")
SCOPE = "acme/s1/main/main"
C = Cursor(scope=SCOPE, revision=90, query='"0042 add refund index"', position=14, expires=1000)


def test_a_cursor_opens_with_its_scope_revision_query_and_position():
    token = cursor_sign(KEY, C)
    assert cursor_open(KEY, token, scope=SCOPE, query=C.query, now=999) == C


def test_an_expired_cursor_is_refused():
    with pytest.raises(CursorRefused) as exc:
        cursor_open(KEY, cursor_sign(KEY, C), scope=SCOPE, query=C.query, now=1000)
    assert exc.value.reason == "expired"


@pytest.mark.parametrize("index", [0, 10, 40, -1, -20])
def test_a_cursor_with_one_byte_changed_is_refused(index):
    token = cursor_sign(KEY, C)
    i = index % len(token)
    swapped = "A" if token[i] != "A" else "B"
    changed = token[:i] + swapped + token[i + 1 :]
    with pytest.raises(CursorRefused) as exc:
        cursor_open(KEY, changed, scope=SCOPE, query=C.query, now=0)
    assert exc.value.reason == "tampered"


def test_every_single_character_change_is_refused():
    token = cursor_sign(KEY, C)
    for i in range(len(token)):
        for ch in "A_.-z":
            if token[i] == ch:
                continue
            with pytest.raises(CursorRefused):
                cursor_open(KEY, token[:i] + ch + token[i + 1 :], scope=SCOPE, query=C.query, now=0)


def test_a_cursor_reused_in_another_session_or_lane_is_refused():
    token = cursor_sign(KEY, C)
    for other in ("acme/s2/main/main", "acme/s1/worker/main", "other/s1/main/main"):
        with pytest.raises(CursorRefused) as exc:
            cursor_open(KEY, token, scope=other, query=C.query, now=0)
        assert exc.value.reason == "scope"


def test_a_cursor_for_another_query_or_key_is_refused():
    token = cursor_sign(KEY, C)
    with pytest.raises(CursorRefused) as exc:
        cursor_open(KEY, token, scope=SCOPE, query="other", now=0)
    assert exc.value.reason == "query"
    with pytest.raises(CursorRefused) as exc:
        cursor_open(derive_key("another-secret"), token, scope=SCOPE, query=C.query, now=0)
    assert exc.value.reason == "tampered"


def test_garbage_is_refused_as_tampered():
    for token in ("", ".", "abc", "abc.def", "!!!.???"):
        with pytest.raises(CursorRefused) as exc:
            cursor_open(KEY, token, scope=SCOPE, query=C.query, now=0)
        assert exc.value.reason == "tampered"


def test_the_key_is_derived_not_the_secret_itself():
    assert derive_key("s") != b"s" and len(derive_key("s")) == 32
