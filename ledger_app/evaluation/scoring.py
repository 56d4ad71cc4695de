"""The score of one ledger state and context against an eval item's expectations. Pure.

:func:`score` checks a ledger state and a model view (cut by :class:`ContextView`) rule by
rule (:data:`RULES`); the hard rules (:data:`HARD_RULES`) are those ``eval_ledger`` exits
non-zero on. :func:`table` and :func:`totals` summarise :class:`ItemScore` objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ledger_app.budget import mandatory_state
from ledger_app.context.checkpoint import CHECKPOINT_MARK
from ledger_app.validation import TASK_STATE_MARK

#: rule -> (hard, what it checks)
RULES: dict[str, tuple[bool, str]] = {
    "done_not_current": (
        True,
        "a done request is never shown as current: its pin is not active in the ledger, and "
        "the context shows it only as a done line or as verbatim history after the checkpoint",
    ),
    "governing_verbatim": (True, "governing text is in the context verbatim"),
    "decision_exact": (
        True,
        "a decision fact quotes the accepted text exactly, and the context carries that text",
    ),
    "context_built": (False, "the context builds at the item's budget"),
    "pending_shown": (False, "a pending request is shown in the context and its pin is active"),
    "decision_consumed": (False, "an approval that ran is consumed (not active)"),
    "items": (False, "obligations: done items closed, pending items open"),
    "blockers": (False, "blockers: open ones active, ended ones not active"),
    "end_state": (False, "the session's end state is in the context"),
    "no_overclaim": (False, "no fact holds a claim as verified that no tool result shows"),
    "mandatory_bounded": (False, "mandatory state (P0 shown + active P1) within the bound"),
}
HARD_RULES = tuple(name for name, (hard, _) in RULES.items() if hard)

#: a line saying something is over: "done at seq 12: ...", "done (seq 12)", "[done] ...",
#: a rendered fact "[pin:..] P3 objective closed verified: ..."
DONE_LINE = re.compile(
    r"(?i)\b(done|closed|completed|consumed|used|superseded)\b[^\n:]{0,20}\bseq\s*\d+"
    r"|\[(done|completed|closed)\]"
    r"|\b(closed|superseded|retired|cancelled)\s+(verified|reported|inferred|uncertain):"
)
#: a message the builder wrote rather than the journal: it opens with a bracketed label
#: ("[ledger checkpoint: ...", "[task state: ...", a continuation record's own label)
BUILDER_LABEL = re.compile(r"^\[[a-z][a-z -]{2,40}[:\]\n]")


# ---------------------------------------------------------------------------- the context


def message_text(message: Mapping[str, Any]) -> str:
    """The text of one request message (OpenAI or Anthropic shape): its string content, its
    text parts and tool results' text, and its tool calls' arguments, one per line."""
    out: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(part.get("content"), str):
                out.append(part["content"])
            elif isinstance(part.get("content"), list):
                out.append(message_text({"content": part["content"]}))
            elif isinstance(part.get("input"), dict):
                out.append(json.dumps(part["input"], ensure_ascii=False))
    for call in message.get("tool_calls") or []:
        out.append(str(call.get("function", {}).get("arguments", "")))
    return "\n".join(out)


@dataclass
class ContextView:
    """A model view cut into what the scorer needs.

    Attributes:
        texts: each message's text (:func:`message_text`), in order; an Anthropic ``system``
            first when there is one.
        derived: indexes of the messages the builder wrote (checkpoint, task state).
        checkpoint: index of the ledger checkpoint message, or ``None`` (nothing folded).
    """

    texts: list[str]
    derived: set[int]
    checkpoint: int | None

    @classmethod
    def of(cls, model_view: Mapping[str, Any] | None) -> ContextView:
        """The view of ``model_view`` (``None``: no request was built: empty)."""
        if not model_view:
            return cls([], set(), None)
        texts: list[str] = []
        system = model_view.get("system")
        if isinstance(system, str):
            texts.append(system)
        elif isinstance(system, list):
            texts.append(message_text({"content": system}))
        texts += [message_text(m) for m in model_view.get("messages") or []]
        derived = {
            i
            for i, t in enumerate(texts)
            if t.startswith((CHECKPOINT_MARK, TASK_STATE_MARK)) or BUILDER_LABEL.match(t)
        }
        checkpoint = next((i for i, t in enumerate(texts) if t.startswith(CHECKPOINT_MARK)), None)
        return cls(texts, derived, checkpoint)

    @property
    def whole(self) -> str:
        """Every message's text, joined by newlines."""
        return "\n".join(self.texts)

    def shown_as_current(self, text: str) -> str | None:
        """Where ``text`` (a request) is shown as current work, or ``None`` when nowhere.

        Current: the message itself, verbatim, before the checkpoint (a pin of a folded
        round), or a line of a message the builder wrote (checkpoint, continuation record,
        task state) holding its first line that is not a done line (:data:`DONE_LINE`). A
        verbatim message after the checkpoint (or in a request with nothing folded) is the
        conversation as it happened, with what followed it.
        """
        first = text.strip().splitlines()[0] if text.strip() else text
        for i, t in enumerate(self.texts):
            if i in self.derived:
                for line in t.splitlines():
                    if first in line and not DONE_LINE.search(line):
                        return f"message {i}: {line[:120]!r}"
            elif self.checkpoint is not None and i < self.checkpoint and t.strip() == text.strip():
                return f"message {i} (a verbatim pin before the checkpoint)"
        return None


