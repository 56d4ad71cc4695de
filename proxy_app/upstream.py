"""The upstream model server the proxy forwards to, over one pooled ``httpx.AsyncClient``.

``UPSTREAM_OPENAI_BASE_URL`` (``.../v1``; requests go to ``/chat/completions``) and
``UPSTREAM_ANTHROPIC_BASE_URL`` (requests go to ``/v1/messages``): any compatible server
(vLLM, Ollama, llama.cpp, LiteLLM). The client's own credentials (``Authorization``,
``x-api-key``) are forwarded unless the server sets ``UPSTREAM_OPENAI_API_KEY`` /
``UPSTREAM_ANTHROPIC_API_KEY``; the ``X-Ledgerkeep-*`` headers never leave the proxy.
A timeout is :class:`~proxy_app.errors.UpstreamTimeout` (504); a refused or broken
connection :class:`~proxy_app.errors.UpstreamUnreachable` (502).

One client per event loop (one per uvicorn worker process): connections and the CA bundle
are loaded once, not per call (README "The compacting proxy", "Run in production").
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping
from typing import Any

import httpx
from django.conf import settings

from proxy_app.errors import UpstreamTimeout, UpstreamUnreachable

#: client headers passed through to each upstream (besides the credentials)
PASSED = {
    "openai": ("openai-organization", "openai-project"),
    "responses": ("openai-organization", "openai-project"),
    "anthropic": ("anthropic-version", "anthropic-beta"),
}

#: response headers never passed back to the client: hop-by-hop (RFC 9110 section 7.6.1)
#: and the framing the proxy's own server sets (length, encoding of the body it sends)
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
        "content-type",
        "date",
        "server",
        "set-cookie",
    }
)


#: the upstream path of each journaled surface, after its base URL
PATHS = {"openai": "/chat/completions", "responses": "/responses", "anthropic": "/v1/messages"}


def upstream_url(surface: str, path: str | None = None) -> str:
    """The URL a request of ``surface`` (``"openai"``, ``"responses"``, ``"anthropic"``) is
    sent to; ``path`` (after the base URL, e.g. ``"/models"``) for a passed-through call."""
    if surface == "anthropic":
        base = settings.UPSTREAM_ANTHROPIC_BASE_URL
    else:
        base = settings.UPSTREAM_OPENAI_BASE_URL
    return base.rstrip("/") + (path or PATHS[surface])


def upstream_headers(surface: str, client: Mapping[str, str]) -> dict[str, str]:
    """The headers sent upstream: credentials (the server's or the client's) and passthroughs.

    A tenant key sent as the credential (``Authorization: Bearer lk_...``, ``x-api-key:
    lk_...``) is the proxy's own and never forwarded.
    """
    lower = {k.lower(): v for k, v in client.items()}
    own = tenant_key_in(client)
    headers = {"content-type": "application/json", "accept": lower.get("accept", "*/*")}
    if surface != "anthropic":
        if settings.UPSTREAM_OPENAI_API_KEY:
            headers["authorization"] = f"Bearer {settings.UPSTREAM_OPENAI_API_KEY}"
        elif "authorization" in lower and own is None:
            headers["authorization"] = lower["authorization"]
    else:
        if settings.UPSTREAM_ANTHROPIC_API_KEY:
            headers["x-api-key"] = settings.UPSTREAM_ANTHROPIC_API_KEY
        elif own is None and "x-api-key" in lower:
            headers["x-api-key"] = lower["x-api-key"]
        elif own is None and "authorization" in lower:
            headers["authorization"] = lower["authorization"]
        headers.setdefault("anthropic-version", "2023-06-01")
    for name in PASSED[surface]:
        if name in lower:
            headers[name] = lower[name]
    return headers


def tenant_key_in(client: Mapping[str, str]) -> str | None:
    """A ledgerkeep key (``lk_...``) sent as the provider credential, or ``None``.

    ``Authorization: Bearer lk_...`` (OpenAI SDKs, tools that take only a base URL and an
    API key) or ``x-api-key: lk_...`` (Anthropic SDKs). Used as the tenant key only when
    ``X-Ledgerkeep-Key`` is absent (README "The compacting proxy").
    """
    lower = {k.lower(): v for k, v in client.items()}
    scheme, _, token = (lower.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and token.strip().startswith("lk_"):
        return token.strip()
    api_key = (lower.get("x-api-key") or "").strip()
    return api_key if api_key.startswith("lk_") else None


def passed_back(headers: httpx.Headers) -> dict[str, str]:
    """The upstream's response headers the client gets (``retry-after``, ``x-ratelimit-*``,
    ``x-request-id``, ...): all but :data:`HOP_BY_HOP` and the proxy's own ``x-ledgerkeep-*``."""
    return {
        name: value
        for name, value in headers.items()
        if name.lower() not in HOP_BY_HOP and not name.lower().startswith("x-ledgerkeep-")
    }


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def pooled_client() -> httpx.AsyncClient:
    """The event loop's one ``httpx.AsyncClient`` (created on first use; no pool cap, so
    concurrent streams are bounded by the workers, not by the client)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        client = httpx.AsyncClient(limits=httpx.Limits(max_connections=None))
        _clients[loop] = client
    return client


def _timeout() -> httpx.Timeout:
    seconds = settings.UPSTREAM_TIMEOUT_SECONDS
    return httpx.Timeout(seconds, connect=min(seconds, 10.0))


async def upstream_send(
    *,
    surface: str,
    body: dict[str, Any] | None,
    client_headers: Mapping[str, str],
    stream: bool,
    path: str | None = None,
    method: str = "POST",
    journaled: bool = True,
) -> httpx.Response:
    """Send ``body`` upstream over the pooled client; the caller closes the response.

    ``journaled`` says whether the request's messages were journaled before it went
    upstream (a Chat Completions, Responses or Messages call) or not (``/models``,
    ``/embeddings``, ``count_tokens``: passed through); the error of a failed send says so.

    Args:
        body: the JSON body (``None``: none, for a ``GET``).
        path: after the base URL (:func:`upstream_url`); default the surface's own.
        stream: when true the body is not read yet (iterate ``response.aiter_bytes()``).

    Raises:
        UpstreamTimeout: no answer within ``UPSTREAM_TIMEOUT_SECONDS`` (HTTP 504).
        UpstreamUnreachable: connection refused, reset or otherwise failed (HTTP 502).
    """
    client = pooled_client()
    url = upstream_url(surface, path)
    kept = (
        "the request's messages are journaled"
        if journaled
        else "nothing was journaled (a passed-through call)"
    )
    try:
        request = client.build_request(
            method,
            url,
            json=body,
            headers=upstream_headers(surface, client_headers),
            timeout=_timeout(),
        )
        return await client.send(request, stream=stream)
    except httpx.TimeoutException:
        raise UpstreamTimeout(
            f"the upstream at {url} did not answer within "
            f"{settings.UPSTREAM_TIMEOUT_SECONDS:g} s; {kept}"
        ) from None
    except httpx.HTTPError as exc:
        raise UpstreamUnreachable(
            f"the upstream at {url} cannot be reached ({type(exc).__name__}); {kept}"
        ) from None
