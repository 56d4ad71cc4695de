"""The compacting proxy's endpoints: OpenAI Chat Completions and Anthropic Messages.

A client changes only its base URL (``http://HOST/proxy/openai/v1``,
``http://HOST/proxy/anthropic``) and adds ``X-Ledgerkeep-Key``. Each call, in order:

1. the key is checked (401 before anything else); the body must be a request of the surface
   (422 naming the field), a body that is not JSON 400 ``malformed_json``; a session, lane
   or branch header the journal refuses is 422 naming the header. Sessions are per tenant:
   the session header is looked up in the key's tenant only. Nothing is journaled for a
   refused request;
2. the history is journaled (:func:`proxy_app.services.conversation_record`): only its new
   suffix, or a new branch where it diverges;
3. over the working budget, the request is replaced by the context the builder makes
   (:func:`proxy_app.services.request_compact`); no valid context is 422 ``context_failed``
   and nothing is forwarded;
4. the request goes upstream; its answer comes back as the upstream sent it (status and
   body, or the server-sent events as they arrive) and is journaled after it, a stream the
   client left as interrupted. Timeouts are 504, unreachable upstreams 502.

Response headers: ``X-Ledgerkeep-Session``, ``-Lane``, ``-Branch``, ``-Revision``,
``-Compacted`` (``true``/``false``), ``-Tokens-Before``, ``-Tokens-After``, ``-Fold`` (the
latest fold number, when there is one). The endpoints are API endpoints authenticated by
key: no CSRF, no cookies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from journal_app.auth import PayloadTooLarge, check_body_size
from journal_app.entry_validation import EntryInvalid
from journal_app.errors import DomainError, MalformedBody
from journal_app.formats.titles import short_title
from proxy_app import services
from proxy_app.bodies import bad_text, json_depth, may_hold_bad_text
from proxy_app.errors import BodyRefused
from proxy_app.prefix import request_messages
from proxy_app.services import Prepared, Recorded
from proxy_app.streams import AnthropicAssembler, OpenAIAssembler, ResponsesAssembler
from proxy_app.upstream import passed_back, upstream_send

log = logging.getLogger("ledgerkeep.proxy")

#: the stream reader of each journaled surface
ASSEMBLERS = {
    "openai": OpenAIAssembler,
    "anthropic": AnthropicAssembler,
    "responses": ResponsesAssembler,
}


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


def _body(request: HttpRequest) -> Any:
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


def _scope_headers(recorded: Recorded) -> dict[str, str]:
    j = recorded.journal
    headers = {
        "X-Ledgerkeep-Session": j.session.key,
        "X-Ledgerkeep-Lane": j.lane,
        "X-Ledgerkeep-Branch": j.branch,
        "X-Ledgerkeep-Revision": str(recorded.revision),
    }
    if recorded.branched_from:
        headers["X-Ledgerkeep-Branched-From"] = recorded.branched_from
    return headers


def _prepared_headers(prepared: Prepared) -> dict[str, str]:
    headers = {
        "X-Ledgerkeep-Compacted": "true" if prepared.compacted else "false",
        "X-Ledgerkeep-Tokens-Before": str(prepared.tokens_before),
        "X-Ledgerkeep-Tokens-After": str(prepared.tokens_after),
        "X-Ledgerkeep-Working-Budget": str(prepared.working_budget),
    }
    if prepared.fold is not None:
        headers["X-Ledgerkeep-Fold"] = str(prepared.fold)
    return headers


def _answer_of(surface: str, data: Any) -> tuple[Any, Any, dict[str, Any]] | None:
    """``(assistant message or Responses output items, usage, meta)`` of a non-streamed
    answer, or ``None``."""
    if not isinstance(data, dict):
        return None
    if surface == "openai":
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return None
        message = choices[0].get("message")
        if not isinstance(message, dict):
            return None
        answer = {**message, "role": "assistant"}
        if answer.get("content") is None and not answer.get("tool_calls"):
            answer["content"] = ""
        meta = {
            "model": data.get("model"),
            "response_id": data.get("id"),
            "finish_reason": choices[0].get("finish_reason"),
        }
        if len(choices) > 1:
            meta["choices"] = len(choices)
        return answer, data.get("usage"), meta
    if surface == "responses":
        if not isinstance(data.get("output"), list) or not data["output"]:
            return None
        meta = {"model": data.get("model"), "response_id": data.get("id")}
        meta["status"] = data.get("status")
        return data["output"], data.get("usage"), meta
    if not isinstance(data.get("content"), list):
        return None
    meta = {
        "model": data.get("model"),
        "response_id": data.get("id"),
        "stop_reason": data.get("stop_reason"),
    }
    return {"role": "assistant", "content": data["content"]}, data.get("usage"), meta


def _journal_answer(record: Callable[[], Recorded]) -> Recorded | None:
    """Journal an answer; a failure is logged, never kept from the client who has it."""
    try:
        with services.sqlite_serial():
            return record()
    except Exception:
        log.exception("proxy: the upstream's answer could not be journaled")
        return None


@dataclass
class _Call:
    """A checked, journaled and (when needed) compacted call, ready to go upstream."""

    body: dict[str, Any]
    items: list[Any]
    recorded: Recorded
    prepared: Prepared
    prefix: list[Any]


def _prepare(request: HttpRequest, surface: str, headers: dict[str, str]) -> _Call:
    """Steps 1-3 (synchronous: the ORM), one call at a time per process on SQLite
    (:func:`proxy_app.services.sqlite_serial`). ``headers`` gets the scope headers once
    known, so a refusal after journaling still names where the messages went."""
    with services.sqlite_serial():
        return _checked_and_journaled(request, surface, headers)


def _checked_and_journaled(request: HttpRequest, surface: str, headers: dict[str, str]) -> _Call:
    check_body_size(request)
    key = services.proxy_authenticate(request)
    body = _body(request)
    output_tokens, items = services.request_read(surface, body)
    working, window = services.budgets_for(
        model=body["model"],
        output_tokens=output_tokens,
        header=request.headers.get(services.HEADER_BUDGET),
    )
    prefix = []
    if surface == "responses" and body.get("previous_response_id"):
        prefix = services.previous_history(key.tenant, body["previous_response_id"])
    scope = services.proxy_scope(key=key, headers=request.headers, items=[*prefix, *items])
    title = next(
        (short_title(i.content["text"]) for i in items if i.kind == "message" and i.role == "user"),
        "",
    )
    sent = None if prefix else services.RequestPrefix(*request_messages(surface, body))
    recorded = services.conversation_record(
        scope=scope,
        items=[*prefix, *items],
        title=title,
        source_format=f"proxy-{surface}",
        request=sent,
    )
    headers.update(_scope_headers(recorded))
    prepared = services.request_compact(
        surface=surface,
        body=body,
        recorded=recorded,
        output_tokens=output_tokens,
        working=working,
        window=window,
        request=sent,
    )
    headers.update(_prepared_headers(prepared))
    return _Call(body, items, recorded, prepared, prefix)


def _refusal(exc: Exception, headers: dict[str, str]) -> JsonResponse:
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


async def _proxy(request: HttpRequest, surface: str) -> HttpResponse:
    if request.method != "POST":
        response = error_answer(405, "method_not_allowed", "use POST")
        response["Allow"] = "POST"
        return response
    headers: dict[str, str] = {}
    try:
        call = await sync_to_async(_prepare)(request, surface, headers)
        stream = bool(call.body.get("stream"))
        upstream = await upstream_send(
            surface=surface,
            body=call.prepared.body,
            client_headers=request.headers,
            stream=stream,
        )
    except Exception as exc:
        return _refusal(exc, headers)
    body, items, recorded = call.body, call.items, call.recorded

    def record(answer: Any, usage: Any, meta: dict[str, Any], interrupted: bool):
        return _journal_answer(
            lambda: services.answer_record(
                surface=surface,
                body=body,
                items=items,
                recorded=recorded,
                answer=answer,
                usage=usage if isinstance(usage, dict) else None,
                meta=meta,
                interrupted=interrupted,
                prefix=call.prefix,
            )
        )

    content_type = upstream.headers.get("content-type", "application/json")
    passed = passed_back(upstream.headers)
    if not stream or upstream.status_code >= 300:
        try:
            data = await upstream.aread()
        except httpx.HTTPError:
            data = b""
        finally:
            await upstream.aclose()
        response = HttpResponse(data, status=upstream.status_code, content_type=content_type)
        for name, value in passed.items():
            response[name] = value
        if upstream.status_code < 300:
            try:
                parsed = _answer_of(surface, json.loads(data))
            except ValueError:
                parsed = None
            placed = await sync_to_async(record)(*parsed, False) if parsed else None
            if placed is not None:
                headers.update(_scope_headers(placed))
            response["X-Ledgerkeep-Answer-Journaled"] = "true" if placed else "false"
        for name, value in headers.items():
            response[name] = value
        return response

    assembler = ASSEMBLERS[surface]()

    async def relay() -> AsyncIterator[bytes]:
        # the answer is journaled as soon as its last event arrives, before that event is
        # passed on: a client that has read the whole stream finds it in the journal
        journaled = False

        async def finish(interrupted: bool) -> None:
            nonlocal journaled
            journaled = True
            if assembler.started:
                usage = assembler.usage or None
                await sync_to_async(record)(
                    assembler.message(), usage, assembler.meta(), interrupted
                )

        try:
            async for chunk in upstream.aiter_bytes():
                assembler.feed(chunk)
                if assembler.done and not journaled:
                    await finish(False)
                yield chunk
        except httpx.HTTPError:
            log.warning("proxy: the upstream broke off the stream")
        finally:
            # journal first: a client that left cancels this task, and the journaling, once
            # started in its thread, completes even if the await is cancelled again
            try:
                if not journaled:
                    await asyncio.shield(finish(True))
            finally:
                await upstream.aclose()

    response = StreamingHttpResponse(
        relay(), status=upstream.status_code, content_type=content_type
    )
    for name, value in passed.items():
        response[name] = value
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    for name, value in headers.items():
        response[name] = value
    return response


@csrf_exempt
async def openai_chat_completions(request: HttpRequest) -> HttpResponse:
    """``POST /proxy/openai/v1/chat/completions``: an OpenAI Chat Completions request."""
    return await _proxy(request, "openai")


@csrf_exempt
async def anthropic_messages(request: HttpRequest) -> HttpResponse:
    """``POST /proxy/anthropic/v1/messages``: an Anthropic Messages request."""
    return await _proxy(request, "anthropic")


@csrf_exempt
async def openai_responses(request: HttpRequest) -> HttpResponse:
    """``POST /proxy/openai/v1/responses``: an OpenAI Responses request (Codex,
    openai-agents): journaled and compacted as chat is; ``previous_response_id`` requests
    are passed through and journaled after the history they continue."""
    return await _proxy(request, "responses")


async def _passthrough(request: HttpRequest, surface: str, path: str, method: str) -> HttpResponse:
    """A call the proxy forwards as it is, after the key (nothing journaled)."""
    if request.method != method:
        response = error_answer(405, "method_not_allowed", f"use {method}")
        response["Allow"] = method
        return response
    try:

        def checked() -> Any:
            check_body_size(request)
            services.proxy_authenticate(request)
            return _body(request) if method == "POST" else None

        body = await sync_to_async(checked)()
        upstream = await upstream_send(
            surface=surface,
            body=body,
            client_headers=request.headers,
            stream=False,
            path=path,
            method=method,
        )
        try:
            data = await upstream.aread()
        finally:
            await upstream.aclose()
    except Exception as exc:
        return _refusal(exc, {})
    response = HttpResponse(
        data,
        status=upstream.status_code,
        content_type=upstream.headers.get("content-type", "application/json"),
    )
    for name, value in passed_back(upstream.headers).items():
        response[name] = value
    return response


@csrf_exempt
def proxy_not_found(
    request: HttpRequest, rest: str = "", served: tuple[str, ...] = ()
) -> JsonResponse:
    """Any path under ``/proxy/`` that no endpoint serves: 404 ``not_found`` in the error shape.

    Args:
        rest: the path after the proxy's mount point (``openai/v1/nonexistent``).
        served: the served endpoints' paths relative to the mount point (``proxy_app/urls.py``).

    Returns:
        HTTP 404 whose message names the path and lists the served endpoints under the
        proxy's mount point (README "Proxy errors"); nothing checked, journaled or forwarded.
    """
    mount = request.path[: len(request.path) - len(rest)]
    endpoints = ", ".join(mount + path for path in served)
    return error_answer(
        404, "not_found", f"no proxy endpoint at {request.path}; the proxy serves {endpoints}"
    )


@csrf_exempt
async def openai_models(request: HttpRequest) -> HttpResponse:
    """``GET /proxy/openai/v1/models``: the upstream's model list, passed through."""
    return await _passthrough(request, "openai", "/models", "GET")


@csrf_exempt
async def openai_embeddings(request: HttpRequest) -> HttpResponse:
    """``POST /proxy/openai/v1/embeddings``: passed through (nothing to journal)."""
    return await _passthrough(request, "openai", "/embeddings", "POST")


@csrf_exempt
async def anthropic_count_tokens(request: HttpRequest) -> HttpResponse:
    """``POST /proxy/anthropic/v1/messages/count_tokens``: passed through."""
    return await _passthrough(request, "anthropic", "/v1/messages/count_tokens", "POST")


@csrf_exempt
async def anthropic_models(request: HttpRequest) -> HttpResponse:
    """``GET /proxy/anthropic/v1/models``: the upstream's model list, passed through."""
    return await _passthrough(request, "anthropic", "/v1/models", "GET")
