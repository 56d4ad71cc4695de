"""Token budgets of a request: how it is counted and when it is over (docs/design.md sections 5.4, 6).

Pure module (no Django). Token figures are counted by a :class:`Meter` (tiktoken
``o200k_base`` by default, via :func:`journal_app.tokens.count_tokens`): the text of every
part, tool names, arguments and call ids (about a tenth of a Codex request), the
``tools`` schema sent with it, a fixed cost per message and per request, and a flat cost per
image (an image's base64 data is never counted as text: case 16). These are estimates of what
the provider will bill, labelled ``tiktoken:<encoding>`` wherever they are reported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from journal_app.tokens import count_tokens
from ledger_app.validation.report import Problem

SURROGATE = re.compile("[\ud800-\udfff]")
TEXT_PARTS = ("text", "input_text", "output_text")


@dataclass(frozen=True)
class Meter:
    """How a request is counted, in tokens.

    Attributes:
        count: ``count(text) -> int``; default tiktoken ``o200k_base``.
        per_message: fixed cost of each message (role, separators): 4, as in OpenAI's
            published accounting for chat models.
        per_request: fixed cost of the reply primer: 3.
        per_image: flat cost of an image or other non-text part: 1,000 (case 16: an
            image is not its base64 payload).
        label: where the figure comes from, stored next to it.
    """

    count: Callable[[str], int] = count_tokens
    per_message: int = 4
    per_request: int = 3
    per_image: int = 1000
    label: str = "tiktoken:o200k_base"

    def text(self, text: Any) -> int:
        if not isinstance(text, str) or not text:
            return 0
        try:
            return self.count(text)
        except UnicodeEncodeError:  # a lone surrogate: count it as a replacement character
            return self.count(SURROGATE.sub("\ufffd", text))

    def _part(self, part: Any) -> int:
        if isinstance(part, str):
            return self.text(part)
        if not isinstance(part, dict):
            return 0
        kind = part.get("type")
        if kind in TEXT_PARTS or (kind is None and "text" in part):
            return self.text(part.get("text"))
        if kind == "refusal":
            return self.text(part.get("refusal"))
        if kind == "tool_use":
            return (
                self.text(part.get("id"))
                + self.text(part.get("name"))
                + self.text(compact_json(part.get("input")))
            )
        if kind == "tool_result":
            return self.text(part.get("tool_use_id")) + self._content(part.get("content"))
        if kind == "thinking":
            return self.text(part.get("thinking"))
        if kind == "redacted_thinking":
            return self.text(part.get("data"))
        return self.per_image

    def _content(self, content: Any) -> int:
        if isinstance(content, list):
            return sum(self._part(p) for p in content)
        return self.text(content)

    def message(self, message: Any) -> int:
        """Tokens of one message of either format."""
        if not isinstance(message, dict):
            return self.per_message
        total = self.per_message + self._content(message.get("content"))
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                function = call.get("function")
                fn: dict[str, Any] = function if isinstance(function, dict) else {}
                total += (
                    self.text(call.get("id"))
                    + self.text(fn.get("name"))
                    + self.text(fn.get("arguments"))
                )
        if isinstance(message.get("name"), str):
            total += self.text(message["name"])
        if isinstance(message.get("tool_call_id"), str):
            total += self.text(message["tool_call_id"])
        return total

    def system(self, system: Any) -> int:
        """Tokens of an Anthropic ``system`` parameter (string or text blocks)."""
        if system in (None, "", []):
            return 0
        return self.per_message + self._content(system)

    def tools(self, tools: Any) -> int:
        """Tokens of a ``tools`` (schema) input sent with the request: its compact JSON
         (0 for none). The provider bills it with the request, so it counts against the budget
        ."""
        if tools in (None, [], {}):
            return 0
        return self.text(compact_json(tools))

    def request(self, messages: Sequence[Any], system: Any = None, tools: Any = None) -> int:
        """Tokens of a whole request: every message (tool call ids included), the system
        parameter, the ``tools`` schema, the primer."""
        return (
            self.per_request
            + self.system(system)
            + self.tools(tools)
            + sum(self.message(m) for m in messages)
        )


def compact_json(value: Any) -> str:
    """``value`` as compact JSON (a string as is): how tool arguments are counted."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def memo_counter(
    count: Callable[[str], int], seed: Mapping[str, int] | None = None
) -> Callable[[str], int]:
    """``count`` with a per-call-site memory: each distinct text is counted once.

    ``seed`` holds figures already known for some texts (the journal stores each entry's
    tiktoken count at append time), so those texts are not counted again.
    """
    seen: dict[str, int] = dict(seed or {})

    def counted(text: str) -> int:
        n = seen.get(text)
        if n is None:
            n = seen[text] = count(text)
        return n

    return counted


def budget_problems(
    tokens: int, working_budget: int | None, hard_limit: int | None, output_reserve: int = 0
) -> list[Problem]:
    """The ``within_working_budget`` / ``within_hard_limit`` problems of a request of
    ``tokens`` tokens (a budget of ``None`` is not checked)."""
    out = []
    if working_budget is not None and tokens > working_budget:
        out.append(
            Problem(
                "within_working_budget",
                f"the request is {tokens} tokens, over the working budget of {working_budget}",
                None,
                "tokens",
            )
        )
    if hard_limit is not None and tokens > hard_limit - output_reserve:
        limit = hard_limit - output_reserve
        out.append(
            Problem(
                "within_hard_limit",
                f"the request is {tokens} tokens, over the hard limit {hard_limit} minus the "
                f"output reserve {output_reserve} = {limit}",
                None,
                "tokens",
            )
        )
    return out