# ---------------------------------------------------------------------------- scoring


@dataclass
class RuleResult:
    """One rule on one item.

    Attributes:
        rule: a name of :data:`RULES`.
        hard: whether a failure makes ``eval_ledger`` exit non-zero.
        checked: how many expectations the rule checked (0: nothing to check, it holds).
        failed: one line per expectation that does not hold.
    """

    rule: str
    hard: bool
    checked: int = 0
    failed: list[str] = field(default_factory=list)

    @property
    def held(self) -> bool:
        """``True`` when no expectation failed."""
        return not self.failed

    def cell(self) -> str:
        """The table cell: ``-`` (nothing to check), ``ok n`` or ``FAIL k/n``."""
        if self.checked == 0:
            return "-"
        return f"ok {self.checked}" if self.held else f"FAIL {len(self.failed)}/{self.checked}"


def _facts(state: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((state.get("facts") or {}).values())


def _active(fact: Mapping[str, Any]) -> bool:
    return bool(fact.get("lifecycle", "active") == "active")


def _quotes(fact: Mapping[str, Any]) -> str:
    """A fact's text and the quotes of its support items, one per line."""
    quotes = [str(s.get("quote", "")) for s in fact.get("support") or [] if isinstance(s, dict)]
    return "\n".join([str(fact.get("text", ""))] + quotes)


def _short(text: str, n: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 3] + "..."


def score(
    expected: Mapping[str, Any],
    *,
    state: Mapping[str, Any],
    model_view: Mapping[str, Any] | None,
    status: str,
    reason: str = "",
) -> list[RuleResult]:
    """Score one ledger state and its context against ``expected`` (module docstring).

    Args:
        expected: the item's expected state.
        state: the reducer state after the fold(s) and the context build (``{"facts": ...}``).
        model_view: the request the context build returned (``None`` when it failed).
        status: the build's status (``"ok"`` / ``"failed"``).
        reason: why the build failed, for the ``context_built`` line.

    Returns:
        One :class:`RuleResult` per rule of :data:`RULES`, in that order. Rules from docs/design.md
        5.2 (pins, requests, decisions), 5.5 (lifecycles) and 6 (continuation record).
    """
    view = ContextView.of(model_view)
    whole = view.whole
    facts = _facts(state)
    results = {name: RuleResult(name, hard) for name, (hard, _) in RULES.items()}

    r = results["context_built"]
    r.checked = 1
    if status != "ok" or model_view is None:
        r.failed.append(f"status {status}: {_short(reason, 100)}")

    r = results["done_not_current"]
    for text in expected.get("requests_done", []):
        r.checked += 1
        pins = [f for f in facts if f.get("pin") and f.get("text") == text and _active(f)]
        where = view.shown_as_current(text)
        if pins:
            kind = pins[0].get("pin_kind", "governing (no pin_kind)")
            r.failed.append(f"{_short(text)!r}: its pin is active ({kind})")
        elif where:
            r.failed.append(f"{_short(text)!r}: shown as current in {where}")

    r = results["governing_verbatim"]
    for text in expected.get("governing", []):
        r.checked += 1
        if text not in whole:
            r.failed.append(f"{_short(text)!r}: not verbatim in the context")

    r = results["decision_exact"]
    rc = results["decision_consumed"]
    for d in expected.get("decisions", []):
        text = d["text"] if isinstance(d, dict) else str(d)
        r.checked += 1
        found = [f for f in facts if f.get("category") == "decision" and text in _quotes(f)]
        if not found:
            r.failed.append(f"{_short(text)!r}: no decision fact quotes it exactly")
        elif text not in whole:
            r.failed.append(f"{_short(text)!r}: a decision quotes it, the context does not")
        if isinstance(d, dict) and "consumed" in d:
            rc.checked += 1
            spent = any(not _active(f) for f in found)
            if bool(d["consumed"]) != spent:
                rc.failed.append(
                    f"{_short(text)!r}: "
                    + ("not consumed" if d["consumed"] else "consumed though it did not run")
                )

    r = results["pending_shown"]
    for text in expected.get("requests_pending", []):
        r.checked += 1
        if text not in whole:
            r.failed.append(f"{_short(text)!r}: not in the context")
        elif any(f.get("pin") and f.get("text") == text and not _active(f) for f in facts):
            r.failed.append(f"{_short(text)!r}: its pin was closed")

    r = results["items"]
    obligations = [f for f in facts if f.get("category") == "open_obligation"]
    for phrase in expected.get("items_done", []):
        r.checked += 1
        if any(phrase in str(f.get("text", "")) and _active(f) for f in obligations):
            r.failed.append(f"{_short(phrase)!r}: done, still an open obligation")
    for phrase in expected.get("items_pending", []):
        r.checked += 1
        if not any(phrase in str(f.get("text", "")) and _active(f) for f in obligations):
            r.failed.append(f"{_short(phrase)!r}: pending, no open obligation names it")

    r = results["blockers"]
    blockers = [f for f in facts if f.get("category") == "blocker"]
    for phrase in expected.get("blockers_open", []):
        r.checked += 1
        if not any(phrase in _quotes(f) and _active(f) for f in blockers):
            r.failed.append(f"{_short(phrase)!r}: open, no active blocker names it")
    for phrase in expected.get("blockers_closed", []):
        r.checked += 1
        if any(
            phrase in _quotes(f) and _active(f) and f.get("priority") in ("P0", "P1")
            for f in blockers
        ):
            r.failed.append(f"{_short(phrase)!r}: ended, still an active P1 blocker")

    r = results["end_state"]
    for phrase in expected.get("end_state", []):
        r.checked += 1
        if phrase not in whole:
            r.failed.append(f"{_short(phrase)!r}: not in the context")

    r = results["no_overclaim"]
    for phrase in expected.get("not_verified", []):
        r.checked += 1
        low = phrase.lower()
        bad = [
            f
            for f in facts
            if f.get("confidence") == "verified"
            and not f.get("pin")
            and low in str(f.get("text", "")).lower()
        ]
        if bad:
            r.failed.append(f"{_short(phrase)!r}: fact {bad[0].get('id')} holds it as verified")

    r = results["mandatory_bounded"]
    bound = expected.get("max_mandatory_tokens")
    if bound is not None:
        r.checked = 1
        m = mandatory_state(state)
        if m.total > int(bound):
            r.failed.append(
                f"{m.total:,} tokens > {int(bound):,} (governing {m.governing_tokens:,}, "
                f"open requests {m.request_tokens:,}, P1 {m.p1_tokens:,})"
            )
    return list(results.values())


@dataclass
class ItemScore:
    """The scores of one item: its name, origin, the rules, and the build's figures."""

    name: str
    origin: str
    rules: list[RuleResult]
    figures: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def hard_failed(self) -> list[str]:
        """Names of the hard rules that failed (an item that errored with no rules scored:
        all of them)."""
        if self.error and not self.rules:
            return list(HARD_RULES)
        return [r.rule for r in self.rules if r.hard and not r.held]

    def checks(self, rule: str) -> bool:
        """Whether this item checks ``rule`` (an item that errored with no rules scored
        counts under every rule)."""
        if self.error and not self.rules:
            return True
        return any(r.rule == rule and r.checked for r in self.rules)

    def holds(self, rule: str) -> bool:
        """Whether ``rule`` held on this item (never, when the item errored)."""
        return not self.error and all(r.held for r in self.rules if r.rule == rule)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "name": self.name,
            "origin": self.origin,
            "error": self.error,
            "figures": self.figures,
            "hard_failed": self.hard_failed,
            "rules": [{**asdict(r), "held": r.held} for r in self.rules],
        }


