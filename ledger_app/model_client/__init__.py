"""The one client for model calls (docs/design.md section 5.3). Pure: no Django.

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
"Its modules:

* :mod:`.config`: :class:`ModelConfig`, where and how to call, read from the settings;
* :mod:`.client`: :class:`ModelClient`, the HTTP call with timeouts, retries and streaming;
* :mod:`.formats`: the structured-output modes, their memory, the format hint, and what a
  server's refusal means (:func:`format_refused`, :func:`context_overflow`);
* :mod:`.records`: :class:`CallRecord`, :class:`Completion` and the client's errors.
"""

from __future__ import annotations

from ledger_app.model_client.client import TRANSIENT, ModelClient, ModelStalled
from ledger_app.model_client.config import ModelConfig
from ledger_app.model_client.formats import (
    FORMAT_MEMORY,
    FORMATS,
    context_overflow,
    format_hint,
    format_refused,
    with_format_hint,
)
from ledger_app.model_client.records import (
    CallRecord,
    Completion,
    ModelError,
    ModelNotConfigured,
    ModelRequestRefused,
    ModelUnavailable,
)

__all__ = [
    "FORMATS",
    "FORMAT_MEMORY",
    "TRANSIENT",
    "CallRecord",
    "Completion",
    "ModelClient",
    "ModelConfig",
    "ModelError",
    "ModelNotConfigured",
    "ModelRequestRefused",
    "ModelStalled",
    "ModelUnavailable",
    "context_overflow",
    "format_hint",
    "format_refused",
    "with_format_hint",
]
