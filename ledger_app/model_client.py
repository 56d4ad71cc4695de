"""The one client module for model calls (DESIGN.md section 5.3). Pure: no Django.

Every writer and verifier call goes through :class:`ModelClient`, a small wrapper around the
official ``openai`` package pointed at ``OPENAI_BASE_URL``, so any OpenAI-compatible server
(OpenAI, vLLM, Ollama, llama.cpp) works. It adds what the product needs around a call:

* a timeout per request (seconds) and **retries with exponential backoff and jitter** on
  transient failures only (``tenacity``): a timeout, a refused or dropped connection, HTTP
  429 and HTTP 5xx. Anything else (400, 401, 404, ...) is raised at once;
* **structured output**: a JSON schema (``response_format={"type": "json_schema"}``); a
  server that answers 400 to that request is asked once more in JSON mode
  (``{"type": "json_object"}``) and remembered as such, and the caller validates the text;
* a :class:`CallRecord` per call: role, model, input and output tokens as the server
  reported them, latency of the answering request and total time including retries
  (seconds), the number of attempts and the response format used. Folds copy these into
  their manifest.

When the retries are used up, :class:`ModelUnavailable` is raised with the records of
every attempt; the fold service then records the fold as failed and writes nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import openai
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

#: Errors worth another attempt: they say nothing about the request itself.
TRANSIENT = (
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.RateLimitError,
    openai.InternalServerError,
)


class ModelError(Exception):
    """Base of the client's errors."""


class ModelNotConfigured(ModelError):
    """No model endpoint is configured (``OPENAI_BASE_URL`` or a model name is empty)."""


class ModelUnavailable(ModelError):
    """The model could not be reached after every retry (timeouts, 429, 5xx, connection).

    Attributes: ``role`` (``"writer"``/``"verifier"``), ``attempts`` (requests made),
    ``last_error`` (``"APITimeoutError: ..."``), ``record`` (the :class:`CallRecord`).
    """

    def __init__(self, role: str, attempts: int, last_error: str, record: CallRecord) -> None:
        self.role, self.attempts, self.last_error, self.record = role, attempts, last_error, record
        super().__init__(f"{role} model unreachable after {attempts} attempt(s): {last_error}")


class ModelRequestRefused(ModelError):
    """The server refused the request itself (HTTP 4xx other than 429): not retried."""

    def __init__(self, role: str, status: int, message: str, record: CallRecord) -> None:
        self.role, self.status, self.record = role, status, record
        super().__init__(f"{role} model refused the request (HTTP {status}): {message}")


@dataclass(frozen=True)
class ModelConfig:
    """Where and how to call the models.

    Attributes:
        base_url: an OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8001/v1``; empty
            means no model is configured (the offline writer is the default then).
        api_key: sent as the bearer token; local servers usually accept any value.
        writer_model / verifier_model: model names; the verifier defaults to the writer's.
        timeout_s: per request, seconds.
        max_attempts: requests per call, the first included (4: one try and three retries).
        backoff_initial_s / backoff_max_s: exponential backoff bounds, seconds (with jitter).
        response_format: ``"json_schema"`` (default) or ``"json_object"`` (JSON mode only).
        max_output_tokens: ``max_tokens`` of each request.
    """

    base_url: str = ""
    api_key: str = ""
    writer_model: str = ""
    verifier_model: str = ""
    timeout_s: float = 60.0
    max_attempts: int = 4
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 8.0
    response_format: str = "json_schema"
    max_output_tokens: int = 4096

    @property
    def configured(self) -> bool:
        """True when a base URL and a writer model name are set."""
        return bool(self.base_url and self.writer_model)

    @property
    def verifier(self) -> str:
        """The verifier model name (the writer's when none is set)."""
        return self.verifier_model or self.writer_model

    @classmethod
    def from_settings(cls, settings: Any) -> ModelConfig:
        """Read ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``WRITER_MODEL``, ``VERIFIER_MODEL``
        and the optional ``MODEL_TIMEOUT_SECONDS``, ``MODEL_MAX_ATTEMPTS``,
        ``MODEL_BACKOFF_SECONDS``, ``MODEL_BACKOFF_MAX_SECONDS``, ``MODEL_RESPONSE_FORMAT``,
        ``MODEL_MAX_OUTPUT_TOKENS`` from a settings object (Django's, or any namespace)."""

        def get(name: str, default: Any) -> Any:
            value = getattr(settings, name, default)
            return default if value in (None, "") else value

        return cls(
            base_url=str(get("OPENAI_BASE_URL", "")),
            api_key=str(get("OPENAI_API_KEY", "")),
            writer_model=str(get("WRITER_MODEL", "")),
            verifier_model=str(get("VERIFIER_MODEL", "")),
            timeout_s=float(get("MODEL_TIMEOUT_SECONDS", 60.0)),
            max_attempts=max(1, int(get("MODEL_MAX_ATTEMPTS", 4))),
            backoff_initial_s=float(get("MODEL_BACKOFF_SECONDS", 0.5)),
            backoff_max_s=float(get("MODEL_BACKOFF_MAX_SECONDS", 8.0)),
            response_format=str(get("MODEL_RESPONSE_FORMAT", "json_schema")),
            max_output_tokens=int(get("MODEL_MAX_OUTPUT_TOKENS", 4096)),
        )