def table(scores: Sequence[ItemScore]) -> list[str]:
    """The per-item, per-rule table (hard rules first, marked ``*``), then a totals line per
    rule: ``held on k of n items that check it``."""
    names = list(RULES)
    head = ["item"] + [n + ("*" if RULES[n][0] else "") for n in names]
    rows = [head]
    for s in scores:
        if s.error:
            rows.append([s.name] + [("ERROR" if s.checks(n) else "-") for n in names])
        else:
            by = {r.rule: r for r in s.rules}
            rows.append([s.name] + [by[n].cell() for n in names])
    totals = ["held (items)"]
    for n in names:
        checked = [s for s in scores if s.checks(n)]
        held = [s for s in checked if s.holds(n)]
        totals.append(f"{len(held)}/{len(checked)}" if checked else "-")
    rows.append(totals)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.insert(len(lines) - 1, lines[1])
    return [line.rstrip() for line in lines]


def totals(scores: Sequence[ItemScore]) -> dict[str, dict[str, int]]:
    """``{rule: {"items": n, "held": k}}``: per rule, the items that check it and hold it
    (an errored item counts as checked and failed under the rules its expectations check)."""
    out: dict[str, dict[str, int]] = {}
    for n in RULES:
        checked = [s for s in scores if s.checks(n)]
        held = [s for s in checked if s.holds(n)]
        out[n] = {"items": len(checked), "held": len(held)}
    return out


def outcomes_text(outcomes: Mapping[str, int]) -> str:
    """``{"accepted": 2, "fallback": 1}`` as ``"2 accepted, 1 fallback"`` (in that key order)."""
    return ", ".join(f"{n} {name}" for name, n in outcomes.items())
