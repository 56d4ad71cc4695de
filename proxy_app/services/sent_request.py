"""A request as the client sent it: its checks, its budgets and its token count.

* :func:`request_read`: the body checked as a request of the surface, and its history as
  journal items;
* :func:`budgets_for`: the call's working budget and the model's window;
* :func:`request_tokens`: the request's tokens as the context builder counts them, only the
  messages after the prefix the index found being counted again.

Nothing here writes to the journal; :func:`request_tokens` stores its count in the prefix
index (the cache).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from journal_app.formats.base import ParsedEntry
from journal_app.tokens import count_tokens, source_label
from ledger_app.validation import Meter
from proxy_app.errors import (
    ProxyRequestInvalid,
)
from proxy_app.matching import (
    RequestInvalid,
    check_request,
    request_items,
    responses_as_chat,
    responses_input,
)
from proxy_app.services.placement import (
    Recorded,
)
from proxy_app.services.prefix_index import (
    index_tokens,
)
from proxy_app.services.scope import HEADER_BUDGET


def request_read(surface: str, body: Any) -> tuple[int, list[ParsedEntry]]:
    """Check a request body and read its history: ``(output_tokens, items)``.

    Raises:
        ProxyRequestInvalid: naming the field (HTTP 422); nothing is journaled.
    """
    try:
        output_tokens = check_request(surface, body)
        return output_tokens, request_items(surface, body)
    except RequestInvalid as exc:
        raise ProxyRequestInvalid(exc.reason, field=exc.field) from None


def token_meter() -> Meter:
    """The token counter the context builder uses (tiktoken, ``TOKEN_ENCODING``)."""
    encoding = settings.TOKEN_ENCODING
    return Meter(count=lambda text: count_tokens(text, encoding), label=source_label(encoding))


def request_tokens(surface: str, body: Mapping[str, Any], recorded: Recorded | None = None) -> int:
    """Tokens of the request as sent, counted as the context builder counts (tiktoken); a
    Responses request is counted as the Chat Completions messages its items map to
    (:func:`proxy_app.matching.responses_as_chat`).

    Args:
        recorded: the request's placement: when the prefix index found its first
            ``known_messages`` messages with their count, only the messages after them are
            counted, and the whole count is stored for the next call.
    """
    meter = token_meter()
    if surface == "responses":
        messages = responses_as_chat(responses_input(dict(body)))
        if body.get("instructions"):
            messages.insert(0, {"role": "system", "content": body["instructions"]})
        return meter.per_request + sum(meter.message(m) for m in messages)
    sent = body["messages"]
    known, counted = 0, 0
    if recorded is not None and recorded.known_tokens >= 0:
        known, counted = recorded.known_messages, recorded.known_tokens
    counted += sum(meter.message(m) for m in sent[known:])
    if recorded is not None:
        index_tokens(recorded, counted)
    total = meter.per_request + counted
    system = body.get("system") if surface == "anthropic" else None
    if system:
        total += meter.message({"role": "system", "content": system})
    return total


def budgets_for(*, model: str, output_tokens: int, header: str | None) -> tuple[int, int]:
    """``(working_budget, window)`` of a call.

    The window is ``MODEL_WINDOWS[model]`` (default ``MODEL_WINDOW_DEFAULT``, 270,000); the
    working budget is the ``X-Ledgerkeep-Working-Budget`` header, else the window minus the
    requested output tokens.

    Raises:
        ProxyRequestInvalid: a header that is not a positive integer, or output tokens that
            leave no room in the window.
    """
    window = int(settings.MODEL_WINDOWS.get(model, settings.MODEL_WINDOW_DEFAULT))
    if output_tokens >= window:
        raise ProxyRequestInvalid(
            f"max_tokens {output_tokens} leaves no room in the {window}-token window of {model}",
            field="max_tokens",
        )
    if header:
        try:
            budget = int(header)
        except ValueError:
            budget = 0
        if budget < 1:
            raise ProxyRequestInvalid(
                f"{HEADER_BUDGET} must be a positive integer of tokens", field=HEADER_BUDGET
            )
        return min(budget, window - output_tokens), window
    return window - output_tokens, window
