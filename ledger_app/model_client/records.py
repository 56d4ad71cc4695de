"""What a model call leaves: its :class:`CallRecord`, its :class:`Completion`, its errors. Pure.

A :class:`CallRecord` per call (role, model, tokens, latency, attempts, response format,
``finish_reason``) is copied into the fold's manifest; the errors that end a call
(:class:`ModelUnavailable`, :class:`ModelRequestRefused`) carry the record of every attempt.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


class ModelError(Exception):
    """Base of the client's errors."""


class ModelNotConfigured(ModelError):
    """No model endpoint is configured (``OPENAI_BASE_URL`` or a model name is empty)."""


class ModelUnavailable(ModelError):
    """The model gave no answer after every retry (unreachable, timed out, stalled, 429, 5xx).

    Attributes: ``role`` (``"writer"``/``"verifier"``), ``attempts`` (requests made),
    ``last_error`` (``"APITimeoutError: ..."``), ``record`` (the :class:`CallRecord`).
    """

    def __init__(self, role: str, attempts: int, last_error: str, record: CallRecord) -> None:
        self.role, self.attempts, self.last_error, self.record = role, attempts, last_error, record
        super().__init__(f"{role} model gave no answer after {attempts} attempt(s): {last_error}")


class ModelRequestRefused(ModelError):
    """The server refused the request itself (HTTP 4xx other than 429): not retried."""

    def __init__(self, role: str, status: int, message: str, record: CallRecord) -> None:
        self.role, self.status, self.record = role, status, record
        super().__init__(f"{role} model refused the request (HTTP {status}): {message}")


@dataclass
class CallRecord:
    """What one model call cost and how it went (copied into the fold's manifest).

    ``latency_s`` is the answering request's time, ``total_s`` includes failed attempts and
    backoff (both seconds); tokens are the server's ``usage`` figures (0 when it sent none).
    ``status`` is ``ok``, ``unavailable``, ``refused`` or ``malformed`` (a 200 whose body is
    not a chat completion: the caller sees an empty reply); ``errors`` lists what went wrong.
    ``finish_reason`` is the server's (``stop``, ``length``: cut at ``max_tokens``, ...;
    empty when it sent none); ``max_tokens`` is what the request allowed.
    """

    role: str
    model: str
    round: int = 0
    response_format: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    total_s: float = 0.0
    attempts: int = 0
    status: str = "ok"
    errors: list[str] = field(default_factory=list)
    finish_reason: str = ""
    max_tokens: int = 0

    @property
    def truncated(self) -> bool:
        """True when the answer was cut at ``max_tokens`` (``finish_reason`` ``length``)."""
        return self.finish_reason == "length"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (latencies rounded to the millisecond)."""
        d = asdict(self)
        d["latency_s"] = round(self.latency_s, 3)
        d["total_s"] = round(self.total_s, 3)
        return d


@dataclass
class Completion:
    """The text a model answered (``""`` when it sent no content) and the call's record."""

    text: str
    record: CallRecord
