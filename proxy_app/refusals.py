"""The proxy's refusals in the API's one error shape ``{code, message, field, entry}``.

* :func:`error_answer`: the shape itself (as ``config/api.py`` answers);
* :func:`refusal`: a refused call's answer: a domain error with its status and code (and
  ``Retry-After`` when it has one), an invalid entry as 422 ``invalid_entry``, anything
  else as 500 ``internal_error`` with the traceback in the log.
"""

from __future__ import annotations

import logging

from django.http import JsonResponse

from journal_app.entry_validation import EntryInvalid
from journal_app.errors import DomainError

log = logging.getLogger("ledgerkeep.proxy")


def error_answer(
    status: int,
    code: str,
    message: str,
    *,
    field: str | None = None,
    entry: str | None = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    """The API's one error shape ``{code, message, field, entry}`` (config/api.py)."""
    response = JsonResponse(
        {"code": code, "message": message, "field": field, "entry": entry}, status=status
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def refusal(exc: Exception, headers: dict[str, str]) -> JsonResponse:
    """The error shape of a refused call (a domain error, an invalid entry, or a 500)."""
    if isinstance(exc, DomainError):
        retry = getattr(exc, "retry_after", None)
        if retry:
            headers = {**headers, "Retry-After": str(retry)}
        return error_answer(
            exc.status,
            exc.code,
            exc.message or exc.code,
            field=exc.field,
            entry=exc.entry,
            headers=headers,
        )
    if isinstance(exc, EntryInvalid):
        return error_answer(
            422,
            "invalid_entry",
            f"{exc}; nothing written",
            field=exc.field,
            entry=exc.source_ref or None,
            headers=headers,
        )
    # as the API does: no HTML page for an API client, the traceback in the log
    log.error("proxy: unexpected error", exc_info=exc)
    return error_answer(500, "internal_error", "internal error", headers=headers)