@dataclass
class CallRecord:
    """What one model call cost and how it went (copied into the fold's manifest).

    ``latency_s`` is the answering request's time, ``total_s`` includes failed attempts and
    backoff (both seconds); tokens are the server's ``usage`` figures (0 when it sent none).
    ``status`` is ``ok``, ``unavailable``, ``refused`` or ``malformed`` (a 200 whose body is
    not a chat completion: the caller sees an empty reply); ``errors`` lists what went wrong.
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


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return f"{name} (HTTP {status})" if status else f"{name}: {str(exc)[:200]}"


def _schema_refused(exc: openai.APIStatusError) -> bool:
    """A 400 that is about the ``response_format`` (the server has no JSON-schema mode)."""
    if exc.status_code != 400:
        return False
    text = str(exc).lower()
    return any(w in text for w in ("response_format", "json_schema", "schema", "not supported"))


class ModelClient:
    """Chat-completion calls with timeouts, retries, structured output and usage records.

    Thread-compatible but not shared across threads by the product: one per fold.
    """

    def __init__(self, config: ModelConfig, *, sleep: Any = time.sleep) -> None:
        """Args: ``config``; ``sleep`` (seconds -> None) is tenacity's, replaceable in tests.

        Raises:
            ModelNotConfigured: ``config.configured`` is false.
        """
        if not config.configured:
            raise ModelNotConfigured(
                "no model configured: set OPENAI_BASE_URL and WRITER_MODEL (and VERIFIER_MODEL)"
            )
        self.config = config
        self._sleep = sleep
        self._json_mode_only = config.response_format == "json_object"
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "not-needed",
            timeout=config.timeout_s,
            max_retries=0,  # tenacity owns the retries, so every attempt is counted
        )

    def model_for(self, role: str) -> str:
        """The model name used for ``role`` (``"writer"`` or ``"verifier"``)."""
        return self.config.verifier if role == "verifier" else self.config.writer_model

    def complete(
        self,
        *,
        role: str,
        messages: Sequence[Mapping[str, str]],
        schema_name: str,
        schema: Mapping[str, Any],
        round: int = 0,
    ) -> Completion:
        """One chat completion asking for JSON that matches ``schema``.

        Args:
            role: ``"writer"`` or ``"verifier"`` (picks the model; named in records).
            messages: chat messages (``{"role": ..., "content": ...}``).
            schema_name: the schema's name for ``json_schema`` mode.
            schema: a JSON schema (from pydantic, :mod:`ledger_app.proposals`).
            round: 0 for the first proposal, 1 for the repair (recorded only).

        Returns:
            :class:`Completion`; the text is not validated here.

        Raises:
            ModelUnavailable: every attempt failed with a transient error.
            ModelRequestRefused: the server refused the request (4xx other than 429).
        """
        model = self.model_for(role)
        record = CallRecord(role=role, model=model, round=round)
        started = time.monotonic()

        def remember(state: RetryCallState) -> None:
            if state.outcome is not None and state.outcome.failed:
                exc = state.outcome.exception()
                if exc is not None:
                    record.errors.append(_describe(exc))

        retrying = Retrying(
            stop=stop_after_attempt(self.config.max_attempts),
            wait=wait_exponential_jitter(
                initial=self.config.backoff_initial_s, max=self.config.backoff_max_s
            ),
            retry=retry_if_exception(lambda e: isinstance(e, TRANSIENT)),
            after=remember,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            response = retrying(self._request, model, messages, schema_name, schema, record)
        except TRANSIENT as exc:
            record.status = "unavailable"
            record.total_s = time.monotonic() - started
            raise ModelUnavailable(role, record.attempts, _describe(exc), record) from exc
        except openai.APIStatusError as exc:
            record.status = "refused"
            record.total_s = time.monotonic() - started
            raise ModelRequestRefused(role, exc.status_code, str(exc)[:300], record) from exc
        except (ValueError, openai.APIResponseValidationError) as exc:
            # a 200 whose body is not a chat completion: an unusable answer, judged as one
            record.status = "malformed"
            record.errors.append(f"malformed response body: {str(exc)[:200]}")
            record.total_s = time.monotonic() - started
            return Completion(text="", record=record)
        record.total_s = time.monotonic() - started
        try:
            usage = getattr(response, "usage", None)
            record.input_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            record.output_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
            choices = getattr(response, "choices", None) or []
            text = (choices[0].message.content or "") if choices else ""
        except (AttributeError, IndexError, TypeError, ValueError) as exc:
            record.status = "malformed"
            record.errors.append(f"malformed response body: {type(exc).__name__}: {exc}"[:300])
            text = ""
        return Completion(text=text if isinstance(text, str) else "", record=record)

    def _request(
        self,
        model: str,
        messages: Sequence[Mapping[str, str]],
        schema_name: str,
        schema: Mapping[str, Any],
        record: CallRecord,
    ) -> Any:
        if not self._json_mode_only:
            fmt: dict[str, Any] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": dict(schema), "strict": False},
            }
            try:
                return self._send(model, messages, fmt, "json_schema", record)
            except openai.BadRequestError as exc:
                if not _schema_refused(exc):
                    raise
                record.errors.append(_describe(exc) + ": no JSON-schema mode, using JSON mode")
                self._json_mode_only = True
        return self._send(model, messages, {"type": "json_object"}, "json_object", record)

    def _send(
        self,
        model: str,
        messages: Sequence[Mapping[str, str]],
        fmt: dict[str, Any],
        fmt_name: str,
        record: CallRecord,
    ) -> Any:
        record.attempts += 1
        record.response_format = fmt_name
        t0 = time.monotonic()
        response = self._client.chat.completions.create(
            model=model,
            messages=[dict(m) for m in messages],  # type: ignore[misc]
            response_format=fmt,  # type: ignore[arg-type]
            temperature=0,
            max_tokens=self.config.max_output_tokens,
        )
        record.latency_s = time.monotonic() - t0
        return response
