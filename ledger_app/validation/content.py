"""Content checks of a request and of the frontend view (docs/design.md sections 6 and 9).

Pure module (no Django). What must be present (pins byte for byte, the current user goal, the
task state), what must resolve (``artifact://`` references and their hashes), and what must
not be there (secrets, hidden reasoning, private metadata). Secrets and hidden reasoning are
found by :mod:`journal_app.privacy`, the one detector every surface uses: the names
:func:`secret_spans` and :func:`redact` kept here are thin wrappers over it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from journal_app import privacy
from journal_app.privacy import memo_findings as memo_findings  # re-exported
from ledger_app.validation.budget import TEXT_PARTS, compact_json
from ledger_app.validation.report import (
    FRONTEND_KEYS,
    RECEIPT_MARK,
    TASK_STATE_MARK,
    ArtifactInfo,
    EntryNames,
    Expectations,
    Problem,
    ValidationReport,
    hex_name,
)
from ledger_app.validation.structure import surrogate_problems

ARTIFACT_REF = re.compile(r"artifact://[A-Za-z0-9._-]+/([0-9a-f]{64})")
#: The mark a secret value is replaced with (``kind`` filled in): :data:`privacy.SECRET_MARK`.
REDACTED = privacy.SECRET_MARK

Scanner = Callable[[str], list[tuple[int, int, str]]]
secret_spans: Scanner = privacy.secret_spans


def memo_scanner() -> Scanner:
    """:func:`journal_app.privacy.secret_spans` remembering each text it scanned (one build's
    worth): ``scan(text) -> [(start, end, kind)]``."""
    seen: dict[str, list[tuple[int, int, str]]] = {}

    def scan(text: str) -> list[tuple[int, int, str]]:
        found = seen.get(text)
        if found is None:
            found = seen[text] = privacy.secret_spans(text)
        return found

    return scan


def redact(text: str, scan: Scanner | None = None) -> tuple[str, list[str]]:
    """``text`` with every secret value replaced by ``[filtered: <kind>]``, and one kind per
    value replaced (so ``len(kinds)`` counts redactions).

    The rest of the line (variable names, the fact that a key is set) stays (case 20); hidden
    reasoning is kept (use :func:`journal_app.privacy.filter_text` for user-facing text).
    ``scan`` finds the spans (default :func:`journal_app.privacy.secret_spans`).
    """
    spans = (scan or privacy.secret_spans)(text)
    if not spans:
        return text, []
    out, pos, kinds = [], 0, []
    for a, b, kind in spans:
        out.append(text[pos:a])
        out.append(privacy.SECRET_MARK.format(kind=kind))
        kinds.append(kind)
        pos = b
    out.append(text[pos:])
    return "".join(out), kinds


def message_texts(message: Any) -> list[str]:
    """Every text a message carries: the content string, each text part, tool arguments and
    results, and for multi-part content the parts joined with newlines (how the journal's
    importers join them, so a pin that spanned parts is still found)."""
    if not isinstance(message, dict):
        return []
    out: list[str] = []

    def add_content(content: Any) -> None:
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            texts = []
            for b in content:
                if not isinstance(b, dict):
                    continue
                if b.get("type") in TEXT_PARTS and isinstance(b.get("text"), str):
                    texts.append(b["text"])
                elif b.get("type") == "tool_result":
                    add_content(b.get("content"))
                elif b.get("type") == "tool_use":
                    out.append(compact_json(b.get("input")))
            out.extend(texts)
            if len(texts) > 1:
                out.append("\n".join(texts))

    add_content(message.get("content"))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict) and isinstance(call.get("function"), dict):
            args = call["function"].get("arguments")
            if isinstance(args, str):
                out.append(args)
    return out


def _system_texts(system: Any) -> list[str]:
    if isinstance(system, str):
        return [system]
    if isinstance(system, list):
        texts = [
            b["text"] for b in system if isinstance(b, dict) and isinstance(b.get("text"), str)
        ]
        # a system message the client sent as several blocks is one pin: their join
        return texts + ["\n".join(texts)] if len(texts) > 1 else texts
    return []


class _Haystack:
    """The texts of a request, searched for a pin or the goal: an exact match by set lookup
    (how the builder places them: one text each), a substring search only for a text not found
    whole, so a request with every pin in place is checked in one pass."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = texts
        self.whole = set(texts)
        self._joined: str | None = None

    def __contains__(self, text: str) -> bool:
        if text in self.whole:
            return True
        if self._joined is None:
            # NUL never occurs in a pin's text next to one of its own characters by accident:
            # a match across the separator would need the pin to hold NUL itself
            self._joined = "\x00".join(self.texts)
        if "\x00" not in text:
            return text in self._joined
        return any(text in h for h in self.texts)


def _present(text: str, haystacks: Sequence[str] | _Haystack) -> bool:
    if isinstance(haystacks, _Haystack):
        return text in haystacks
    return any(text == h for h in haystacks) or any(text in h for h in haystacks)


