"""The one client module for model calls (DESIGN.md section 5.3). Pure: no Django.

Every writer and verifier call goes through :class:`ModelClient`, a small wrapper around the
official ``openai`` package pointed at ``OPENAI_BASE_URL``, so any OpenAI-compatible server
(OpenAI, vLLM, Ollama, llama.cpp) works. It adds what the product needs around a call:

* a timeout per call (``MODEL_TIMEOUT_SECONDS``) and **retries with exponential backoff and
  jitter** on transient failures only (``tenacity``): a refused or dropped connection, HTTP
  429 and HTTP 5xx. A request the client timed out on is **not** retried unless
  ``MODEL_RETRY_ON_TIMEOUT`` (a single-slot local server would queue a second full
  generation behind the abandoned one). Anything else (400, 401, 404, ...) is raised at once;
* **streaming reads** (``MODEL_STREAM``, default on): the answer arrives in chunks, progress
  is logged, and a stream silent for ``MODEL_STALL_SECONDS`` after its first chunk is cut (a
  stalled server), while the prompt's reading before the first chunk and a slow but
  progressing generation run up to ``MODEL_TIMEOUT_SECONDS``;
* **structured output** in three modes (``MODEL_RESPONSE_FORMAT``): ``json_schema`` (the
  server enforces the schema), ``json_object`` (JSON mode) and ``none`` (plain text). In the
  last two the schema and a compact example are added to the system message, because the
  server does not enforce them. A server that refuses a format (HTTP 400, 422 or 500 whose
  message names ``response_format``/``json_schema``) is asked once more in the next mode
  down (``json_schema`` -> ``json_object`` -> ``none``) at once, not as a transient retry, and
  that is remembered for the process and base URL (:data:`FORMAT_MEMORY`);
* a :class:`CallRecord` per call: role, model, input and output tokens as the server
  reported them, latency of the answering request and total time including retries
  (seconds), the number of attempts, the response format used and the ``finish_reason``
  (``length``: the answer was cut at ``max_tokens``). Folds copy these into their manifest.

The README's "Use a local model" section gives tested settings for Ollama, llama.cpp and vLLM.

When the retries are used up, :class:`ModelUnavailable` is raised with the records of
every attempt; the fold service then records the fold as failed and writes nothing else.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
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

log = logging.getLogger(__name__)

#: Errors worth another attempt: they say nothing about the request itself. A timeout
#: (:class:`openai.APITimeoutError`, a subclass of the connection error) only when the
#: configuration asks for it (``retry_on_timeout``).
TRANSIENT = (
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.RateLimitError,
    openai.InternalServerError,
)

#: Structured-output modes, strongest first; a refused mode steps down to the next.
FORMATS = ("json_schema", "json_object", "none")

#: base URL -> the mode its server accepted after refusing a stronger one (per process).
FORMAT_MEMORY: dict[str, str] = {}
_MEMORY_LOCK = threading.Lock()

#: Seconds between two progress lines of a streamed answer in the log.
PROGRESS_EVERY_S = 10.0


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
        response_format: ``"json_schema"`` (default), ``"json_object"`` (JSON mode only) or
            ``"none"`` (plain text; the schema goes in the prompt).
        max_output_tokens: ``max_tokens`` of each request (tokens).
        retry_on_timeout: retry a request the client timed out on (default no).
        stream: read answers as a stream (chunks), cutting a stream silent for
            ``stall_s`` seconds; ``timeout_s`` then bounds the whole answer.
        stall_s: seconds without a chunk before a streamed answer is cut (0: ``timeout_s``).
        writer_window: the writer model's context window in tokens (0: unbounded); the
            prompt, the ledger state and the output reserve of a writer call fit in it.
        verifier_window: the same for the verifier model (0: the writer's).
    """

    base_url: str
    api_key: str
    writer_model: str
    verifier_model: str
    timeout_s: float
    max_attempts: int
    backoff_initial_s: float
    backoff_max_s: float
    response_format: str
    max_output_tokens: int
    retry_on_timeout: bool
    stream: bool
    stall_s: float
    writer_window: int
    verifier_window: int

    def __post_init__(self) -> None:
        if self.response_format not in FORMATS:
            raise ValueError(
                f"MODEL_RESPONSE_FORMAT must be one of {', '.join(FORMATS)}, "
                f"not {self.response_format!r}"
            )

    def window_for(self, role: str) -> int:
        """The context window (tokens) of ``role``'s model; 0 when unbounded."""
        if role == "verifier":
            return self.verifier_window or self.writer_window
        return self.writer_window

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
        ``MODEL_MAX_OUTPUT_TOKENS``, ``MODEL_RETRY_ON_TIMEOUT``, ``MODEL_STREAM``,
        ``MODEL_STALL_SECONDS``, ``WRITER_WINDOW_TOKENS`` / ``VERIFIER_WINDOW_TOKENS`` (else
        the model's entry in ``MODEL_WINDOWS``) from a settings object (Django's, or any
        namespace holding every one of them). The defaults live in ``config/settings.py``
        only: nothing here falls back to a figure of its own.

        Raises:
            AttributeError: ``settings`` lacks one of the names above.
            ValueError: ``MODEL_RESPONSE_FORMAT`` is not one of :data:`FORMATS`.
        """

        def get(name: str) -> Any:
            return getattr(settings, name)  # no default here: the figures live in settings

        windows = get("MODEL_WINDOWS") or {}
        writer_model = str(get("WRITER_MODEL") or "")
        verifier_model = str(get("VERIFIER_MODEL") or "") or writer_model
        return cls(
            base_url=str(get("OPENAI_BASE_URL") or ""),
            api_key=str(get("OPENAI_API_KEY") or ""),
            writer_model=writer_model,
            verifier_model=str(get("VERIFIER_MODEL") or ""),
            timeout_s=float(get("MODEL_TIMEOUT_SECONDS")),
            max_attempts=max(1, int(get("MODEL_MAX_ATTEMPTS"))),
            backoff_initial_s=float(get("MODEL_BACKOFF_SECONDS")),
            backoff_max_s=float(get("MODEL_BACKOFF_MAX_SECONDS")),
            response_format=str(get("MODEL_RESPONSE_FORMAT")),
            max_output_tokens=int(get("MODEL_MAX_OUTPUT_TOKENS")),
            retry_on_timeout=bool(get("MODEL_RETRY_ON_TIMEOUT")),
            stream=bool(get("MODEL_STREAM")),
            stall_s=float(get("MODEL_STALL_SECONDS")),
            writer_window=int(get("WRITER_WINDOW_TOKENS") or windows.get(writer_model, 0)),
            verifier_window=int(get("VERIFIER_WINDOW_TOKENS") or windows.get(verifier_model, 0)),
        )


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


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return f"{name} (HTTP {status})" if status else f"{name}: {str(exc)[:200]}"


#: Words of an error message that say the server refused the requested output format.
_FORMAT_WORDS = ("response_format", "json_schema", "json schema", "grammar", "not supported")


def format_refused(exc: openai.APIStatusError) -> bool:
    """True when ``exc`` is the server refusing the output format, not the request: HTTP
    400, 422 or 500 whose message names ``response_format``, ``json_schema`` or a grammar
    (llama-cpp-python's server answers 500, vLLM 400, others 422)."""
    if exc.status_code not in (400, 422, 500):
        return False
    text = str(exc).lower()
    return any(w in text for w in _FORMAT_WORDS)


def context_overflow(exc: BaseException) -> bool:
    """True when ``exc`` says the prompt does not fit the model's window (HTTP 400 or 413
    ``context_length_exceeded``, "maximum context length", "exceeds the context window")."""
    if getattr(exc, "status_code", None) not in (400, 413, 422, 500):
        return False
    text = str(exc).lower()
    return any(
        w in text
        for w in (
            "context_length_exceeded",
            "maximum context length",
            "context window",
            "context length",
            "too many tokens",
            "exceeds the available context",
        )
    )


def format_hint(schema: Mapping[str, Any], example: Any = None) -> str:
    """What the system message carries when the server does not enforce the schema: one
    compact example of the answer (when given) and the JSON schema, minified."""
    lines = [
        "",
        "## Answer format",
        "Answer with one JSON object and nothing else: no prose, no Markdown fence.",
    ]
    if example is not None:
        lines += [
            "An example answer (use these field names exactly):",
            json.dumps(example, ensure_ascii=False, separators=(",", ":")),
        ]
    lines += [
        "The JSON schema every answer follows:",
        json.dumps(schema, ensure_ascii=False, separators=(",", ":")),
    ]
    return "\n".join(lines)


def with_format_hint(
    messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any], example: Any = None
) -> list[dict[str, str]]:
    """``messages`` with :func:`format_hint` appended to the first system message (a new
    system message first when there is none)."""
    hint = format_hint(schema, example)
    out = [dict(m) for m in messages]
    for m in out:
        if m.get("role") == "system":
            m["content"] = str(m.get("content", "")) + "\n" + hint
            return out
    return [{"role": "system", "content": hint.strip()}, *out]


def _remembered(base_url: str, configured: str) -> str:
    with _MEMORY_LOCK:
        known = FORMAT_MEMORY.get(base_url, configured)
    return max(configured, known, key=FORMATS.index)


def _remember(base_url: str, mode: str) -> None:
    with _MEMORY_LOCK:
        FORMAT_MEMORY[base_url] = max(mode, FORMAT_MEMORY.get(base_url, mode), key=FORMATS.index)


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
        return _remembered(self.config.base_url, self.config.response_format)

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
            record.status = "unavailable"
            record.total_s = time.monotonic() - started
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
                _remember(self.config.base_url, lower)
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
        finished, stalled = threading.Event(), threading.Event()

        def watchdog(stream: Any) -> None:
            while not finished.wait(min(0.1, stall / 4)):
                if last_chunk and time.monotonic() - last_chunk[0] > stall:
                    stalled.set()
                    stream.close()  # the read blocked in the loop below ends
                    return

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
            with stream:
                for chunk in stream:
                    now = time.monotonic()
                    last_chunk[:] = [now]
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
            answer.malformed = "the stream carried no chat-completion chunk (empty or not SSE)"
        return answer


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
