"""Readable text of an entry's content, by kind (pure).

Used for token counts, search, previews and display, so all of them agree on what an
entry "says". Content shapes are those of :mod:`journal_app.formats.base`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from journal_app.harness import harness_kind, without_harness


def content_text(kind: str, content: dict[str, Any]) -> str:
    """Return the text of ``content`` for an entry of ``kind``.

    * message, reasoning: ``content["text"]`` (encrypted reasoning gives ``""``);
    * tool_call: ``name(arguments)`` with arguments as compact JSON;
    * tool_result: ``content["output"]``;
    * event and anything else: the content as JSON.
    """
    if kind == "tool_call":
        args = content.get("arguments")
        rendered = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        return f"{content.get('name', '')}({rendered})"
    if kind == "tool_result":
        return str(content.get("output", ""))
    if kind in ("message", "reasoning"):
        return str(content.get("text", "") or "")
    return json.dumps(content, ensure_ascii=False)


#: a terminal's escape sequences: ANSI colours and styles, cursor moves (CSI) and titles (OSC)
_TERMINAL_ESCAPES = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])"
)


def without_terminal_escapes(text: str) -> str:
    """``text`` without a terminal's escape sequences (a test runner's colours:
    ``\x1b[31m``): what a reader of a page should see. For display only: the stored text,
    its hashes and the context sent to a model keep every byte."""
    return _TERMINAL_ESCAPES.sub("", text) if "\x1b" in text else text


AUTHORITATIVE_ROLES = ("system", "developer", "user")


#: Version of the pin rules (:func:`is_authoritative`) a fold's delta is written against
#: (``delta["pin_rules"]``): 1 pinned every non-derived system/developer/user message; 2
#: leaves harness records out; 3 also leaves the harness blocks inside a
#: message out of the pin's text (:func:`pin_text`) and gives each pin a ``pin_kind`` and
#: its ``attachments`` (docs/design.md 5.2). ``verify_ledger`` checks a delta against the rules
#: it names, so ledgers folded before a change still verify; a pin fact with ``pin_kind``
#: was written under rules 3 or later, one without it under rules 1 or 2.
PIN_RULES = 3


def is_authoritative(
    kind: str, role: str, derived: bool, meta: dict[str, Any], *, text: str, rules: int = PIN_RULES
) -> bool:
    """Whether an entry is an authoritative instruction (a pin source, docs/design.md 5.2).

    A system, developer or user *message* that is not derived (summaries, compaction
    markers) and not a harness record (:func:`journal_app.harness.harness_kind`: Claude
    Code ``isMeta`` caveats and command markup, interrupt markers, format-error nags, ...).
    ``text`` is the entry's :func:`content_text`; ``rules`` the pin rules to judge by (:data:`PIN_RULES`; a check of an earlier fold passes the rules it names).
    """
    return (
        kind == "message"
        and role in AUTHORITATIVE_ROLES
        and not derived
        and not harness_kind(kind=kind, role=role, text=text, meta=meta, rules=rules)
    )


def pin_text(text: str, rules: int = PIN_RULES) -> str:
    """The text a pin holds of an authoritative message whose text is ``text``, under pin
    rules ``rules`` (docs/design.md 5.2; validation compares a pin with this byte for byte).

    Rules 1 and 2: ``text`` itself. Rules 3: ``text`` minus the harness blocks inside it
    (:func:`journal_app.harness.without_harness`: IDE context, ``<environment_context>``,
    ``<system-reminder>``, empty command markup, local command output, interrupt lines),
    the rest verbatim; when nothing but harness blocks is left, the whole ``text``
    (conservative: a message is never pinned as nothing). Pure, no token counting.
    """
    if rules < 3:
        return text
    return without_harness(text) or text
