"""Assembling an answer from the upstream's server-sent events. Pure.

The proxy passes every byte of the upstream's stream to the client as it arrives and feeds
the same bytes to an assembler, which rebuilds the answer the stream carried so it can be
journaled when the stream ends (or as interrupted when it does not):

* :class:`OpenAIAssembler`: Chat Completions chunks (``choices[0].delta`` content and
  ``tool_calls`` by index, ``finish_reason``, a final ``usage`` chunk);
* :class:`AnthropicAssembler`: Messages events (``message_start``, ``content_block_start``
  / ``_delta`` / ``_stop``, ``message_delta`` with ``stop_reason`` and usage).
"""

from __future__ import annotations

import json
from typing import Any


class LineSplitter:
    """Bytes in, complete text lines out (a line torn across two chunks waits for its end)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[str]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        return [line.rstrip(b"\r").decode("utf-8", errors="replace") for line in lines]


def _data(line: str) -> Any:
    if not line.startswith("data:"):
        return None
    payload = line[5:].strip()
    if not payload or payload == "[DONE]":
        return None
    try:
        return json.loads(payload)
    except ValueError:
        return None


class OpenAIAssembler:
    """The assistant message of a Chat Completions stream (choice 0)."""

    def __init__(self) -> None:
        self._split = LineSplitter()
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.response_id: str | None = None
        self.done = False

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the stream."""
        for line in self._split.feed(data):
            if line.strip() == "data: [DONE]":
                self.done = True
                continue
            chunk = _data(line)
            if isinstance(chunk, dict):
                self._chunk(chunk)

    def _chunk(self, chunk: dict[str, Any]) -> None:
        self.model = chunk.get("model") or self.model
        self.response_id = chunk.get("id") or self.response_id
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.content.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(
                    call.get("index", len(self.calls)),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                fn = call.get("function") or {}
                if fn.get("name"):
                    slot["function"]["name"] += fn["name"]
                if isinstance(fn.get("arguments"), str):
                    slot["function"]["arguments"] += fn["arguments"]

    @property
    def started(self) -> bool:
        """Whether any part of the answer has arrived."""
        return bool(self.content or self.calls)

    def message(self) -> dict[str, Any]:
        """The answer as a Chat Completions assistant message (calls without an id dropped)."""
        calls = [c for _, c in sorted(self.calls.items()) if c["id"] and c["function"]["name"]]
        text = "".join(self.content)
        out: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
        if calls:
            out["tool_calls"] = calls
        return out

    def meta(self) -> dict[str, Any]:
        """The response's own fields for the journal."""
        return {
            "model": self.model,
            "response_id": self.response_id,
            "finish_reason": self.finish_reason,
            "streamed": True,
        }


class _EventAssembler:
    """An assembler of a stream of JSON events, one per ``data:`` line: each is handed to
    ``_event``."""

    def __init__(self) -> None:
        self._split = LineSplitter()
        self.done = False

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the stream."""
        for line in self._split.feed(data):
            event = _data(line)
            if isinstance(event, dict):
                self._event(event)

    def _event(self, event: dict[str, Any]) -> None:
        raise NotImplementedError


class AnthropicAssembler(_EventAssembler):
    """The assistant message of a Messages stream."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, str] = {}
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.model: str | None = None
        self.response_id: str | None = None

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            msg = event.get("message") or {}
            self.model = msg.get("model")
            self.response_id = msg.get("id")
            self.usage.update(msg.get("usage") or {})
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            index = event.get("index", len(self.blocks))
            if block.get("type") == "tool_use":
                block["input"] = {}
                self._json[index] = ""
            self.blocks[index] = block
        elif kind == "content_block_delta":
            index = event.get("index", 0)
            block = self.blocks.setdefault(index, {"type": "text", "text": ""})
            delta = event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "input_json_delta":
                self._json[index] = self._json.get(index, "") + delta.get("partial_json", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "content_block_stop":
            index = event.get("index", 0)
            if index in self._json and self._json[index]:
                try:
                    self.blocks[index]["input"] = json.loads(self._json[index])
                except ValueError:
                    self.blocks[index]["input"] = {"_partial_json": self._json[index]}
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            self.usage.update(event.get("usage") or {})
        elif kind == "message_stop":
            self.done = True

    @property
    def started(self) -> bool:
        return bool(self.blocks)

    def message(self) -> dict[str, Any]:
        """The answer as a Messages assistant message (unfinished tool input kept raw)."""
        for index, raw in self._json.items():
            block = self.blocks.get(index)
            if block is not None and raw and block.get("input") == {}:
                try:
                    block["input"] = json.loads(raw)
                except ValueError:
                    block["input"] = {"_partial_json": raw}
        return {"role": "assistant", "content": [b for _, b in sorted(self.blocks.items())]}

    def meta(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "response_id": self.response_id,
            "stop_reason": self.stop_reason,
            "streamed": True,
        }


class ResponsesAssembler(_EventAssembler):
    """The output items of a Responses stream (``response.output_item.done`` events, or the
    whole ``response`` of ``response.completed`` / ``.incomplete`` / ``.failed``)."""

    FINAL = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[int, dict[str, Any]] = {}
        self.final: dict[str, Any] | None = None
        self.response: dict[str, Any] = {}
        self.usage: dict[str, Any] | None = None

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        response = event.get("response")
        if isinstance(response, dict):
            self.response = response
            if isinstance(response.get("usage"), dict):
                self.usage = response["usage"]
        if kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            self.items[event.get("output_index", len(self.items))] = event["item"]
        elif kind in self.FINAL:
            self.done = True
            output = (response or {}).get("output")
            if isinstance(output, list) and output:
                self.final = {"output": output}

    @property
    def started(self) -> bool:
        return bool(self.items or self.final)

    def message(self) -> list[dict[str, Any]]:
        """The output items (the final response's when it came, else those done so far)."""
        if self.final is not None:
            return list(self.final["output"])
        return [item for _, item in sorted(self.items.items())]

    def meta(self) -> dict[str, Any]:
        return {
            "model": self.response.get("model"),
            "response_id": self.response.get("id"),
            "status": self.response.get("status"),
            "streamed": True,
        }