def _receipt_hash(text: str, start: int) -> str | None:
    """The ``content_hash: sha256:<hex>`` stated in the receipt that holds position ``start``."""
    block_start = text.rfind(RECEIPT_MARK, 0, start + 1)
    if block_start < 0:
        return None
    m = re.search(r"content_hash: sha256:([0-9a-f]{64})", text[block_start : block_start + 4000])
    return m.group(1) if m else None


def _presence_problems(
    per_message: list[list[str]],
    haystack: list[str],
    expect: Expectations,
    names: EntryNames,
    resolve: Callable[[str], ArtifactInfo | None] | None,
) -> list[Problem]:
    problems: list[Problem] = []
    found = _Haystack(haystack)
    for pin_id, entry, text in expect.pins:
        if not _present(text, found):
            problems.append(
                Problem(
                    "pin_verbatim",
                    f"pin {pin_id} (entry {hex_name(entry)}) is not present byte for byte",
                    None,
                    pin_id,
                    hex_name(entry),
                )
            )
    if expect.goal is not None:
        entry, text = expect.goal
        if not _present(text, found):
            problems.append(
                Problem(
                    "current_user_goal",
                    f"the current user goal (entry {hex_name(entry)}) is not present verbatim",
                    None,
                    "goal",
                    hex_name(entry),
                )
            )
    task_texts = [t for t in haystack if TASK_STATE_MARK in t]
    for label, items in (
        ("interrupted call", expect.interrupted),
        ("pending approval", expect.approvals),
    ):
        for ident, entry in items:
            if not any(ident in t for t in task_texts):
                problems.append(
                    Problem(
                        "task_state",
                        f"{label} {ident!r} (entry {hex_name(entry)}) is not represented in the task state",
                        None,
                        ident,
                        hex_name(entry),
                    )
                )
    for i, texts in enumerate(per_message):
        seen: set[str] = set()
        for text in texts:
            for m in ARTIFACT_REF.finditer(text):
                ref = m.group(0)
                if ref in seen:
                    continue
                seen.add(ref)
                info = resolve(ref) if resolve is not None else None
                if info is None:
                    problems.append(
                        Problem(
                            "artifact_reference",
                            f"messages[{i}]: {ref} does not resolve to a stored artifact",
                            i,
                            ref,
                            names.of_message(i),
                        )
                    )
                    continue
                stated = _receipt_hash(text, m.start())
                if m.group(1) != info.content_hash or (
                    stated is not None and stated != info.content_hash
                ):
                    problems.append(
                        Problem(
                            "artifact_hash",
                            f"messages[{i}]: {ref} states a hash that differs from the artifact's sha256:{info.content_hash}",
                            i,
                            ref,
                            names.of_message(i),
                        )
                    )
                elif info.stored_ok is False:
                    problems.append(
                        Problem(
                            "artifact_hash",
                            f"messages[{i}]: the stored bytes of {ref} no longer hash to sha256:{info.content_hash}",
                            i,
                            ref,
                            names.of_message(i),
                        )
                    )
    return problems


def content_problems(
    messages: list[Any],
    system: Any,
    expect: Expectations,
    names: EntryNames,
    resolve: Callable[[str], ArtifactInfo | None] | None,
    check_secrets: bool,
    scan: Scanner,
    check_reasoning: bool = False,
    *,
    check_present: bool = True,
) -> list[Problem]:
    """Problems of what a request holds: ``pin_verbatim``, ``current_user_goal``,
    ``task_state``, ``artifact_reference``, ``artifact_hash``; ``no_secrets`` when
    ``check_secrets`` (texts in ``expect.secrets_exempt`` skipped; ``scan`` finds the spans);
    ``no_hidden_reasoning`` (``<think>``/``<thinking>``/``<reasoning>`` blocks in a text) when
    ``check_reasoning``. At most one secret and one reasoning problem per message.
    ``check_present=False`` runs only the secret and reasoning checks."""
    problems: list[Problem] = []
    per_message = [message_texts(m) for m in messages]
    haystack = [t for texts in per_message for t in texts] + _system_texts(system)
    if check_present:
        problems += _presence_problems(per_message, haystack, expect, names, resolve)
    if check_secrets:
        for i, texts in enumerate(per_message):
            for text in texts:
                if text in expect.secrets_exempt:
                    continue
                spans = scan(text)
                if spans:
                    kinds = ", ".join(sorted({k for _, _, k in spans}))
                    problems.append(
                        Problem(
                            "no_secrets",
                            f"messages[{i}] holds {len(spans)} secret value(s) ({kinds})",
                            i,
                            kinds,
                            names.of_message(i),
                        )
                    )
                    break
    if check_reasoning:
        for i, texts in enumerate(per_message):
            if any(privacy.reasoning_spans(t) for t in texts):
                problems.append(
                    Problem(
                        "no_hidden_reasoning",
                        f"messages[{i}] holds hidden reasoning (a <think>, <thinking> or "
                        "<reasoning> block)",
                        i,
                        "reasoning",
                        names.of_message(i),
                    )
                )
    return problems


#: Shortest reasoning text looked for in the frontend view, characters (shorter ones are
#: common words, not a leak).
HIDDEN_MIN_CHARS = 20


