"""The compacting proxy's endpoints (issue 14): OpenAI Chat Completions and Anthropic Messages.

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

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from journal_app.auth import check_body_size
from journal_app.chain import EntryInvalid
from journal_app.errors import DomainError, MalformedBody
from journal_app.formats.openai_chat import short_title
from proxy_app import services
from proxy_app.services import Prepared, Recorded
from proxy_app.streams import AnthropicAssembler, OpenAIAssembler
from proxy_app.upstream import upstream_send

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


def _body(request: HttpRequest) -> Any:
    try:
        return json.loads(request.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise MalformedBody("the request body is not UTF-8 JSON; nothing forwarded") from None


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


def _answer_of(surface: str, data: Any) -> tuple[dict[str, Any], Any, dict[str, Any]] | None:
    """``(assistant message, usage, meta)`` of a non-streamed answer, or ``None``."""
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
        return record()
    except Exception:
        log.exception("proxy: the upstream's answer could not be journaled")
        return None


def _proxy(request: HttpRequest, surface: str) -> HttpResponse:
    if request.method != "POST":
        response = error_answer(405, "method_not_allowed", "use POST")
        response["Allow"] = "POST"
        return response
    headers: dict[str, str] = {}
    try:
        check_body_size(request)
        key = services.proxy_authenticate(request.headers.get(services.HEADER_KEY))
        body = _body(request)
        output_tokens, items = services.request_read(surface, body)
        working, window = services.budgets_for(
            model=body["model"],
            output_tokens=output_tokens,
            header=request.headers.get(services.HEADER_BUDGET),
        )
        scope = services.proxy_scope(key=key, headers=request.headers, items=items)
        title = next(
            (
                short_title(i.content["text"])
                for i in items
                if i.kind == "message" and i.role == "user"
            ),
            "",
        )
        recorded = services.conversation_record(
            scope=scope, items=items, title=title, source_format=f"proxy-{surface}"
        )
        headers = _scope_headers(recorded)
        prepared = services.request_compact(
            surface=surface,
            body=body,
            recorded=recorded,
            output_tokens=output_tokens,
            working=working,
            window=window,
        )
        headers.update(_prepared_headers(prepared))
        stream = bool(body.get("stream"))
        client, upstream = upstream_send(
            surface=surface, body=prepared.body, client_headers=request.headers, stream=stream
        )
    except DomainError as exc:
        return error_answer(
            exc.status,
            exc.code,
            exc.message or exc.code,
            field=exc.field,
            entry=exc.entry,
            headers=headers,
        )
    except EntryInvalid as exc:
        return error_answer(
            422,
            "invalid_entry",
            f"{exc}; nothing written",
            field=exc.field,
            entry=exc.source_ref or None,
            headers=headers,
        )
    except Exception:
        # as the API does: no HTML page for an API client, the traceback in the log
        log.exception("proxy: unexpected error")
        return error_answer(500, "internal_error", "internal error", headers=headers)

    def record(
        answer: dict[str, Any], usage: Any, meta: dict[str, Any], interrupted: bool
    ) -> Recorded:
        return services.answer_record(
            surface=surface,
            body=body,
            items=items,
            recorded=recorded,
            answer=answer,
            usage=usage if isinstance(usage, dict) else None,
            meta=meta,
            interrupted=interrupted,
        )

    content_type = upstream.headers.get("content-type", "application/json")
    if not stream or upstream.status_code >= 300:
        try:
            data = upstream.read()
        except httpx.HTTPError:
            data = b""
        finally:
            upstream.close()
            client.close()
        response = HttpResponse(data, status=upstream.status_code, content_type=content_type)
        if upstream.status_code < 300:
            try:
                parsed = _answer_of(surface, json.loads(data))
            except ValueError:
                parsed = None
            placed = _journal_answer(lambda: record(*parsed, False)) if parsed else None
            if placed is not None:
                headers.update(_scope_headers(placed))
            response["X-Ledgerkeep-Answer-Journaled"] = "true" if placed else "false"
        for name, value in headers.items():
            response[name] = value
        return response

    assembler = OpenAIAssembler() if surface == "openai" else AnthropicAssembler()

    def relay() -> Iterator[bytes]:
        # the answer is journaled as soon as its last event arrives, before that event is
        # passed on: a client that has read the whole stream finds it in the journal
        journaled = False

        def finish(interrupted: bool) -> None:
            nonlocal journaled
            journaled = True
            if assembler.started:
                usage = assembler.usage or None
                _journal_answer(
                    lambda: record(assembler.message(), usage, assembler.meta(), interrupted)
                )

        try:
            for chunk in upstream.iter_bytes():
                assembler.feed(chunk)
                if assembler.done and not journaled:
                    finish(False)
                yield chunk
        except httpx.HTTPError:
            log.warning("proxy: the upstream broke off the stream")
        finally:
            upstream.close()
            client.close()
            if not journaled:
                finish(True)

    response = StreamingHttpResponse(
        relay(), status=upstream.status_code, content_type=content_type
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    for name, value in headers.items():
        response[name] = value
    return response


@csrf_exempt
def openai_chat_completions(request: HttpRequest) -> HttpResponse:
    """``POST /proxy/openai/v1/chat/completions``: an OpenAI Chat Completions request."""
    return _proxy(request, "openai")


@csrf_exempt
def anthropic_messages(request: HttpRequest) -> HttpResponse:
    """``POST /proxy/anthropic/v1/messages``: an Anthropic Messages request."""
    return _proxy(request, "anthropic")
