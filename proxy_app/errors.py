"""The proxy's domain errors: each carries its HTTP status and code, and the proxy
answers them in the API's one shape ``{code, message, field, entry}`` (config/api.py)."""

from __future__ import annotations

from journal_app.errors import DomainError


class ProxyError(DomainError):
    """Base of the proxy's refusals (HTTP 422 unless a subclass says otherwise)."""

    status = 422
    code = "invalid_request"


class Unauthenticated(ProxyError):
    """No ``X-Ledgerkeep-Key``, or an unknown or revoked key (HTTP 401); nothing forwarded."""

    status = 401
    code = "unauthenticated"


class ProxyRequestInvalid(ProxyError):
    """A body that is not a Chat Completions / Messages request, or a bad header (HTTP 422)."""

    code = "validation_error"


class BodyRefused(ProxyError):
    """A body nested deeper than ``PROXY_MAX_JSON_DEPTH``, or a string holding a NUL or a lone
    surrogate (HTTP 422, ``field`` names the string); nothing journaled or forwarded."""

    code = "invalid_body"


class ContextFailed(ProxyError):
    """No valid context fits the budgets: the builder's explicit failure state (HTTP 422).

    Nothing is forwarded; the request's messages are journaled and the checkpoint written.
    """

    code = "context_failed"


class FoldPending(ProxyError):
    """The request fits its budgets only once more of its history is folded, and that fold
    did not finish within ``PROXY_FOLD_SECONDS`` (HTTP 503 with ``Retry-After``).

    Nothing is forwarded; the request's messages are journaled, the folds finished so far
    are stored, and the rest goes on in the background: the same request sent again after
    ``Retry-After`` seconds finds them folded (the OpenAI and Anthropic SDKs retry a 503
    after that wait on their own).
    """

    status = 503
    code = "fold_pending"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UpstreamUnreachable(ProxyError):
    """The upstream refused the connection or broke it before answering (HTTP 502)."""

    status = 502
    code = "upstream_unreachable"


class UpstreamTimeout(ProxyError):
    """The upstream did not answer within ``UPSTREAM_TIMEOUT_SECONDS`` (HTTP 504)."""

    status = 504
    code = "upstream_timeout"
