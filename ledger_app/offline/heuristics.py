"""Reading plans, decisions and claims from the journal (docs/design.md 5.2, 5.3). Pure.

* :func:`plan_items`: the items of a plan/todo tool call (Claude Code ``TodoWrite``, Codex
  ``update_plan``, OpenCode ``todowrite``, any call with a ``todos``/``plan`` list);
* :func:`user_decisions`: sentences of an authoritative user message stating a decision;
* :func:`assistant_claims`: sentences of an assistant message claiming success, kept at
  ``reported`` confidence by the writer and judged by :mod:`ledger_app.offline.rules`;
* :func:`is_universal` / :func:`is_success_claim`: the words the rules look for.
"""

from __future__ import annotations

import re

from ledger_app.entry_view import EntryView
from ledger_app.fact_text import redact
from ledger_app.facts import Fact
from ledger_app.pin_facts import is_pin_source

PLAN_TOOLS = {"todowrite", "todo_write", "update_plan", "updateplan", "todo", "plan", "write_todos"}
DONE = {"completed", "complete", "done", "finished"}


def plan_items(call: EntryView) -> list[tuple[str, str]] | None:
    """``[(item text, status)]`` of a plan/todo call, or ``None`` when it is not one.

    Claude Code ``TodoWrite`` ``{"todos": [{"content", "status", "activeForm"}]}``, Codex
    ``update_plan`` ``{"plan": [{"step", "status"}]}``, OpenCode ``todowrite``
    ``{"todos": [{"content", "status", "priority", "id"}]}``.
    """
    args = call.content.get("arguments")
    if not isinstance(args, dict):
        return None
    items = args.get("todos") if isinstance(args.get("todos"), list) else args.get("plan")
    name = call.tool_name.lower().split("__")[-1]
    if not isinstance(items, list) or (name not in PLAN_TOOLS and "todo" not in name):
        return None
    out = []
    for item in items:
        if isinstance(item, str) and item.strip():
            out.append((" ".join(item.split()), "pending"))  # a bare step: still a step
            continue
        if not isinstance(item, dict):
            continue
        text = item.get("content") or item.get("step") or item.get("title") or item.get("text")
        status = str(item.get("status", "pending")).strip().lower()
        if isinstance(text, str) and text.strip():
            out.append((" ".join(text.split()), status))
    return out


def sentences(text: str) -> list[str]:
    """Sentences: split at ``.!?`` and at blank lines, list items and headings; wrapped lines
    are joined (a single newline inside a paragraph is not a sentence end)."""
    text = re.sub(r"(?m)^(\s*#+ .*)$", r"\n\1\n", text)  # a heading is its own block
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:[-*+#>]|\d+[.)])\s)", text)
    out = []
    for block in blocks:
        for part in re.split(r"(?<=[.!?])\s+", " ".join(block.split())):
            part = part.strip(" -*#>")
            if part:
                out.append(part)
    return out


DECISION = re.compile(
    r"\b(?:let'?s (?:go with|use|keep|switch to|stick with|not)|go with|"
    r"we(?:'ll| will| should| are going to) (?:use|go with|keep|switch|stick|not)|"
    r"i(?:'ve| have)? decided|we(?:'ve| have)? decided|use\b[^.!?]*\binstead\b|i want to use|"
    r"i(?:'d| would) (?:like to use|prefer|rather)|i prefer|stick with|switch to|please use|"
    r"(?:yes|ok|okay),? (?:please )?(?:use|go|do|commit|proceed|keep))\b",
    re.I,
)


def user_decisions(entry: EntryView) -> list[str]:
    """Sentences of an authoritative user message that state a decision.

    Examples: "Yes, let's go with the economy class for this option, please.", "We should
    use the initials from the username if name isn't present". Injected context (IDE
    blocks, caveats) and harness-written messages are not read. Secret values in a sentence
    are redacted (:func:`ledger_app.fact_text.redact`) before it is cut to 300 characters.
    """
    if entry.role != "user" or not is_pin_source(entry) or entry.meta.get("injected"):
        return []
    return [redact(s)[:300] for s in sentences(entry.text) if DECISION.search(s) and len(s) <= 600]


CLAIM = re.compile(
    r"\b(?:all (?:the )?(?:\w+ )?(?:tests?|checks?|specs?|suites?)\b[^.!?\n]*?"
    r"\b(?:pass\w*|green|succeed\w*)|(?:the )?tests? (?:now |all )?pass(?:es|ed|ing)?\b|"
    r"(?:checks?|build|ci|pipeline)\s+(?:is |are )?(?:now )?(?:green|passing|passes|passed)\b|"
    r"deployed\b|deployment (?:is live|succeeded|is complete)|is (?:now )?live\b)",
    re.I,
)
NEGATIVE = re.compile(
    r"\b(?:not|no|never|fail\w*|error\w*|broken|unable|cannot|can't|won't|isn't|aren't|"
    r"doesn't|didn't|wasn't|weren't|yet|most|some|partially|except)\b|n't\b",
    re.I,
)
UNIVERSAL = re.compile(
    r"\b(?:all|every|entire|whole|full)\b[^.!?\n]*\b(?:tests?|checks?|specs?|suites?)\b|"
    r"^(?:assistant reported: )?(?:\W*\w+\W+)?(?:the )?tests? (?:now )?pass|"
    r"\bthe (?:test )?suite (?:now )?pass",
    re.I,
)
SCOPE_WORDS = re.compile(
    r"\b(?:in|of|for|from) (?:that|this|the|one|a single)\b[^.!?\n]*?"
    r"\b(?:file|module|package|directory|selection)\b|"
    r"\S+\.(?:py|ts|tsx|js|jsx|go|rs)\b|\bscoped?\b|\bsingle\b",
    re.I,
)
TEST_WORDS = re.compile(r"\b(?:tests?|specs?|suites?)\b", re.I)


def assistant_claims(entry: EntryView) -> list[str]:
    """Sentences of an assistant message claiming success ("All tests pass.", "Deployed.").

    Secret values redacted, as in :func:`user_decisions`.
    """
    if entry.kind != "message" or entry.role != "assistant":
        return []
    return [
        redact(s)[:300]
        for s in sentences(entry.text)
        if len(s) <= 400 and CLAIM.search(s) and not NEGATIVE.search(s)
    ]


def is_universal(text: str) -> bool:
    """A claim about all tests/checks, without a scope qualifier ("in that file")."""
    return bool(UNIVERSAL.search(text)) and not SCOPE_WORDS.search(text)


def is_success_claim(fact: Fact) -> bool:
    """A fact that asserts something worked (not a blocker, an obligation or a decision, no
    failure words). A decision records what the user accepted, quoting it: the words it
    quotes ("W1-W3 pass") are the proposal's, not a claim of the decision's own."""
    return fact.get("category") not in (
        "blocker",
        "open_obligation",
        "decision",
    ) and not NEGATIVE.search(str(fact.get("text", "")))
