"""The upstream model server the proxy forwards to (issue 14), over ``httpx``.

``UPSTREAM_OPENAI_BASE_URL`` (``.../v1``; requests go to ``/chat/completions``) and
``UPSTREAM_ANTHROPIC_BASE_URL`` (requests go to ``/v1/messages``): any compatible server
(vLLM, Ollama, llama.cpp, LiteLLM). The client's own credentials (``Authorization``,
``x-api-key``) are forwarded unless the server sets ``UPSTREAM_OPENAI_API_KEY`` /
``UPSTREAM_ANTHROPIC_API_KEY``; the ``X-Ledgerkeep-*`` headers never leave the proxy.
A timeout is :class:`~proxy_app.errors.UpstreamTimeout` (504); a refused or broken
connection :class:`~proxy_app.errors.UpstreamUnreachable` (502).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from django.conf import settings

from proxy_app.errors import UpstreamTimeout, UpstreamUnreachable

#: client headers passed through to each upstream (besides the credentials)
PASSED = {
    "openai": ("openai-organization", "openai-project"),
    "anthropic": ("anthropic-version", "anthropic-beta"),
}


def upstream_url(surface: str) -> str:
    """The URL a request of ``surface`` (``"openai"`` or ``"anthropic"``) is sent to."""
    if surface == "openai":
        return settings.UPSTREAM_OPENAI_BASE_URL.rstrip("/") + "/chat/completions"
    return settings.UPSTREAM_ANTHROPIC_BASE_URL.rstrip("/") + "/v1/messages"


def upstream_headers(surface: str, client: Mapping[str, str]) -> dict[str, str]:
    """The headers sent upstream: credentials (the server's or the client's) and passthroughs."""
    lower = {k.lower(): v for k, v in client.items()}
    headers = {"content-type": "application/json", "accept": lower.get("accept", "*/*")}
    if surface == "openai":
        if settings.UPSTREAM_OPENAI_API_KEY:
            headers["authorization"] = f"Bearer {settings.UPSTREAM_OPENAI_API_KEY}"
        elif "authorization" in lower:
            headers["authorization"] = lower["authorization"]
    else:
        if settings.UPSTREAM_ANTHROPIC_API_KEY:
            headers["x-api-key"] = settings.UPSTREAM_ANTHROPIC_API_KEY
        elif "x-api-key" in lower:
            headers["x-api-key"] = lower["x-api-key"]
        elif "authorization" in lower:
            headers["authorization"] = lower["authorization"]
        headers.setdefault("anthropic-version", "2023-06-01")
    for name in PASSED[surface]:
        if name in lower:
            headers[name] = lower[name]
    return headers


def _client() -> httpx.Client:
    timeout = settings.UPSTREAM_TIMEOUT_SECONDS
    return httpx.Client(timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)))


def upstream_send(
    *, surface: str, body: dict[str, Any], client_headers: Mapping[str, str], stream: bool
) -> tuple[httpx.Client, httpx.Response]:
    """Send ``body`` upstream; the caller closes the response and the client.

    With ``stream=True`` the body is not read yet (iterate ``response.iter_bytes()``).

    Raises:
        UpstreamTimeout: no answer within ``UPSTREAM_TIMEOUT_SECONDS`` (HTTP 504).
        UpstreamUnreachable: connection refused, reset or otherwise failed (HTTP 502).
    """
    client = _client()
    url = upstream_url(surface)
    try:
        request = client.build_request(
            "POST", url, json=body, headers=upstream_headers(surface, client_headers)
        )
        response = client.send(request, stream=stream)
    except httpx.TimeoutException:
        client.close()
        raise UpstreamTimeout(
            f"the upstream at {url} did not answer within "
            f"{settings.UPSTREAM_TIMEOUT_SECONDS:g} s; the request's messages are journaled"
        ) from None
    except httpx.HTTPError as exc:
        client.close()
        raise UpstreamUnreachable(
            f"the upstream at {url} cannot be reached ({type(exc).__name__}); "
            "the request's messages are journaled"
        ) from None
    return client, response
