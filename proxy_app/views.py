"""The compacting proxy's endpoints: OpenAI Chat Completions and Responses, Anthropic Messages,
and the calls passed through as they are.

A client changes only its base URL (``http://HOST/proxy/openai/v1``,
``http://HOST/proxy/anthropic``) and adds ``X-Ledgerkeep-Key``. Each journaled call, in order:

1. the key is checked (401 before anything else); the body must be a request of the surface
   (422 naming the field), a body that is not JSON 400 ``malformed_json``; a session, lane
   or branch header the journal refuses is 422 naming the header. Sessions are per tenant:
   the session header is looked up in the key's tenant only. Nothing is journaled for a
   refused request;
2. the history is journaled (:func:`proxy_app.services.conversation.conversation_record`):
   only its new suffix, or a new branch where it diverges;
3. over the working budget, the request is replaced by the context the builder makes
   (:func:`proxy_app.services.compaction.request_compact`); no valid context is 422
   ``context_failed`` and nothing is forwarded;
4. the request goes upstream; its answer comes back as the upstream sent it (status and
   body, or the server-sent events as they arrive) and is journaled after it, a stream the
   client left as interrupted. Timeouts are 504, unreachable upstreams 502.

Steps 1-3 are :mod:`proxy_app.journaled_call`, step 4 :mod:`proxy_app.forwarding`; every
refusal is answered in the API's one error shape (:mod:`proxy_app.refusals`).

Response headers: ``X-Ledgerkeep-Session``, ``-Lane``, ``-Branch``, ``-Revision``,
``-Compacted`` (``true``/``false``), ``-Tokens-Before``, ``-Tokens-After``, ``-Fold`` (the
latest fold number, when there is one). The endpoints are API endpoints authenticated by
key: no CSRF, no cookies.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from proxy_app.forwarding import journaled_forward, passthrough_forward
from proxy_app.refusals import error_answer


@csrf_exempt
async def openai_chat_completions(request: HttpRequest) -> HttpResponseBase:
    """``POST /proxy/openai/v1/chat/completions``: an OpenAI Chat Completions request."""
    return await journaled_forward(request, "openai")


@csrf_exempt
async def anthropic_messages(request: HttpRequest) -> HttpResponseBase:
    """``POST /proxy/anthropic/v1/messages``: an Anthropic Messages request."""
    return await journaled_forward(request, "anthropic")


@csrf_exempt
async def openai_responses(request: HttpRequest) -> HttpResponseBase:
    """``POST /proxy/openai/v1/responses``: an OpenAI Responses request (Codex,
    openai-agents): journaled and compacted as chat is; ``previous_response_id`` requests
    are passed through and journaled after the history they continue."""
    return await journaled_forward(request, "responses")


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
    return await passthrough_forward(request, "openai", "/models", "GET")


@csrf_exempt
async def openai_embeddings(request: HttpRequest) -> HttpResponse:
    """``POST /proxy/openai/v1/embeddings``: passed through (nothing to journal)."""
    return await passthrough_forward(request, "openai", "/embeddings", "POST")


@csrf_exempt
async def anthropic_count_tokens(request: HttpRequest) -> HttpResponse:
    """``POST /proxy/anthropic/v1/messages/count_tokens``: passed through."""
    return await passthrough_forward(request, "anthropic", "/v1/messages/count_tokens", "POST")


@csrf_exempt
async def anthropic_models(request: HttpRequest) -> HttpResponse:
    """``GET /proxy/anthropic/v1/models``: the upstream's model list, passed through."""
    return await passthrough_forward(request, "anthropic", "/v1/models", "GET")
