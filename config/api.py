"""The REST API v1: the one ``NinjaAPI``, mounted at ``/api/v1/`` (docs/design.md sections 1 and 9).

Schema at ``/api/v1/openapi.json``, interactive docs at ``/api/v1/docs``. Every operation
authenticates with a tenant API key (``Authorization: Bearer <key>``,
:mod:`journal_app.auth`); the tenant comes from the key, never from a parameter.

Errors: one JSON shape, mapped here once (STYLE.md point 3)::

    {"code": "conflict", "message": "...", "field": "entries[2].content" | null,
     "entry": "seq 7" | "entries[2]" | "line 12" | null}

Every domain error subclasses :class:`journal_app.errors.DomainError` and carries its own
``status`` and ``code``; one handler (``_domain``) renders them all. The few handlers beside
it translate what the framework raises (ninja's validation and authentication errors, Django's
``Http404``/``PermissionDenied``/oversized bodies) and the two parse errors whose location
has its own shape (an append batch's ``entries[i]``, an uploaded file's line).

=======================  ======  =====================================================
code                     status  when
=======================  ======  =====================================================
malformed_json           400     the body is not UTF-8 JSON (or holds NaN/Infinity)
invalid_unicode          400     a JSON string holds a lone UTF-16 surrogate (``\\ud800``)
malformed_request        400     an unreadable multipart body or other malformed request
cursor_refused           400     a recovery cursor tampered with, expired, or for another scope
invalid_comment          400     a review or comment without its required comment
unauthenticated          401     no key, an unknown key, a revoked key
forbidden                403     a client key on a review action; a reviewer without rights
not_found                404     nothing of that name in the key's tenant (other tenants' too),
                                 or no API operation at that path
method_not_allowed       405     the path exists but not with that method (``Allow`` lists them)
conflict                 409     a different entry hash at an existing seq; nothing written
gap                      409     an append that would leave a gap in seq
fold_refused             409     a pin no longer matches its entry; no fold stored
review_conflict          409     the retirement was already decided
payload_too_large        413     the body is over ``API_MAX_BODY_BYTES``
uri_too_long             414     path and query over ``API_MAX_URL_BYTES`` (default 4,000);
                                 gunicorn (config/gunicorn.py) reads request lines up to
                                 8,190 bytes, so every URL up to about that length gets
                                 this answer; only longer lines get gunicorn's own 400
rate_limited             429     the key is over ``API_RATE_LIMIT``; ``Retry-After`` in seconds
validation_error         422     wrong types, unknown fields, missing fields, bad values
invalid_entry            422     an entry that cannot be stored (kind/role/content rules)
invalid_transcript       422     an uploaded transcript that does not parse (file, line, field)
invalid_query            422     a recovery search query that cannot be searched
invalid_filter           422     a filter expression that does not parse (names the token)
invalid_context_request  422     a context request that cannot be served (revision, budgets)
invalid_request          422     any other refusal of the journal, ledger or recovery services
model_unavailable        503     the writer's model could not be reached: the fold attempt is
                                 recorded ``failed`` and nothing else; the same request may
                                 succeed later, so this is the server's 503, not a 4xx
database_unavailable     503     the database connection dropped mid-request; nothing written;
                                 ``Retry-After`` says when to try again
commit_unconfirmed       503     the connection dropped while an import committed: written or
                                 not is unknown; the same import again is safe (idempotent)
committed_then_lost      503     the import committed, then the connection dropped: the
                                 message says what was committed; nothing to send again
broker_unavailable       503     a fold request while the task broker is unreachable: not
                                 queued (its task run says so), ask again later
artifact_write_failed    503     an artifact's bytes could not be stored with their hash
artifact_store_full      507     the artifact store (named) has no space left; nothing written
=======================  ======  =====================================================

No input produces a 500: an unexpected exception is logged with its traceback and answered
``internal_error`` (500) in the same shape, which the schemathesis run treats as a failure.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.http.multipartparser import MultiPartParserError
from django.urls import URLPattern, URLResolver
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from audit_app.api import router as audit_router
from config.api_body import ApiParser, entry_of, field_path
from journal_app.api import router as journal_router
from journal_app.auth import api_key_auth
from journal_app.entry_validation import EntryInvalid
from journal_app.errors import DomainError
from journal_app.formats import FormatError
from journal_app.waterfall_api import router as waterfall_router
from ledger_app.api import router as ledger_router
from ledger_app.api_context import router as context_router
from recovery_app.api import router as recovery_router
from recovery_app.receipts_api import router as receipts_router
from recovery_app.tenant_search_api import router as tenant_search_router

log = structlog.get_logger("ledgerkeep.api")


def _url_too_long(request: HttpRequest) -> HttpResponse | None:
    """A 414 in the error shape when the URL is over ``API_MAX_URL_BYTES``, else ``None``."""
    limit = settings.API_MAX_URL_BYTES
    size = len(request.get_full_path().encode("utf-8"))
    if size <= limit:
        return None
    return error_response(
        request,
        414,
        "uri_too_long",
        f"the URL (path and query) is {size:,} bytes; the API reads at most {limit:,}",
    )


def _json_not_allowed(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``view`` answering a wrong method with the JSON error shape instead of plain text.

    ninja's path view returns Django's ``HttpResponseNotAllowed`` itself (no exception to
    handle), so the URL callback is wrapped; ``Allow`` is kept.
    """

    @functools.wraps(view)  # keeps csrf_exempt and the other view attributes
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        too_long = _url_too_long(request)
        if too_long is not None:
            return too_long
        response = view(request, *args, **kwargs)
        if not isinstance(response, HttpResponseNotAllowed):
            return response
        allowed = response["Allow"]
        out = error_response(
            request,
            405,
            "method_not_allowed",
            f"{request.method} is not allowed on {request.path}; allowed: {allowed}",
        )
        out["Allow"] = allowed
        return out

    return wrapper


