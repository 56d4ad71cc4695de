"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests and benchmarks.

It answers ``POST /v1/chat/completions`` from a queue of scripted replies, so the real
``openai`` client can be tested end to end (docs/design.md 5.3)::

    with ScriptedServer() as server:
        server.push_json({"facts": []})          # a 200 with this JSON as the content
        server.push_error(500)                   # an HTTP 500
        server.push_content("{not json")         # malformed JSON from the "model"
        server.push_json({...}, delay=2.0)       # answered after 2 seconds (timeouts)
        config = server.config(timeout_s=0.5)    # a ModelConfig pointed at it
        ...
        server.requests                          # every request body received, parsed

Each reply is used once, in order; when the queue is empty the server answers 500 with
"script exhausted" (a test that makes one call too many fails loudly). ``answer_all``
sets a reply used for every request instead (benchmarks). ``reject_schema=True`` answers
400 to requests that ask for ``json_schema`` output, as servers without that mode do
(``reject_status=500`` as llama-cpp-python's server does; ``reject_formats`` names the
refused types, e.g. ``("json_schema", "json_object")``). ``window_tokens=N`` answers 400
``context_length_exceeded`` to a request whose messages count more than N tokens
(o200k_base) plus its ``max_tokens``, as a server with an N-token window does.

A request with ``"stream": true`` is answered as server-sent events (chunks of the content,
then the finish reason, then the usage, then ``[DONE]``); ``stall=`` seconds pause the
stream after its first chunk; ``reject_stream_options=True`` answers 400 to a request
carrying ``stream_options``, as servers without usage in streams do. ``finish_reason=``
sets the reply's (``"length"``: cut).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from journal_app.tokens import count_tokens
from ledger_app.model_client import FORMAT_MEMORY, ModelConfig


def prompt_tokens(body: dict[str, Any]) -> int:
    """Tokens of a request's messages (o200k_base, 4 per message for the framing)."""
    messages = body.get("messages") or []
    return sum(count_tokens(str(m.get("content") or "")) + 4 for m in messages)