class HiddenTexts:
    """The journal's reasoning texts, searched for in a text all at once (docs/design.md 9: hidden
    reasoning never reaches a client).

    An Aho-Corasick automaton (``pyahocorasick``, a maintained C library) over the first
    :data:`HIDDEN_MIN_CHARS` characters of each reasoning text of at least that length; a hit
    is confirmed by comparing the whole reasoning text at that place. Cost: linear in the text
    searched plus the hits, instead of one substring search per reasoning text (the
    old check was items x reasoning texts).
    """

    def __init__(self, reasoning: Sequence[str]) -> None:
        self.by_head: dict[str, list[str]] = {}
        for t in reasoning:
            if isinstance(t, str) and len(t.strip()) >= HIDDEN_MIN_CHARS:
                self.by_head.setdefault(t[:HIDDEN_MIN_CHARS], []).append(t)
        self.automaton: Any = None
        if self.by_head:
            import ahocorasick

            self.automaton = ahocorasick.Automaton()
            for head in self.by_head:
                self.automaton.add_word(head, head)
            self.automaton.make_automaton()

    def found_in(self, text: str) -> bool:
        """Whether ``text`` holds one of the reasoning texts whole."""
        if self.automaton is None or len(text) < HIDDEN_MIN_CHARS:
            return False
        for end, head in self.automaton.iter(text):
            start = end - len(head) + 1
            if any(text.startswith(h, start) for h in self.by_head[head]):
                return True
        return False


def validate_frontend(
    view: Mapping[str, Any],
    *,
    reasoning: Sequence[str] = (),
    entry_of: Mapping[int, str] | None = None,
    findings: Callable[[str], list[tuple[int, int, str, str]]] | None = None,
) -> ValidationReport:
    """Check the client-visible view: nothing private in it (docs/design.md sections 6 and 9).

    Args:
        view: ``{"items": [{"seq", "role", "kind", "text", ...}], ...}`` as built by
            :func:`ledger_app.context.frontend_view`.
        reasoning: texts of the journal's reasoning entries; none may appear in the view.
        entry_of: seq -> entry hex, to name the entry of each problem.
        findings: :func:`journal_app.privacy.findings` or a memo of it (:func:`memo_findings`)
            shared with the frontend view's filter, so a text is scanned once per build.

    One pass: each item's text is scanned once for secrets and reasoning blocks,
    and searched for every reasoning text at once (:class:`HiddenTexts`, Aho-Corasick), so
    the check is linear in the view's size and the reasoning's size together.

    Returns:
        :class:`ValidationReport` for ``no_secrets``, ``no_hidden_reasoning``,
        ``no_private_metadata`` and ``lone_surrogate``.
    """
    entry_of = entry_of or {}
    problems: list[Problem] = []
    items = view.get("items") if isinstance(view, Mapping) else None
    if not isinstance(items, list):
        items = []
        problems.append(
            Problem("malformed_message", "the frontend view has no items", None, "items")
        )
    hidden = HiddenTexts(reasoning)
    find = findings or privacy.findings
    for i, item in enumerate(items):
        where = f"items[{i}]"
        if not isinstance(item, dict):
            problems.append(Problem("malformed_message", f"{where} is not an object", i, where))
            continue
        seq = item.get("seq")
        entry = hex_name(entry_of.get(seq, "")) if isinstance(seq, int) else ""
        surrogate_problems(item, where, i, problems)
        extra = sorted(set(item) - FRONTEND_KEYS)
        if extra:
            problems.append(
                Problem(
                    "no_private_metadata",
                    f"{where} (seq {seq}) carries private fields: {', '.join(extra)}",
                    i,
                    ",".join(extra),
                    entry,
                )
            )
        if item.get("kind") == "reasoning":
            problems.append(
                Problem(
                    "no_hidden_reasoning",
                    f"{where} (seq {seq}) is a reasoning entry",
                    i,
                    "kind",
                    entry,
                )
            )
        text = item.get("text")
        if isinstance(text, str) and text:
            shows_hidden = hidden.found_in(text)
            if shows_hidden:
                problems.append(
                    Problem(
                        "no_hidden_reasoning",
                        f"{where} (seq {seq}) shows hidden reasoning text",
                        i,
                        "text",
                        entry,
                    )
                )
            found = find(text)
            if any(f[3] == "reasoning" for f in found) and not shows_hidden:
                problems.append(
                    Problem(
                        "no_hidden_reasoning",
                        f"{where} (seq {seq}) shows hidden reasoning (a <think>, <thinking> "
                        "or <reasoning> block)",
                        i,
                        "text",
                        entry,
                    )
                )
            spans = [f for f in found if f[3] == "secret"]
            if spans:
                kinds = ", ".join(sorted({f[2] for f in spans}))
                problems.append(
                    Problem(
                        "no_secrets",
                        f"{where} (seq {seq}) shows {len(spans)} secret value(s) ({kinds})",
                        i,
                        kinds,
                        entry,
                    )
                )
    return ValidationReport(
        view="frontend",
        format="frontend",
        problems=problems,
        checks=["no_secrets", "no_hidden_reasoning", "no_private_metadata", "lone_surrogate"],
    )
