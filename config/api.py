"""The REST API v1: the one ``NinjaAPI``, mounted at ``/api/v1/`` (DESIGN.md sections 1 and 9).

Schema at ``/api/v1/openapi.json``, interactive docs at ``/api/v1/docs``. Every operation
authenticates with a tenant API key (``Authorization: Bearer <key>``,
:mod:`journal_app.auth`); the tenant comes from the key, never from a parameter.

Errors: one JSON shape, mapped here once (STYLE.md point 3)::

    {"code": "conflict", "message": "...", "field": "entries[2].content" | null,
     "entry": "seq 7" | "entries[2]" | "line 12" | null}

=================  ======  =====================================================
code               status  when
=================  ======  =====================================================
malformed_json     400     the body is not UTF-8 JSON (or holds NaN/Infinity)
invalid_unicode    400     a JSON string holds a lone UTF-16 surrogate (``\\ud800``)
malformed_request  400     an unreadable multipart body or other malformed request
unauthenticated    401     no key, an unknown key, a revoked key
forbidden          403     a client key on a review action; a reviewer without rights
not_found          404     nothing of that name in the key's tenant (other tenants' too)
conflict           409     a different entry hash at an existing seq; nothing written
gap                409     an append that would leave a gap in seq
fold_refused       409     a pin no longer matches its entry; no fold stored
review_conflict    409     the retirement was already decided
payload_too_large  413     the body is over ``API_MAX_BODY_BYTES``
validation_error   422     wrong types, unknown fields, missing fields, bad values
invalid_entry      422     an entry that cannot be stored (kind/role/content rules)
invalid_transcript 422     an uploaded transcript that does not parse (file, line, field)
invalid_request    422     any other refusal of the journal or ledger services
=================  ======  =====================================================

No input produces a 500: an unexpected exception is logged with its traceback and answered
``internal_error`` (500) in the same shape, which the schemathesis run treats as a failure.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser

from journal_app.api import router as journal_router
from journal_app.auth import PayloadTooLarge, api_key_auth
from journal_app.chain import EntryInvalid
from journal_app.formats import FormatError
from journal_app.services import ConflictError, GapError, JournalError
from ledger_app.api import router as ledger_router
from ledger_app.context_api import router as context_router
from ledger_app.services import FoldFailed, FoldRefused, LedgerError, ReviewError, ReviewForbidden
from recovery_app.api import router as recovery_router

log = structlog.get_logger("ledgerkeep.api")


class BodyError(Exception):
    """A JSON body that cannot become request data (HTTP 400)."""

    code = "malformed_json"

    def __init__(self, message: str, field: str | None = None) -> None:
        self.message = message
        self.field = field
        super().__init__(message)


class InvalidUnicode(BodyError):
    """A JSON string (or object key) holding a lone UTF-16 surrogate (HTTP 400)."""

    code = "invalid_unicode"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _path(parts: Sequence[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def lone_surrogate_path(value: Any) -> str | None:
    """The path (``entries[0].content.text``) of the first string holding a lone surrogate.

    ``json.loads`` turns ``"\\ud800"`` into a Python string with an unpaired surrogate (a
    valid pair such as ``"\\ud83d\\ude00"`` becomes one character and passes). Such a string
    has no UTF-8 form and no RFC 8785 form, so it can be neither hashed nor stored
    (DESIGN.md section 4). Walks iteratively (no recursion limit on deep input).

    Returns:
        The path, ``"(key)"``-suffixed for an object key, ``""`` for a top-level string, or
        ``None`` when every string is clean.
    """
    stack: deque[tuple[list[str | int], Any]] = deque([([], value)])
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if _has_surrogate(item):
                return _path(path)
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if _has_surrogate(key):
                    return _path([*path, "(key)"])
                stack.append(([*path, key], child))
        elif isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                stack.append(([*path, index], item[index]))
    return None


class ApiParser(Parser):
    """JSON bodies: UTF-8 only, no NaN/Infinity, no lone surrogates; errors name the place."""

    def parse_body(self, request: HttpRequest) -> Any:
        raw = request.body
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BodyError(f"the body is not valid UTF-8 (byte offset {exc.start})") from None
        try:
            data = json.loads(text, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            raise BodyError(
                f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
        except RecursionError:
            raise BodyError("malformed JSON: nested too deeply") from None
        except ValueError as exc:
            raise BodyError(f"malformed JSON: {exc}") from None
        where = lone_surrogate_path(data)
        if where is not None:
            raise InvalidUnicode(
                "a JSON string holds a lone UTF-16 surrogate escape (e.g. \\ud800 without its "
                "pair): it has no UTF-8 form and cannot be stored or hashed; nothing written",
                field=where or None,
            )
        return data


api = NinjaAPI(
    title="ledgerkeep API",
    version="1",
    description=(
        "Journal, ledger and recovery of long-running LLM agents. Authenticate with "
        "`Authorization: Bearer <key>` (`manage.py create_api_key`); the tenant comes from "
        "the key. Errors share one shape: `{code, message, field, entry}`."
    ),
    urls_namespace="api",
    auth=api_key_auth,
    parser=ApiParser(),
)


def error_response(
    request: HttpRequest,
    status: int,
    code: str,
    message: str,
    *,
    field: str | None = None,
    entry: str | None = None,
) -> HttpResponse:
    """The JSON error shape with ``status``; every 4xx/5xx of the API comes from here."""
    log.info(
        "api_error",
        status=status,
        code=code,
        method=request.method,
        path=request.path,
        key=getattr(getattr(getattr(request, "auth", None), "key", None), "prefix", None),
    )
    response = api.create_response(
        request,
        {"code": code, "message": message, "field": field, "entry": entry},
        status=status,
    )
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


#: The code an ``HttpError`` of each documented status answers with.
_STATUS_CODES = {
    400: "malformed_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    413: "payload_too_large",
    422: "validation_error",
}


def _handles(*classes: type[Exception]) -> Callable[[Callable], Callable]:
    def register(func: Callable) -> Callable:
        for cls in classes:
            api.add_exception_handler(cls, func)
        return func

    return register


def _field_of(loc: Sequence[Any]) -> str:
    parts = list(loc)
    if parts and parts[0] == "body" and len(parts) > 1:
        parts = parts[2:]  # ("body", <argument name>, ...): the argument is the body itself
    elif parts and parts[0] in ("query", "path", "header", "cookie", "form", "file"):
        parts = parts[1:]
    return _path([p if isinstance(p, int) else str(p) for p in parts])


def _entry_of(field: str | None) -> str | None:
    """``entries[3]`` for a field path inside an append batch, else ``None``."""
    if field and field.startswith("entries[") and "]" in field:
        return field[: field.index("]") + 1]
    return None


@_handles(ValidationError)
def _validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors = list(exc.errors)
    if not errors:
        return error_response(request, 422, "validation_error", "the request is not valid")
    first = errors[0]
    field = _field_of(first.get("loc", ()))
    msg = first.get("msg", "invalid value")
    if first.get("type") == "extra_forbidden":
        msg = "unknown field"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return error_response(
        request,
        422,
        "validation_error",
        f"{field or 'request'}: {msg}" + (more if len(errors) > 1 else ""),
        field=field or None,
        entry=_entry_of(field),
    )


def _body_error(request: HttpRequest, exc: BodyError) -> HttpResponse:
    return error_response(
        request, 400, exc.code, exc.message, field=exc.field, entry=_entry_of(exc.field)
    )


def _too_large(request: HttpRequest, exc: Exception) -> HttpResponse:
    message = str(exc) if isinstance(exc, PayloadTooLarge) else "the request body is too large"
    return error_response(request, 413, "payload_too_large", message + "; nothing written")


@_handles(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # ninja wraps parser errors as HttpError(400, "Cannot parse request body") from the cause
    cause = exc.__cause__
    if isinstance(cause, BodyError):
        return _body_error(request, cause)
    if isinstance(cause, RequestDataTooBig):
        return _too_large(request, cause)
    if isinstance(exc, AuthenticationError):
        return error_response(
            request,
            401,
            "unauthenticated",
            "a valid API key is required: send 'Authorization: Bearer <key>'",
        )
    # An HttpError raised by a router: keep its status when it is one the schema documents.
    code = _STATUS_CODES.get(exc.status_code)
    if code is None:
        return error_response(request, 400, "malformed_request", str(exc))
    return error_response(request, exc.status_code, code, str(exc))


_handles(BodyError)(_body_error)
_handles(PayloadTooLarge, RequestDataTooBig)(_too_large)


@_handles(UnicodeEncodeError)
def _unencodable(request: HttpRequest, exc: UnicodeEncodeError) -> HttpResponse:
    # An uploaded transcript whose strings hold lone surrogates reaches the database layer
    # (the import is one transaction, rolled back); the JSON bodies are checked earlier.
    return error_response(
        request,
        400,
        "invalid_unicode",
        f"a string holds a character with no UTF-8 form ({exc.reason}): lone UTF-16 surrogate "
        "escapes such as \\ud800 cannot be stored or hashed; nothing written",
    )


@_handles(SuspiciousOperation, MultiPartParserError)
def _malformed(request: HttpRequest, exc: Exception) -> HttpResponse:
    return error_response(request, 400, "malformed_request", f"malformed request: {exc}")


@_handles(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return error_response(request, 404, "not_found", str(exc) or "not found")


@_handles(PermissionDenied, ReviewForbidden)
def _forbidden(request: HttpRequest, exc: Exception) -> HttpResponse:
    return error_response(request, 403, "forbidden", str(exc) or "forbidden")


@_handles(ConflictError)
def _conflict(request: HttpRequest, exc: ConflictError) -> HttpResponse:
    return error_response(request, 409, "conflict", str(exc), entry=f"seq {exc.seq}")


@_handles(GapError)
def _gap(request: HttpRequest, exc: GapError) -> HttpResponse:
    return error_response(request, 409, "gap", f"{exc}; nothing written", field="start_seq")


@_handles(EntryInvalid)
def _invalid_entry(request: HttpRequest, exc: EntryInvalid) -> HttpResponse:
    entry = f"entries[{exc.index}]"
    return error_response(
        request,
        422,
        "invalid_entry",
        f"{entry}, field {exc.field!r}: {exc.reason}; nothing written",
        field=f"{entry}.{exc.field}",
        entry=entry,
    )


@_handles(FormatError)
def _invalid_transcript(request: HttpRequest, exc: FormatError) -> HttpResponse:
    parts = [Path(exc.path).name]  # the upload's own name, not the temporary path
    if exc.location:
        parts.append(exc.location)
    if exc.field:
        parts.append(f"field {exc.field!r}")
    return error_response(
        request,
        422,
        "invalid_transcript",
        ", ".join(parts) + f": {exc.reason}; nothing written",
        field=exc.field or None,
        entry=exc.location or None,
    )


@_handles(FoldRefused)
def _fold_refused(request: HttpRequest, exc: FoldRefused) -> HttpResponse:
    return error_response(request, 409, "fold_refused", f"fold refused: {exc}")


@_handles(FoldFailed)
def _fold_failed(request: HttpRequest, exc: FoldFailed) -> HttpResponse:
    return error_response(
        request, 503, "model_unavailable", f"fold failed, nothing stored; retry later: {exc}"
    )


@_handles(ReviewError)
def _review_conflict(request: HttpRequest, exc: ReviewError) -> HttpResponse:
    return error_response(request, 409, "review_conflict", str(exc))


@_handles(JournalError, LedgerError)
def _invalid_request(request: HttpRequest, exc: Exception) -> HttpResponse:
    return error_response(request, 422, "invalid_request", str(exc))


@_handles(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    log.exception("api_unexpected_error", method=request.method, path=request.path)
    return error_response(
        request, 500, "internal_error", "unexpected server error; it has been logged"
    )


def api_not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """JSON 404 for any path under ``/api/v1/`` that no operation serves."""
    return error_response(request, 404, "not_found", f"no API operation at {request.path}")


api.add_router("/", journal_router)
api.add_router("/", ledger_router)
api.add_router("/", recovery_router)
api.add_router("/", context_router)
