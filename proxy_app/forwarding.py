"""Step 4 of a proxied call: the request goes upstream and its answer comes back.

* :func:`journaled_forward`: a journaled call (Chat Completions, Responses, Messages),
  prepared by :func:`proxy_app.journaled_call.call_prepare`; the answer is passed back as
  the upstream sent it (status and body, or the server-sent events as they arrive, read by
  the surface's assembler from :mod:`proxy_app.streams`) and journaled after its request,
  a stream the client left as interrupted;
* :func:`passthrough_forward`: a call forwarded as it is after the key (model lists,
  embeddings, token counts); nothing journaled.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase

from journal_app.auth import check_body_size
from proxy_app import services
from proxy_app.errors import UpstreamTimeout, UpstreamUnreachable
from proxy_app.journaled_call import answer_journal, call_prepare, scope_headers
from proxy_app.refusals import error_answer, refusal
from proxy_app.request_body import request_body
from proxy_app.streams import AnthropicAssembler, OpenAIAssembler, ResponsesAssembler
from proxy_app.upstream import passed_back, upstream_send

log = logging.getLogger("ledgerkeep.proxy")


#: the stream reader of each journaled surface
ASSEMBLERS: dict[str, type[OpenAIAssembler | AnthropicAssembler | ResponsesAssembler]] = {
    "openai": OpenAIAssembler,
    "anthropic": AnthropicAssembler,
    "responses": ResponsesAssembler,
}


def answer_of(surface: str, data: Any) -> tuple[Any, Any, dict[str, Any]] | None:
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


def answer_trailer(placed: Any) -> bytes:
    """The server-sent-events comment a streamed answer ends with, after its last event:
    where the answer was journaled, which the response headers (sent before the answer
    existed) cannot say. One ``: Name: value`` line per header, then a blank line; SSE
    clients skip comment lines (README, "The compacting proxy").

    Args:
        placed: the answer's :class:`~proxy_app.services.placement.Recorded`, or ``None``
            when it could not be journaled.

    Returns:
        ``: X-Ledgerkeep-Answer-Journaled: true|false`` and, when journaled, the answer's
        ``X-Ledgerkeep-Branch`` and ``-Revision`` (and ``-Branched-From`` when a resampled
        answer opened a branch), UTF-8 bytes.
    """
    lines = [f": X-Ledgerkeep-Answer-Journaled: {'true' if placed else 'false'}"]
    if placed is not None:
        for name, value in scope_headers(placed).items():
            if name in (
                "X-Ledgerkeep-Branch",
                "X-Ledgerkeep-Revision",
                "X-Ledgerkeep-Branched-From",
            ):
                lines.append(f": {name}: {value}")
    return ("\n".join(lines) + "\n\n").encode()


async def journaled_forward(request: HttpRequest, surface: str) -> HttpResponseBase:
    """A journaled call of ``surface`` (``openai``, ``anthropic``, ``responses``): 405
    unless POST; a refusal before the upstream is reached in the error shape with the
    scope headers known by then; else the upstream's answer with the ``X-Ledgerkeep-*``
    headers (and ``X-Ledgerkeep-Answer-Journaled`` for an answer that is not streamed)."""
    if request.method != "POST":
        refused = error_answer(405, "method_not_allowed", "use POST")
        refused["Allow"] = "POST"
        return refused
    headers: dict[str, str] = {}
    call = None
    try:
        call = await sync_to_async(call_prepare)(request, surface, headers)
        stream = bool(call.body.get("stream"))
        upstream = await upstream_send(
            surface=surface,
            body=call.prepared.body,
            client_headers=request.headers,
            stream=stream,
        )
    except Exception as exc:
        if call is not None and isinstance(exc, UpstreamUnreachable | UpstreamTimeout):
            await sync_to_async(services.upstream_failure_record)(
                surface=surface, recorded=call.recorded, status=exc.status, detail=str(exc)
            )
        return refusal(exc, headers)
    body, items, recorded = call.body, call.items, call.recorded

    def record(answer: Any, usage: Any, meta: dict[str, Any], interrupted: bool):
        return answer_journal(
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
        if upstream.status_code >= 400:  # passed back as it came, and recorded
            await sync_to_async(services.upstream_failure_record)(
                surface=surface, recorded=recorded, status=upstream.status_code, detail=data
            )
        if upstream.status_code < 300:
            try:
                parsed = answer_of(surface, json.loads(data))
            except ValueError:
                parsed = None
            placed = await sync_to_async(record)(*parsed, False) if parsed else None
            if placed is not None:
                headers.update(scope_headers(placed))
            response["X-Ledgerkeep-Answer-Journaled"] = "true" if placed else "false"
        for name, value in headers.items():
            response[name] = value
        return response

    assembler = ASSEMBLERS[surface]()

    async def relay() -> AsyncIterator[bytes]:
        # the answer is journaled as soon as its last event arrives, before that event is
        # passed on: a client that has read the whole stream finds it in the journal
        journaled = False
        placed: Any = None

        async def finish(interrupted: bool) -> None:
            nonlocal journaled, placed
            journaled = True
            if assembler.started:
                usage = assembler.usage or None
                placed = await sync_to_async(record)(
                    assembler.message(), usage, assembler.meta(), interrupted
                )

        try:
            async for chunk in upstream.aiter_bytes():
                assembler.feed(chunk)
                last = assembler.done and not journaled
                if last:
                    await finish(False)
                yield chunk
                if last and chunk.endswith((b"\n\n", b"\r\n\r\n")):
                    yield answer_trailer(placed)
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

    if not isinstance(request, ASGIRequest):
        # WSGI (runserver): Django reads an async stream whole, in an event loop of its own
        # where the upstream connection opened in this one cannot be read; read it here
        whole = HttpResponse(
            b"".join([chunk async for chunk in relay()]),
            status=upstream.status_code,
            content_type=content_type,
        )
        for name, value in {**passed, **headers}.items():
            whole[name] = value
        return whole
    streamed = StreamingHttpResponse(
        relay(), status=upstream.status_code, content_type=content_type
    )
    for name, value in passed.items():
        streamed[name] = value
    streamed["Cache-Control"] = "no-cache"
    streamed["X-Accel-Buffering"] = "no"
    for name, value in headers.items():
        streamed[name] = value
    return streamed


async def passthrough_forward(
    request: HttpRequest, surface: str, path: str, method: str
) -> HttpResponse:
    """A call the proxy forwards as it is, after the key (nothing journaled)."""
    if request.method != method:
        refused = error_answer(405, "method_not_allowed", f"use {method}")
        refused["Allow"] = method
        return refused
    try:

        def checked() -> Any:
            check_body_size(request)
            services.proxy_authenticate(request)
            return request_body(request) if method == "POST" else None

        body = await sync_to_async(checked)()
        upstream = await upstream_send(
            surface=surface,
            body=body,
            client_headers=request.headers,
            stream=False,
            path=path,
            method=method,
            journaled=False,
        )
        try:
            data = await upstream.aread()
        finally:
            await upstream.aclose()
    except Exception as exc:
        return refusal(exc, {})
    response = HttpResponse(
        data,
        status=upstream.status_code,
        content_type=upstream.headers.get("content-type", "application/json"),
    )
    for name, value in passed_back(upstream.headers).items():
        response[name] = value
    return response
