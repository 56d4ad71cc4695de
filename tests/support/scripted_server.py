"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests and benchmarks.

It answers ``POST /v1/chat/completions`` from a queue of scripted replies, so the real
``openai`` client can be tested end to end (DESIGN.md 5.3)::

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
400 to requests that ask for ``json_schema`` output, as servers without that mode do.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ledger_app.model_client import ModelConfig


class ScriptedServer:
    """See the module docstring. Binds 127.0.0.1 on a free port; stop it with :meth:`stop`."""

    def __init__(self, *, reject_schema: bool = False) -> None:
        self.replies: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.reject_schema = reject_schema
        self.always: dict[str, Any] | None = None
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
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    # -------------------------------------------------------------- scripting

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def config(self, **overrides: Any) -> ModelConfig:
        """A :class:`ModelConfig` for this server (fast retries unless overridden)."""
        values: dict[str, Any] = {
            "base_url": self.base_url,
            "api_key": "test-key",
            "writer_model": "scripted-writer",
            "verifier_model": "scripted-verifier",
            "timeout_s": 2.0,
            "max_attempts": 3,
            "backoff_initial_s": 0.01,
            "backoff_max_s": 0.02,
        }
        values.update(overrides)
        return ModelConfig(**values)

    def push_content(
        self, content: str | None, *, delay: float = 0.0, usage: tuple[int, int] = (100, 20)
    ) -> None:
        """A 200 chat completion whose message content is ``content`` verbatim."""
        self.replies.append({"content": content, "delay": delay, "usage": usage})

    def push_json(
        self, obj: Any, *, delay: float = 0.0, usage: tuple[int, int] = (100, 20)
    ) -> None:
        """A 200 chat completion whose content is ``json.dumps(obj)``."""
        self.push_content(json.dumps(obj), delay=delay, usage=usage)

    def push_error(self, status: int, *, delay: float = 0.0, message: str = "scripted") -> None:
        """An HTTP error reply (500, 503, 429, 400, ...)."""
        self.replies.append({"status": status, "delay": delay, "message": message})

    def push_raw(self, body: bytes, *, status: int = 200) -> None:
        """A reply whose HTTP body is ``body`` (e.g. not JSON at all)."""
        self.replies.append({"raw": body, "status": status})

    def answer_all(self, content: str) -> None:
        """Answer every request with ``content`` at once (the queue is ignored)."""
        self.always = {"content": content, "delay": 0.0, "usage": (100, 20)}

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
            if self.reject_schema and fmt == "json_schema":
                return (
                    400,
                    {"error": {"message": "response_format json_schema is not supported"}},
                    0.0,
                )
            reply = self.always or (self.replies.popleft() if self.replies else None)
        if reply is None:
            return 500, {"error": {"message": "script exhausted"}}, 0.0
        if "raw" in reply:
            return reply["status"], reply["raw"], 0.0
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
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
        return 200, payload, reply["delay"]
