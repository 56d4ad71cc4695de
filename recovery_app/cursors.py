"""HMAC-signed pagination cursors for the agent's search tool (docs/design.md section 7). Pure.

A cursor is ``<payload>.<signature>``, both base64url without padding. The payload is the
RFC 8785 canonical JSON of ``{"v", "scope", "revision", "query", "position", "expires"}``
and the signature HMAC-SHA256 over the payload bytes with a key derived from the
project's secret (:func:`derive_key`). :func:`cursor_open` refuses, naming the reason:

* a cursor that does not decode, or whose signature does not match (one byte changed);
* a cursor past its expiry (stale);
* a cursor signed for another scope (tenant/session/lane/branch: reused in another
  session or lane) or for another query.

The signature is checked before the payload is parsed, with a constant-time comparison.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass

import rfc8785

from journal_app.errors import DomainError

VERSION = 1
_CONTEXT = b"ledgerkeep.recovery.cursor.v1"


class CursorRefused(DomainError, ValueError):
    """A cursor that may not be used. ``reason``: tampered, expired, scope or query (HTTP 400)."""

    status = 400
    code = "cursor_refused"

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        super().__init__(f"cursor refused ({reason}): {detail}", field="cursor")


@dataclass(frozen=True)
class Cursor:
    """What a cursor carries: the frozen scope and revision, the query and the position.

    ``position`` is the last seq returned (the next page starts after it); ``expires`` is
    a Unix time in seconds.
    """

    scope: str
    revision: int
    query: str
    position: int
    expires: int


def derive_key(secret: str) -> bytes:
    """A key for cursors only: HMAC-SHA256(secret, context), so it is not the secret itself."""
    return hmac.new(secret.encode("utf-8"), _CONTEXT, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def cursor_sign(key: bytes, cursor: Cursor) -> str:
    """Return the signed cursor string for ``cursor``."""
    payload = rfc8785.dumps(
        {
            "v": VERSION,
            "scope": cursor.scope,
            "revision": cursor.revision,
            "query": cursor.query,
            "position": cursor.position,
            "expires": cursor.expires,
        }
    )
    signature = hmac.new(key, payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(signature)}"


def cursor_open(key: bytes, token: str, *, scope: str, query: str, now: float) -> Cursor:
    """Verify ``token`` and return its :class:`Cursor`.

    Args:
        key: from :func:`derive_key`.
        token: the cursor string a client sent back.
        scope: the caller's scope label (``tenant/session/lane/branch``), from credentials.
        query: the caller's normalised query text.
        now: the current Unix time in seconds.

    Raises:
        CursorRefused: ``tampered`` (undecodable or bad signature), ``expired``, ``scope``
            (signed for another scope), ``query`` (signed for another query).
    """
    try:
        head, _, tail = token.partition(".")
        payload, signature = _unb64(head), _unb64(tail)
    except (binascii.Error, ValueError):
        raise CursorRefused("tampered", "the cursor does not decode") from None
    if _b64(payload) != head or _b64(signature) != tail:
        # base64 leaves spare bits in the last character: a changed byte must not slip by.
        raise CursorRefused("tampered", "the cursor is not canonically encoded")
    expected = hmac.new(key, payload, hashlib.sha256).digest()
    if not tail or not hmac.compare_digest(signature, expected):
        raise CursorRefused("tampered", "the signature does not match")
    try:
        data = json.loads(payload)
        cursor = Cursor(
            scope=str(data["scope"]),
            revision=int(data["revision"]),
            query=str(data["query"]),
            position=int(data["position"]),
            expires=int(data["expires"]),
        )
        if data.get("v") != VERSION:
            raise ValueError("version")
    except (ValueError, KeyError, TypeError):
        raise CursorRefused("tampered", "the payload is not a cursor of this version") from None
    if now >= cursor.expires:
        raise CursorRefused("expired", f"expired {int(now - cursor.expires)} seconds ago")
    if not hmac.compare_digest(cursor.scope.encode(), scope.encode()):
        raise CursorRefused("scope", "signed for another scope than the caller's")
    if cursor.query != query:
        raise CursorRefused("query", "signed for another query")
    return cursor