#: ninja's own views (schema, docs) that answer every method unless limited.
_READ_ONLY_VIEWS = frozenset({"openapi-json", "openapi-view"})


class Api(NinjaAPI):
    """The ``NinjaAPI`` whose URL views answer 405 in the JSON error shape too.

    Every API view is CSRF-exempt, the schema and docs pages included: the API reads no
    cookie (a bearer key authenticates), and without the exemption a ``POST`` to
    ``openapi.json`` met Django's HTML CSRF page instead of the JSON 405. ninja's schema
    and docs views answer any method, so they are limited to GET and HEAD here.
    """

    @property
    def urls(self) -> tuple[list[URLResolver | URLPattern], str, str]:
        patterns, app_name, namespace = super().urls
        for pattern in patterns:
            if isinstance(pattern, URLPattern):
                view = pattern.callback
                if pattern.name in _READ_ONLY_VIEWS:
                    view = require_safe(view)
                pattern.callback = csrf_exempt(_json_not_allowed(view))
        return patterns, app_name, namespace


api = Api(
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
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    414: "uri_too_long",
    422: "validation_error",
    503: "unavailable",
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
    return field_path([p if isinstance(p, int) else str(p) for p in parts])


@api.exception_handler(DomainError)
def _domain(request: HttpRequest, exc: DomainError) -> HttpResponse:
    """Every domain error of every app: its own ``status`` and ``code``, one shape.

    An error with a ``retry_after`` (seconds; the rate limit's 429) also sends ``Retry-After``.
    """
    response = error_response(
        request, exc.status, exc.code, exc.message or exc.code, field=exc.field, entry=exc.entry
    )
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


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
        entry=entry_of(field),
    )


@_handles(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # ninja wraps parser errors as HttpError(400, "Cannot parse request body") from the cause
    cause = exc.__cause__
    if isinstance(cause, DomainError):
        return _domain(request, cause)
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


@_handles(RequestDataTooBig)
def _too_large(request: HttpRequest, exc: Exception) -> HttpResponse:
    # Django's own limit (DATA_UPLOAD_MAX_MEMORY_SIZE); the declared-length check of the
    # auth layer raises PayloadTooLarge, a DomainError
    return error_response(
        request, 413, "payload_too_large", "the request body is too large; nothing written"
    )


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


@_handles(PermissionDenied)
def _forbidden(request: HttpRequest, exc: Exception) -> HttpResponse:
    return error_response(request, 403, "forbidden", str(exc) or "forbidden")


@_handles(EntryInvalid)
def _invalid_entry(request: HttpRequest, exc: EntryInvalid) -> HttpResponse:
    # a pure parse error: ``exc.field`` is the field inside the entry, ``exc.index`` the
    # entry's place in the batch (journal_app.chain), combined here into the request path
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
    # a pure parse error of an uploaded file: name the upload, not the temporary path
    parts = [Path(exc.path).name]
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


@_handles(OperationalError, InterfaceError)
def _database_unavailable(request: HttpRequest, exc: Exception) -> HttpResponse:
    # the connection dropped (server restart, failover, pg_terminate_backend) in the middle
    # of the request: its transaction is rolled back and the connection is replaced on the
    # next request (CONN_HEALTH_CHECKS), so the client may simply try again
    log.warning("api_database_unavailable", method=request.method, path=request.path)
    response = error_response(
        request,
        503,
        "database_unavailable",
        "the database connection was lost during the request; nothing was written, try again",
    )
    response["Retry-After"] = "1"
    return response


@_handles(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    log.exception("api_unexpected_error", method=request.method, path=request.path)
    return error_response(
        request, 500, "internal_error", "unexpected server error; it has been logged"
    )


def api_not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """JSON 404 for any path under ``/api/v1/`` that no operation serves (414 if too long)."""
    too_long = _url_too_long(request)
    if too_long is not None:
        return too_long
    return error_response(request, 404, "not_found", f"no API operation at {request.path}")


api.add_router("/", journal_router)
api.add_router("/", audit_router)
api.add_router("/", ledger_router)
api.add_router("/", recovery_router)
api.add_router("/", receipts_router)
api.add_router("/", context_router)
api.add_router("/", waterfall_router)
api.add_router("/", tenant_search_router)
