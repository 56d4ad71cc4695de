"""A scripted model server on 127.0.0.1 speaking OpenAI Chat Completions and Anthropic Messages.

Like :mod:`tests.support.scripted_server`, with what the proxy needs besides: tool calls,
server-sent event streams (``"stream": true``), slow streams, errors and delays::

    with ScriptedUpstream() as up:
        up.push(text="hello")                                  # a plain answer
        up.push(calls=[("call_1", "ls", {"path": "."})])        # tool calls
        up.push(status=500)                                     # an HTTP error
        up.push(text="late", delay=3)                           # answered after 3 s
        up.push(text="slow stream", chunk_delay=0.2)            # streamed a piece at a time
        up.requests                                             # every body received

``POST /v1/chat/completions`` answers in OpenAI's shape, ``POST /v1/messages`` in
Anthropic's; the same script serves both. An empty script answers 500 "script exhausted".
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedUpstream:
    def __init__(self) -> None:
        self.replies: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                server.paths.append(("GET", self.path))
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                if self.path.rstrip("/").endswith("/models"):
                    models = {"object": "list", "data": [{"id": "scripted", "object": "model"}]}
                    server._json(self, 200, models, {"x-request-id": "req_models"})
                else:
                    server._json(self, 404, {"error": {"message": "no such path"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.paths.append(("POST", self.path))
                if self.path.endswith("/count_tokens") or self.path.endswith("/embeddings"):
                    server.requests.append(body)
                    server._json(self, 200, {"input_tokens": 42, "path": self.path})
                    return
                with server._lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    reply = server.replies.popleft() if server.replies else {"status": 500}
                try:
                    server._answer(self, body, reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def openai_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def push(
        self,
        *,
        text: str = "",
        calls: list[tuple[str, str, dict[str, Any]]] | None = None,
        status: int = 200,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        usage: tuple[int, int] = (120, 30),
        echo: bool = False,
        headers: dict[str, str] | None = None,
        reasoning: str = "",
    ) -> None:
        """Script the next answer (``echo``: the text is ``re: `` and the request's last user
        message; ``headers``: sent with the answer)."""
        self.replies.append(
            {
                "echo": echo,
                "headers": headers or {},
                "reasoning": reasoning,
                "text": text,
                "calls": calls or [],
                "status": status,
                "delay": delay,
                "chunk_delay": chunk_delay,
                "usage": usage,
            }
        )

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedUpstream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------ answers

    def _answer(self, h: BaseHTTPRequestHandler, body: dict[str, Any], r: dict[str, Any]) -> None:
        anthropic = h.path.rstrip("/").endswith("/v1/messages")
        responses = h.path.rstrip("/").endswith("/responses")
        if r.get("delay"):
            time.sleep(r["delay"])
        if r.get("echo"):
            r = {**r, "text": "re: " + _last_user_text(body)}
        if r["status"] != 200:
            self._json(
                h,
                r["status"],
                {"error": {"message": "scripted failure", "type": "server"}},
                r.get("headers"),
            )
            return
        if body.get("stream"):
            if responses:
                events = self._responses_events(body, r)
            elif anthropic:
                events = self._anthropic_events(body, r)
            else:
                events = self._openai_chunks(body, r)
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Connection", "close")
            for name, value in (r.get("headers") or {}).items():
                h.send_header(name, value)
            h.end_headers()
            for event in events:
                h.wfile.write(event.encode())
                h.wfile.flush()
                if r["chunk_delay"]:
                    time.sleep(r["chunk_delay"])
            h.close_connection = True
            return
        if responses:
            payload = self._responses(body, r)
        else:
            payload = self._anthropic(body, r) if anthropic else self._openai(body, r)
        self._json(h, 200, payload, r.get("headers"))

    @staticmethod
    def _json(
        h: BaseHTTPRequestHandler,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(data)

    def _responses(self, body: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
        """A Responses API response: reasoning (encrypted), message, function calls."""
        output: list[dict[str, Any]] = []
        if r.get("reasoning"):
            output.append(
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [],
                    "encrypted_content": r["reasoning"],
                }
            )
        if r["text"]:
            output.append(
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": r["text"], "annotations": []}],
                }
            )
        for i, name, args in r["calls"]:
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{i}",
                    "call_id": i,
                    "name": name,
                    "arguments": json.dumps(args),
                    "status": "completed",
                }
            )
        p, c = r["usage"]
        return {
            "id": f"resp_{len(self.requests)}",
            "object": "response",
            "model": body.get("model", "scripted"),
            "status": "completed",
            "output": output,
            "usage": {"input_tokens": p, "output_tokens": c, "total_tokens": p + c},
        }

    def _responses_events(self, body: dict[str, Any], r: dict[str, Any]) -> list[str]:
        final = self._responses(body, r)
        start = {**final, "status": "in_progress", "output": []}

        def event(data: dict[str, Any]) -> str:
            return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"

        out = [event({"type": "response.created", "response": start})]
        for n, item in enumerate(final["output"]):
            out.append(event({"type": "response.output_item.added", "output_index": n}))
            if item["type"] == "message":
                for word in r["text"].split(" "):
                    delta = {"type": "response.output_text.delta", "output_index": n}
                    out.append(event({**delta, "delta": word}))
            out.append(
                event({"type": "response.output_item.done", "output_index": n, "item": item})
            )
        out.append(event({"type": "response.completed", "response": final}))
        return out

    def _openai(self, body: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": r["text"] or None}
        if r["calls"]:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, n, a in r["calls"]
            ]
        p, c = r["usage"]
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if r["calls"] else "stop",
                }
            ],
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
        }

    def _openai_chunks(self, body: dict[str, Any], r: dict[str, Any]) -> list[str]:
        base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0}
        base["model"] = body.get("model", "scripted")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            data = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            return f"data: {json.dumps(data)}\n\n"

        out = [chunk({"role": "assistant", "content": ""})]
        words = r["text"].split(" ")
        for k, word in enumerate(words):
            if r["text"]:
                out.append(chunk({"content": word + (" " if k < len(words) - 1 else "")}))
        for n, (i, name, args) in enumerate(r["calls"]):
            raw = json.dumps(args)
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": n,
                                "id": i,
                                "type": "function",
                                "function": {"name": name, "arguments": raw[:5]},
                            }
                        ]
                    }
                )
            )
            out.append(chunk({"tool_calls": [{"index": n, "function": {"arguments": raw[5:]}}]}))
        out.append(chunk({}, "tool_calls" if r["calls"] else "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            p, c = r["usage"]
            usage = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
            out.append(f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n")
        out.append("data: [DONE]\n\n")
        return out

    def _anthropic(self, body: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if r["text"]:
            content.append({"type": "text", "text": r["text"]})
        for i, name, args in r["calls"]:
            content.append({"type": "tool_use", "id": i, "name": name, "input": args})
        p, c = r["usage"]
        return {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "scripted"),
            "content": content,
            "stop_reason": "tool_use" if r["calls"] else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": p, "output_tokens": c},
        }

    def _anthropic_events(self, body: dict[str, Any], r: dict[str, Any]) -> list[str]:
        def ev(name: str, data: dict[str, Any]) -> str:
            return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

        p, c = r["usage"]
        msg = self._anthropic(body, {**r, "text": "", "calls": []})
        msg["usage"] = {"input_tokens": p, "output_tokens": 1}
        out = [ev("message_start", {"message": msg})]
        index = 0
        if r["text"]:
            out.append(
                ev(
                    "content_block_start",
                    {"index": 0, "content_block": {"type": "text", "text": ""}},
                )
            )
            for word in r["text"].split(" "):
                out.append(
                    ev(
                        "content_block_delta",
                        {"index": 0, "delta": {"type": "text_delta", "text": word + " "}},
                    )
                )
            out.append(ev("content_block_stop", {"index": 0}))
            index = 1
        for k, (i, name, args) in enumerate(r["calls"]):
            out.append(
                ev(
                    "content_block_start",
                    {
                        "index": index + k,
                        "content_block": {"type": "tool_use", "id": i, "name": name, "input": {}},
                    },
                )
            )
            out.append(
                ev(
                    "content_block_delta",
                    {
                        "index": index + k,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)},
                    },
                )
            )
            out.append(ev("content_block_stop", {"index": index + k}))
        stop = "tool_use" if r["calls"] else "end_turn"
        out.append(
            ev("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": c}})
        )
        out.append(ev("message_stop", {}))
        return out


def _last_user_text(body: dict[str, Any]) -> str:
    """The text of the request's last user message (string or text blocks)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
    return ""
