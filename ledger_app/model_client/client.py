"""The HTTP call: :class:`ModelClient`, timeouts, retries, streaming, format fallback. Pure.

Each call is a chat completion through the official ``openai`` package; transient failures
(:data:`TRANSIENT`) are retried with exponential backoff and jitter (``tenacity``), a stream
silent for ``stall_s`` is cut (:class:`ModelStalled`), a refused output format steps down a
mode, and the call's :class:`~ledger_app.model_client.records.CallRecord` is filled as it
goes. The package docstring (:mod:`ledger_app.model_client`) says the rules.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import openai
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    stop_never,
    wait_exponential_jitter,
)

from ledger_app.model_client.config import ModelConfig
from ledger_app.model_client.formats import (
    FORMATS,
    format_refused,
    remember_format,
    remembered_format,
    with_format_hint,
)
from ledger_app.model_client.records import (
    CallRecord,
    Completion,
    ModelNotConfigured,
    ModelRequestRefused,
    ModelUnavailable,
)

#: the logger of the model client (the package's name, as before the split)
log = logging.getLogger("ledger_app.model_client")

#: Errors worth another attempt: they say nothing about the request itself. A timeout
#: (:class:`openai.APITimeoutError`, a subclass of the connection error) only when the
#: configuration asks for it (``retry_on_timeout``).
TRANSIENT = (
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.RateLimitError,
    openai.InternalServerError,
)

#: Server errors that say the server will never serve this request (501 Not Implemented: a
#: plain web server at the base URL; 505): refused at once, not retried as transient.
PERMANENT_STATUS = (501, 505)

#: Seconds between two progress lines of a streamed answer in the log.
PROGRESS_EVERY_S = 10.0


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return f"{name} (HTTP {status})" if status else f"{name}: {str(exc)[:200]}"


@dataclass
class _Answer:
    """One answered request, streamed or not: text, finish reason, usage, or why the body
    is not a chat completion (``malformed``)."""

    text: str = ""
    finish_reason: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    malformed: str = ""


class ModelStalled(openai.APITimeoutError):
    """A streamed answer stopped arriving for ``stall_s`` seconds, or ran past the call's
    timeout (a timeout: retried only when ``retry_on_timeout``)."""

    def __init__(self, message: str) -> None:
        super().__init__(request=httpx.Request("POST", "http://model/chat/completions"))
        self.message = message

    def __str__(self) -> str:
        return self.message


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
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "not-needed",
            timeout=config.timeout_s,
            max_retries=0,  # tenacity owns the retries, so every attempt is counted
        )

    @property
    def mode(self) -> str:
        """The structured-output mode the next request uses (configured, or remembered
        for this base URL after a refusal)."""
        return remembered_format(self.config.base_url, self.config.response_format)

    def model_for(self, role: str) -> str:
        """The model name used for ``role`` (``"writer"`` or ``"verifier"``)."""
        return self.config.verifier if role == "verifier" else self.config.writer_model

    def prepared(
        self,
        messages: Sequence[Mapping[str, str]],
        schema: Mapping[str, Any],
        example: Any = None,
        mode: str | None = None,
    ) -> list[dict[str, str]]:
        """The messages as sent in ``mode`` (default: :attr:`mode`): unchanged for
        ``json_schema``, with :func:`format_hint` otherwise (callers size prompts on it)."""
        if (mode or self.mode) == "json_schema":
            return [dict(m) for m in messages]
        return with_format_hint(messages, schema, example)

    def complete(
        self,
        *,
        role: str,
        messages: Sequence[Mapping[str, str]],
        schema_name: str,
        schema: Mapping[str, Any],
        round: int = 0,
        example: Any = None,
        max_tokens: int | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        """One chat completion asking for JSON that matches ``schema``.

        Args:
            role: ``"writer"`` or ``"verifier"`` (picks the model; named in records).
            messages: chat messages (``{"role": ..., "content": ...}``).
            schema_name: the schema's name for ``json_schema`` mode.
            schema: a JSON schema (from pydantic, :mod:`ledger_app.proposals`).
            round: 0 for the first proposal, 1 for the repair (recorded only).
            example: a compact example answer, shown with the schema when the server does
                not enforce it (``json_object``/``none`` modes).
            max_tokens: the answer's limit (tokens); default ``max_output_tokens``.
            timeout_s: this call's limit (seconds), at most the configured one (a caller
                inside a budget: the recovery analyst); retries stop when it is spent.

        Returns:
            :class:`Completion`; the text is not validated here. A body that is not a chat
            completion (HTML, empty, no choices) is an empty text with ``status``
            ``malformed`` and the cause in ``errors``; ``record.finish_reason`` says
            whether the answer was cut (``length``).

        Raises:
            ModelUnavailable: every attempt failed with a transient error (a timeout counts
                only once unless ``retry_on_timeout``).
            ModelRequestRefused: the server refused the request (4xx other than 429, or a
                format refusal in the last mode); ``context_overflow(exc.__cause__)`` tells a
                prompt too long for the window.
        """
        model = self.model_for(role)
        limit = int(max_tokens or self.config.max_output_tokens)
        timeout = (
            self.config.timeout_s if timeout_s is None else min(timeout_s, self.config.timeout_s)
        )
        record = CallRecord(role=role, model=model, round=round, max_tokens=limit)
        started = time.monotonic()

        def remember(state: RetryCallState) -> None:
            if state.outcome is not None and state.outcome.failed:
                exc = state.outcome.exception()
                if exc is not None:
                    record.errors.append(_describe(exc))

        def transient(exc: BaseException) -> bool:
            if getattr(exc, "status_code", None) in PERMANENT_STATUS:
                return False
            if isinstance(exc, openai.APITimeoutError):
                return self.config.retry_on_timeout
            return isinstance(exc, TRANSIENT)

        retrying = Retrying(
            stop=stop_after_attempt(self.config.max_attempts)
            | (stop_after_delay(timeout) if timeout_s is not None else stop_never),
            wait=wait_exponential_jitter(
                initial=self.config.backoff_initial_s, max=self.config.backoff_max_s
            ),
            retry=retry_if_exception(transient),
            after=remember,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            answer = retrying(
                self._request, model, messages, schema_name, schema, example, limit, record, timeout
            )
        except TRANSIENT as exc:
            record.total_s = time.monotonic() - started
            status = getattr(exc, "status_code", None)
            if isinstance(exc, openai.APIStatusError) and status in PERMANENT_STATUS:
                record.status = "refused"
                record.errors.append(_describe(exc))
                raise ModelRequestRefused(role, exc.status_code, str(exc)[:300], record) from exc
            record.status = "unavailable"
            if isinstance(exc, openai.APITimeoutError) and not self.config.retry_on_timeout:
                record.errors.append(
                    "timed out; not retried (MODEL_RETRY_ON_TIMEOUT is off: a local server "
                    "would still be generating the abandoned answer)"
                )
            raise ModelUnavailable(role, record.attempts, _describe(exc), record) from exc
        except openai.APIStatusError as exc:
            record.status = "refused"
            record.total_s = time.monotonic() - started
            record.errors.append(_describe(exc))
            raise ModelRequestRefused(role, exc.status_code, str(exc)[:300], record) from exc
        except (ValueError, openai.APIResponseValidationError) as exc:
            doc = getattr(exc, "doc", None)
            if isinstance(doc, str) and not doc.strip():
                answer = _Answer(malformed="empty body")
            elif isinstance(doc, str):
                answer = _Answer(malformed=f"not a chat completion (not JSON): {doc[:80]!r}")
            else:
                answer = _Answer(malformed=f"{type(exc).__name__}: {str(exc)[:200]}")
        record.total_s = time.monotonic() - started
        record.input_tokens, record.output_tokens = answer.input_tokens, answer.output_tokens
        record.finish_reason = answer.finish_reason
        if answer.malformed:
            record.status = "malformed"
            record.errors.append(f"malformed response body: {answer.malformed}"[:300])
            return Completion(text="", record=record)
        if record.truncated:
            record.errors.append(f"cut at max_tokens ({limit}): finish_reason length")
        return Completion(text=answer.text, record=record)

    def _request(
        self,
        model: str,
        messages: Sequence[Mapping[str, str]],
        schema_name: str,
        schema: Mapping[str, Any],
        example: Any,
        limit: int,
        record: CallRecord,
        timeout: float,
    ) -> _Answer:
        mode = self.mode
        while True:
            if mode == "json_schema":
                fmt: dict[str, Any] | None = {
                    "type": "json_schema",
                    "json_schema": {"name": schema_name, "schema": dict(schema), "strict": False},
                }
            else:
                fmt = {"type": "json_object"} if mode == "json_object" else None
            sent = self.prepared(messages, schema, example, mode)
            try:
                return self._send(model, sent, fmt, mode, limit, record, timeout)
            except openai.APIStatusError as exc:
                if mode == FORMATS[-1] or not format_refused(exc):
                    raise
                lower = FORMATS[FORMATS.index(mode) + 1]
                record.errors.append(
                    f"{_describe(exc)}: the server refused response_format {mode}; "
                    f"using {lower} (schema in the prompt), remembered for this server"
                )
                if mode == "json_schema":
                    record.errors[-1] += " (no JSON-schema mode)"
                remember_format(self.config.base_url, lower)
                mode = lower

    def _send(
        self,
        model: str,
        messages: list[dict[str, str]],
        fmt: dict[str, Any] | None,
        fmt_name: str,
        limit: int,
        record: CallRecord,
        timeout: float,
    ) -> _Answer:
        record.attempts += 1
        record.response_format = fmt_name
        t0 = time.monotonic()
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": limit,
        }
        if fmt is not None:
            kwargs["response_format"] = fmt
        if self.config.stream:
            answer = self._stream(kwargs, record, t0, timeout)
        else:
            answer = _plain(self._client.chat.completions.create(**kwargs, timeout=timeout))
        record.latency_s = time.monotonic() - t0
        return answer

    def _stream(
        self, kwargs: dict[str, Any], record: CallRecord, t0: float, limit_s: float
    ) -> _Answer:
        """Read a streamed answer chunk by chunk: a gap over ``stall_s`` between chunks or a
        total over ``limit_s`` raises :class:`ModelStalled` (a timeout).

        The wait for the first chunk is bounded by ``limit_s`` only: a server sends nothing
        while it reads the prompt (minutes for 8,000 tokens on a CPU), and that is not a
        stall. From the first chunk on, a watchdog closes the stream once no chunk came for
        ``stall_s`` seconds."""
        stall = min(self.config.stall_s or limit_s, limit_s)
        timeout = httpx.Timeout(limit_s)
        answer, parts, last_log = _Answer(), [], t0
        last_chunk: list[float] = []  # the time of the latest chunk, once one came
        chunks, content_type = 0, ""
        finished, stalled = threading.Event(), threading.Event()

        def watchdog(stream: Any) -> None:
            while not finished.wait(min(0.1, stall / 4)):
                if last_chunk and time.monotonic() - last_chunk[0] > stall:
                    stalled.set()
                    _cut(stream)  # the read blocked in the loop below ends
                    return

        log.info(
            "%s: request sent to %s, waiting for the first chunk (the server reads the prompt)",
            record.role,
            record.model,
        )
        try:
            try:
                stream = self._client.chat.completions.create(
                    **kwargs, stream=True, stream_options={"include_usage": True}, timeout=timeout
                )
            except openai.BadRequestError as exc:
                if "stream_options" not in str(exc):
                    raise
                # a server without usage in streams: the answer comes without token figures
                record.errors.append(f"{_describe(exc)}: no stream_options; usage not reported")
                stream = self._client.chat.completions.create(
                    **kwargs, stream=True, timeout=timeout
                )
            threading.Thread(target=watchdog, args=(stream,), daemon=True).start()
            response = getattr(stream, "response", None)
            content_type = str(getattr(response, "headers", {}).get("content-type", ""))
            with stream:
                for chunk in stream:
                    now = time.monotonic()
                    if not last_chunk:
                        log.info("%s: first chunk after %.0f s", record.role, now - t0)
                    last_chunk[:] = [now]
                    chunks += 1
                    usage = getattr(chunk, "usage", None)
                    if usage is not None:
                        answer.input_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
                        answer.output_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
                    for choice in getattr(chunk, "choices", None) or []:
                        delta = getattr(choice, "delta", None)
                        if delta is not None and isinstance(delta.content, str):
                            parts.append(delta.content)
                        if choice.finish_reason:
                            answer.finish_reason = str(choice.finish_reason)
                    if now - last_log >= PROGRESS_EVERY_S:
                        last_log = now
                        log.info(
                            "%s: %d characters after %.0f s",
                            record.role,
                            sum(map(len, parts)),
                            now - t0,
                        )
                    if now - t0 > limit_s:
                        raise ModelStalled(
                            f"the answer ran past its time limit ({limit_s:g} s) while streaming"
                        )
        except ModelStalled:
            raise
        except (httpx.TimeoutException, openai.APITimeoutError) as exc:
            if stalled.is_set():
                raise ModelStalled(
                    f"no chunk for {stall:g} s (MODEL_STALL_SECONDS): the stream stalled"
                ) from exc
            raise ModelStalled(
                f"no answer within its time limit ({limit_s:g} s, MODEL_TIMEOUT_SECONDS)"
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.StreamClosed) as exc:
            if stalled.is_set():
                raise ModelStalled(
                    f"no chunk for {stall:g} s (MODEL_STALL_SECONDS): the stream stalled"
                ) from exc
            raise openai.APIConnectionError(
                message=f"the stream broke: {exc}",
                request=httpx.Request("POST", self.config.base_url),
            ) from exc
        finally:
            finished.set()
        if stalled.is_set():
            raise ModelStalled(
                f"no chunk for {stall:g} s (MODEL_STALL_SECONDS): the stream stalled"
            )
        answer.text = "".join(parts)
        if not parts and not answer.finish_reason:
            answer.malformed = _no_chunk(chunks, content_type)
        return answer


def _no_chunk(chunks: int, content_type: str) -> str:
    """Why a streamed 200 carried no answer, from what was seen: events without choices,
    a body that is not an event stream (an HTML page: a web server, a proxy's error page), or
    nothing at all."""
    if chunks:
        return f"a 200 whose {chunks} stream event(s) carried no choices (no answer text)"
    kind = content_type.split(";")[0].strip()
    if kind and kind != "text/event-stream":
        return (
            f"not an event stream: the server answered {kind} (not SSE), no chat-completion chunk"
        )
    return "empty stream: no chat-completion chunk came"


def _cut(stream: Any) -> None:
    """End a stream another thread is blocked reading: shut its socket down (closing the
    response alone does not wake a read already waiting in ``recv``; the read then ends at
    once with a closed connection), then close it."""
    response = getattr(stream, "response", None)
    network = getattr(response, "extensions", {}).get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed
    try:
        stream.close()
    except (httpx.HTTPError, OSError, RuntimeError):
        pass  # closing a stream another thread is reading may complain; the socket is down


def _plain(response: Any) -> _Answer:
    """An :class:`_Answer` from a non-streamed response (or why it is not a completion)."""
    if isinstance(response, str | bytes):
        shown = (
            response[:80] if isinstance(response, str) else response[:80].decode(errors="replace")
        )
        return _Answer(malformed=f"not a chat completion: {shown!r}" if shown else "empty body")
    try:
        usage = getattr(response, "usage", None)
        answer = _Answer(
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        )
        choices = getattr(response, "choices", None)
        if not choices:
            answer.malformed = "a 200 with no choices"
            return answer
        if not isinstance(choices, list):
            answer.malformed = f"choices is a {type(choices).__name__}, not a list"
            return answer
        answer.finish_reason = str(choices[0].finish_reason or "")
        text = choices[0].message.content
        answer.text = text if isinstance(text, str) else ""
        return answer
    except (AttributeError, IndexError, TypeError, ValueError) as exc:
        return _Answer(malformed=f"{type(exc).__name__}: {exc}"[:300])
