"""Where and how to call the models: :class:`ModelConfig`, read from the settings. Pure.

The figures' defaults live in ``config/settings.py`` only (README "Use a local model");
:meth:`ModelConfig.from_settings` reads them from any object that holds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger_app.model_client.formats import FORMATS


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
