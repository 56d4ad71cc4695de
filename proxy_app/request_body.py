"""The body of a proxied call, read and checked before anything is journaled or forwarded.

:func:`request_body` checks the size before reading, the nesting depth before parsing
(:func:`proxy_app.bodies.json_depth`), the JSON numbers while parsing (no ``NaN``, no float
out of range, no integer over :data:`MAX_INT_DIGITS` digits) and the strings after it (no NUL,
no lone surrogate: :func:`proxy_app.bodies.bad_text`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from journal_app.auth import PayloadTooLarge
from journal_app.errors import MalformedBody
from proxy_app.bodies import bad_text, json_depth, may_hold_bad_text
from proxy_app.errors import BodyRefused


class _NumberRefused(ValueError):
    """A JSON number no provider takes: ``NaN``/``Infinity``, a float out of range
    (``1e999999``), an integer over :data:`MAX_INT_DIGITS` digits."""


#: the longest integer literal a body may hold (Python's own limit for converting one is 4300)
MAX_INT_DIGITS = 100


def _not_a_number(name: str) -> Any:
    raise _NumberRefused(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NumberRefused(f"the number {text[:40]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _NumberRefused(
            f"an integer of {len(text.lstrip('-')):,} digits is out of range "
            f"(at most {MAX_INT_DIGITS})"
        )
    return int(text)


def request_body(request: HttpRequest) -> Any:
    """The parsed body: size (before reading), depth (before parsing), then its strings.

    Raises:
        PayloadTooLarge: over ``API_MAX_BODY_BYTES`` (HTTP 413).
        BodyRefused: deeper than ``PROXY_MAX_JSON_DEPTH``, a NUL / lone surrogate, or a
            number out of range (``NaN``, ``1e999999``, an integer of over 100 digits) (422).
        MalformedBody: not UTF-8 JSON (HTTP 400).
    """
    limit = settings.API_MAX_BODY_BYTES
    try:
        raw = request.body
    except RequestDataTooBig:
        raise PayloadTooLarge(limit + 1, limit) from None
    if len(raw) > limit:
        raise PayloadTooLarge(len(raw), limit)
    depth = json_depth(raw)
    if depth > settings.PROXY_MAX_JSON_DEPTH:
        raise BodyRefused(
            f"the body nests {depth} levels deep; the limit is "
            f"{settings.PROXY_MAX_JSON_DEPTH} (PROXY_MAX_JSON_DEPTH); nothing forwarded"
        )
    try:
        body = json.loads(
            raw.decode("utf-8"),
            parse_constant=_not_a_number,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except _NumberRefused as exc:
        raise BodyRefused(f"{exc}; nothing forwarded") from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise MalformedBody("the request body is not UTF-8 JSON; nothing forwarded") from None
    bad = bad_text(body) if may_hold_bad_text(raw) else None
    if bad is not None:
        raise BodyRefused(
            f"{bad[0] or 'the body'} holds {bad[1]}, which cannot be journaled; nothing forwarded",
            field=bad[0] or None,
        )
    return body