class ScriptedServer:
    """See the module docstring. Binds 127.0.0.1 on a free port; stop it with :meth:`stop`."""

    def __init__(
        self,
        *,
        reject_schema: bool = False,
        reject_status: int = 400,
        reject_formats: tuple[str, ...] = ("json_schema",),
        window_tokens: int = 0,
        reject_stream_options: bool = False,
    ) -> None:
        self.replies: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.reject_schema = reject_schema
        self.reject_status = reject_status
        self.reject_formats = reject_formats
        self.window_tokens = window_tokens
        self.reject_stream_options = reject_stream_options
        self.always: dict[str, Any] | None = None
        #: streams paused in their ``stall=`` right now (a client that cut one has returned
        #: while the server still sleeps)
        self.stalling = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                try:
                    parsed = json.loads(body or b"{}")
                except ValueError:
                    parsed = {"_unparsed": body.decode("utf-8", "replace")}
                status, payload, delay = server._next(self.path, parsed)
                if delay:
                    time.sleep(delay)
                if status == 200 and isinstance(payload, dict) and parsed.get("stream"):
                    self._stream(payload)
                    return
                ctype = "application/json"
                if isinstance(payload, tuple):
                    payload, ctype = payload
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away

            def _stream(self, payload: dict[str, Any]) -> None:
                choice = payload["choices"][0]
                content = choice["message"]["content"] or ""
                third = max(1, len(content) // 3)
                pieces = [content[i : i + third] for i in range(0, len(content), third)]
                base = {k: payload[k] for k in ("id", "created", "model")}
                base["object"] = "chat.completion.chunk"
                events = [
                    {**base, "choices": [{"index": 0, "delta": {"content": p}}]}
                    for p in pieces or [""]
                ]
                events.append(
                    {
                        **base,
                        "choices": [
                            {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
                        ],
                    }
                )
                events.append({**base, "choices": [], "usage": payload["usage"]})
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for n, event in enumerate(events):
                        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                        self.wfile.flush()
                        if n == 0 and payload.get("_stall"):
                            server.stalling += 1
                            try:
                                time.sleep(payload["_stall"])
                            finally:
                                server.stalling -= 1
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        FORMAT_MEMORY.pop(self.base_url, None)  # a port reused by an earlier test's server
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    # -------------------------------------------------------------- scripting

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def config(self, **overrides: Any) -> ModelConfig:
        """A :class:`ModelConfig` for this server: the settings' figures (the only defaults),
        with this server's address, fast retries and ``overrides``."""
        from django.conf import settings

        values: dict[str, Any] = {
            "base_url": self.base_url,
            "api_key": "test-key",
            "writer_model": "scripted-writer",
            "verifier_model": "scripted-verifier",
            "timeout_s": 2.0,
            "max_attempts": 3,
            "backoff_initial_s": 0.01,
            "backoff_max_s": 0.02,
            "stream": False,  # a test that reads a stream asks for it
            "stall_s": 0.0,
        }
        values.update(overrides)
        return dataclasses.replace(ModelConfig.from_settings(settings), **values)

    def push_content(
        self,
        content: str | None,
        *,
        delay: float = 0.0,
        usage: tuple[int, int] = (100, 20),
        finish_reason: str = "stop",
        stall: float = 0.0,
    ) -> None:
        """A 200 chat completion whose message content is ``content`` verbatim."""
        self.replies.append(
            {
                "content": content,
                "delay": delay,
                "usage": usage,
                "finish_reason": finish_reason,
                "stall": stall,
            }
        )

    def push_json(
        self,
        obj: Any,
        *,
        delay: float = 0.0,
        usage: tuple[int, int] = (100, 20),
        finish_reason: str = "stop",
        stall: float = 0.0,
    ) -> None:
        """A 200 chat completion whose content is ``json.dumps(obj)``."""
        self.push_content(
            json.dumps(obj), delay=delay, usage=usage, finish_reason=finish_reason, stall=stall
        )

    def push_error(self, status: int, *, delay: float = 0.0, message: str = "scripted") -> None:
        """An HTTP error reply (500, 503, 429, 400, ...)."""
        self.replies.append({"status": status, "delay": delay, "message": message})

    def push_raw(
        self, body: bytes, *, status: int = 200, content_type: str = "application/json"
    ) -> None:
        """A reply whose HTTP body is ``body`` (e.g. not JSON at all, or HTML)."""
        self.replies.append({"raw": body, "status": status, "content_type": content_type})

    def answer_all(self, content: str, *, finish_reason: str = "stop") -> None:
        """Answer every request with ``content`` at once (the queue is ignored)."""
        self.always = {
            "content": content,
            "delay": 0.0,
            "usage": (100, 20),
            "stall": 0.0,
            "finish_reason": finish_reason,
        }

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -------------------------------------------------------------- serving

    def _next(self, path: str, body: dict[str, Any]) -> tuple[int, Any, float]:
        with self._lock:
            self.requests.append(body)
            if not path.rstrip("/").endswith("/chat/completions"):
                return 404, {"error": {"message": f"no route {path}"}}, 0.0
            fmt = (body.get("response_format") or {}).get("type")
            if self.reject_schema and fmt in self.reject_formats:
                return (
                    self.reject_status,
                    {"error": {"message": f"response_format {fmt} is not supported"}},
                    0.0,
                )
            if self.reject_stream_options and body.get("stream_options"):
                return 400, {"error": {"message": "unknown field stream_options"}}, 0.0
            if self.window_tokens:
                asked = prompt_tokens(body) + int(body.get("max_tokens") or 0)
                if asked > self.window_tokens:
                    message = (
                        f"This model's maximum context length is {self.window_tokens} "
                        f"tokens. However, you requested {asked} tokens."
                    )
                    error = {"message": message, "code": "context_length_exceeded"}
                    return 400, {"error": error}, 0.0
            reply = self.always or (self.replies.popleft() if self.replies else None)
        if reply is None:
            return 500, {"error": {"message": "script exhausted"}}, 0.0
        if "raw" in reply:
            return reply["status"], (reply["raw"], reply["content_type"]), 0.0
        if "status" in reply:
            return reply["status"], {"error": {"message": reply["message"]}}, reply["delay"]
        prompt, completion = reply["usage"]
        payload = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply["content"]},
                    "finish_reason": reply.get("finish_reason", "stop"),
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
        if reply.get("stall"):
            payload["_stall"] = reply["stall"]
        return 200, payload, reply["delay"]
