"""Pins: what a pin holds, its kind, and how a context shows it (docs/design.md 5.2). Pure.

A pin holds its message's text verbatim in the ledger, minus the harness blocks inside it
(pin rules 3, :func:`journal_app.content.pin_text`). Each pin is classified (:func:`classify`):
**governing** (system and developer messages, a user's standing instructions, rules and
constraints, the session's objective) or **request** (a one-off task). What a context shows
of a pin can be shorter than the pin (:func:`pin_shown_text`): attached material (a pasted
log, file or code block over ``PIN_ATTACHMENT_TOKENS``) goes in as a one-line receipt that
the agent's ``read`` restores, the words around it verbatim.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from journal_app.content import pin_text
from journal_app.harness import (
    DEFAULT_ATTACHMENT_TOKENS,
    carries_instructions,
    harness_kind,
    segments,
)

GOVERNING = "governing"
REQUEST = "request"

#: Codex ``<user_instructions>`` (AGENTS.md) and its newer ``# AGENTS.md instructions``
#: heading: the user's standing instructions, governing, never the session's objective
_INSTRUCTIONS = re.compile(
    r"^\s*(?:<user_instructions>|<INSTRUCTIONS>|# AGENTS\.md instructions\b|<user-instructions>)",
    re.I,
)
#: words that state a rule, a constraint or a lasting preference (governing)
_RULE = re.compile(
    r"\b(?:always|never|do not|don't|dont|must|mustn't|must not|shall"
    r"|from now on|going forward|for the rest of|in (?:the )?future|remember|rules?"
    r"|constraints?|requirements?|policy|guidelines?|conventions?|only (?:use|touch|edit|change)"
    r"|avoid|prefer|without (?:changing|touching|breaking|modifying)|stick to|keep (?:the|it|all|every)"
    r"|no (?:new|more|changes)|not allowed|forbidden|under no circumstances|each time|every time"
    r"|whenever|should (?:always|never|not)|you are|your (?:role|job|task) is"
    r"|objective|goal)\b",
    re.I,
)
#: openings of a one-off task or question (request), after any greeting
_ASK = re.compile(
    r"^\s*(?:(?:hi|hey|hello|ok|okay|great|thanks|thank you|cool|nice|good|now|so|and|also|then"
    r"|next|please)[,.!]?\s+)*"
    r"(?:can you|could you|would you|will you|can we|could we|let's|lets|let us|i need|i want you to"
    r"|i'd like you to|please|fix|add|remove|delete|update|change|create|write|implement"
    r"|refactor|run|test|check|show|explain|find|look|investigate|debug|make|build|deploy"
    r"|rename|move|review|evaluate|summari[sz]e|continue|go ahead|proceed|search|try|commit"
    r"|push|open|set|install|migrate|generate|draft|list|tell me|describe|compare|audit"
    r"|analy[sz]e|clean|format|revert|undo|retry|rerun|yes|yep|yeah|no|nope|approved?"
    r"|lgtm|sounds good|do it|ship it|merge|apply|use|replace|take|go with|what|why|how"
    r"|where|when|which|who|is|are|does|do|did|should)\b",
    re.I,
)


#: A message that only acknowledges ("ok", "thanks", "got it"); "yes" and "sure" may approve
_ACK = re.compile(
    r"^\W*(?:ok(?:ay)?|k|thanks?(?: you)?(?: so much)?|thx|ty|got it|cool|great|nice|perfect"
    r"|understood|noted|awesome)\W*$",
    re.I,
)


def classify(*, role: str, words: str, objective: bool) -> tuple[str, str]:
    """``(pin_kind, reason)`` of a pin (docs/design.md 5.2). Deterministic; no words: governing.

    Args:
        role: the message's role (``system``, ``developer``, ``user``).
        words: the user's own words of the pin (its text without attachments, stripped).
        objective: the message is the session's first request (its objective).

    Returns:
        ``("governing", reason)`` with reason ``"system"`` (a system or developer message),
        ``"instructions"`` (Codex ``<user_instructions>`` / AGENTS.md), ``"empty"`` (no
        words: a message of harness blocks or attachments only; bad input, conservative),
        ``"objective"`` or ``"rules"`` (words that state a rule or constraint); or
        ``("request", "request")``: a one-off task or question with no rule in it; or
        ``("request", "turn")``: a later message whose words neither ask nor state a rule.
    """
    if role != "user":
        return GOVERNING, "system"
    if _INSTRUCTIONS.match(words) or carries_instructions(words):
        return GOVERNING, "instructions"
    if not words.strip():
        return GOVERNING, "empty"
    if _RULE.search(words):
        return GOVERNING, "objective" if objective else "rules"
    if objective:
        # the session's first request: governing when it states a rule or no one-off task;
        # a one-off task ("Fix issue #4417 ...") is a request that closes when it is done
        # (an objective that is done must not stay current, docs/design.md 5.2, 5.5)
        asks = _ASK.match(words) or words.rstrip().endswith("?")
        return (REQUEST if asks else GOVERNING), "objective"
    if _ACK.match(words):
        # "ok", "thanks": no task to carry out, nothing that would ever close it; one
        # line of the user's words, kept verbatim, never the next step
        return GOVERNING, "ack"
    if _ASK.match(words) or words.rstrip().endswith("?"):
        return REQUEST, "request"
    # a later turn's words that state no rule (a report, a reply, a pasted note): that
    # turn's request, shown verbatim while it is among the latest open ones; governing
    # text is the objective, the system and developer messages and a user's rules (5.2)
    return REQUEST, "turn"


def _lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


#: lines and characters of an attachment's ``head`` (what a receipt quotes)
HEAD_LINES = 3
HEAD_CHARS = 240


def _head(text: str) -> str:
    lines = [x.strip() for x in text.splitlines() if x.strip()][:HEAD_LINES]
    head = "\n".join(lines)
    return head if len(head) <= HEAD_CHARS else head[: HEAD_CHARS - 1] + "…"


def pin_layout(
    text: str,
    *,
    attachment_tokens: int = DEFAULT_ATTACHMENT_TOKENS,
    count: Callable[[str], int] | None = None,
) -> tuple[str, list[dict[str, Any]], str]:
    """The pin of a message whose text is ``text`` under pin rules 3: ``(pin text,
    attachments, words)``.

    ``pin text`` is :func:`journal_app.content.pin_text`; ``attachments`` lists each attached
    material (:func:`journal_app.harness.segments`) as ``{"start", "end"`` (character offsets
    into the pin text), ``"entry_start"`` (its offset in the entry's text, for ``read``),
    ``"sha256"`` (hex, of its UTF-8 bytes), ``"tokens"`` (o200k_base or ``count``),
    ``"lines"``, ``"head"`` (its first non-blank lines, stripped, at most
    :data:`HEAD_LINES` lines and :data:`HEAD_CHARS` characters)``}``; ``words`` is the pin
    text without its attachments (what :func:`classify` reads).
    """
    if count is None:
        pinned, frozen, words = _layout_counted(text, attachment_tokens)
        return pinned, [dict(a) for a in frozen], words
    pinned, attachments, words = _layout(text, attachment_tokens, count)
    return pinned, [dict(a) for a in attachments], words


@functools.lru_cache(maxsize=256)
def _layout_counted(text: str, attachment_tokens: int) -> tuple[str, tuple[Any, ...], str]:
    """:func:`_layout` with o200k_base counts, cached: a context build or a fold asks for the
    pin of the same message again (counting a large paste is the cost)."""
    from journal_app.tokens import count_tokens

    pinned, attachments, words = _layout(text, attachment_tokens, count_tokens)
    return pinned, tuple(tuple(a.items()) for a in attachments), words


def _layout(
    text: str, attachment_tokens: int, count: Callable[[str], int]
) -> tuple[str, list[dict[str, Any]], str]:
    pinned = pin_text(text)
    segs = segments(text, attachment_tokens=attachment_tokens, count=count)
    if pinned == text and any(s.kind == "harness" for s in segs):
        # harness blocks only: pinned whole (conservative), nothing in it is an attachment
        return pinned, [], ""
    attachments: list[dict[str, Any]] = []
    words: list[str] = []
    at = 0
    for s in segs:
        if s.kind == "harness":
            continue
        part = text[s.start : s.end]
        if s.kind == "attachment":
            attachments.append(
                {
                    "start": at,
                    "end": at + len(part),
                    "entry_start": s.start,
                    "sha256": hashlib.sha256(part.encode("utf-8")).hexdigest(),
                    "tokens": count(part),
                    "lines": _lines(part),
                    "head": _head(part),
                }
            )
        else:
            words.append(part)
        at += len(part)
    return pinned, attachments, "".join(words)


def receipt(fact: Mapping[str, Any], attachment: Mapping[str, Any]) -> str:
    """The one-line receipt of one attachment of pin ``fact`` (docs/design.md 5.2)::

        [attachment sha256:<12 hex>, 2,710 tokens, 143 lines; first lines: a / b / c;
         read it with read(entry=sha256:<entry hex>, range=[<start>, <end>])]

    ``range`` is in characters of the entry's text (``read`` returns exactly the
    attachment's text there, whose sha256 the receipt names).
    """
    support = fact.get("support") or [{}]
    entry = str(support[0].get("entry", "")) if isinstance(support[0], Mapping) else ""
    start = int(attachment.get("entry_start", attachment["start"]))
    end = start + int(attachment["end"]) - int(attachment["start"])
    head = " / ".join(str(attachment.get("head", "")).splitlines())
    return (
        f"[attachment sha256:{str(attachment['sha256'])[:12]}, {int(attachment['tokens']):,} "
        f"tokens, {int(attachment['lines']):,} lines; first lines: {head}; read it with "
        f"read(entry=sha256:{entry}, range=[{start}, {end}])]"
    )


def pin_shown_text(fact: Mapping[str, Any]) -> str:
    """The text a context shows for pin ``fact`` (docs/design.md 5.2): its ``text`` with each of
    its ``attachments`` replaced by its :func:`receipt` (followed by a newline when the
    attachment ended with one), the words around them verbatim. A pin without attachments
    (any pin folded before pin rules 3) is shown as its ``text``."""
    text = str(fact.get("text", ""))
    attachments = sorted(fact.get("attachments") or [], key=lambda a: int(a["start"]))
    if not attachments:
        return text
    out, at = [], 0
    for a in attachments:
        start, end = int(a["start"]), int(a["end"])
        out.append(text[at:start])
        out.append(receipt(fact, a) + ("\n" if text[start:end].endswith("\n") else ""))
        at = end
    out.append(text[at:])
    return "".join(out)


def pin_kind(fact: Mapping[str, Any]) -> str:
    """A pin's kind: its ``pin_kind``; a pin folded before pin rules 3 has none and counts as
    governing (docs/design.md 5.2: conservative)."""
    return REQUEST if fact.get("pin_kind") == REQUEST else GOVERNING


def expected_text(fact: Mapping[str, Any], entry_text: str) -> str:
    """What pin ``fact`` must hold, byte for byte, of its entry whose text is ``entry_text``:
    :func:`journal_app.content.pin_text` under rules 3 for a pin with ``pin_kind`` (written
    under rules 3 or later), the entry's text for one without (rules 1 and 2)."""
    return pin_text(entry_text, 3 if "pin_kind" in fact else 2)


def attachment_problems(fact: Mapping[str, Any], entry_text: str | None = None) -> list[str]:
    """What is wrong with pin ``fact``'s ``attachments`` (``[]`` when nothing): offsets out
    of its text or overlapping, a sha256 that is not the one of ``text[start:end]``, or
    (with ``entry_text``) an ``entry_start`` where the entry's text differs, so ``read`` of
    the receipt's range would not restore the attachment (docs/design.md 5.2, "receipts resolve
    and match")."""
    text = str(fact.get("text", ""))
    problems: list[str] = []
    at = 0
    for i, a in enumerate(fact.get("attachments") or []):
        try:
            start, end = int(a["start"]), int(a["end"])
            digest = str(a["sha256"])
            entry_start = int(a.get("entry_start", start))
        except (KeyError, TypeError, ValueError):
            problems.append(f"attachment {i}: malformed")
            continue
        if not at <= start < end <= len(text):
            problems.append(f"attachment {i}: range [{start}, {end}) is not inside the pin")
            continue
        part = text[start:end]
        if hashlib.sha256(part.encode("utf-8")).hexdigest() != digest:
            problems.append(f"attachment {i}: sha256 differs from the pin's text there")
        if entry_text is not None and entry_text[entry_start : entry_start + len(part)] != part:
            problems.append(f"attachment {i}: the entry's text at {entry_start} differs")
        at = end
    return problems


def pin_notes(pins: Sequence[Mapping[str, Any]]) -> list[str]:
    """What a fold's debug record says of its pins classified by the conservative rule
    (docs/design.md 5.2, bad input): one line per pin with no words of its own (a message of
    harness blocks or of attached material only) or whose kind the words did not settle,
    ``"pin:<id>: <why>, pinned as governing"``. ``[]`` when there is none."""
    why = {
        "empty": "no words of its own (harness blocks or attached material only)",
        "turn": "neither a rule nor an ask in its words",
    }
    return [
        f"{p.get('id')}: {why[str(p.get('pin_reason'))]}, pinned as {p.get('pin_kind')}"
        + (f" with {len(p['attachments'])} attachment(s)" if p.get("attachments") else "")
        for p in pins
        if p.get("pin_reason") in why
    ]


def conservative_notes(ops: Sequence[Mapping[str, Any]]) -> list[str]:
    """What a fold's debug record says of the bad input its writer met and left open
    (docs/design.md 5.5, "nothing closes without evidence"): an approval with no proposal before
    it (``bound`` false: it quotes the user's words only) and a plan call with malformed
    items (``malformed``: it supersedes nothing). One line each; ``[]`` for none."""
    out = []
    for op in ops:
        fact = op.get("fact")
        if not isinstance(fact, Mapping):
            continue
        if fact.get("bound") is False:
            out.append(
                f"{fact.get('id')}: an approval with no proposal before it; it quotes the "
                "user's words only and is used only by an action that names them"
            )
        if fact.get("malformed"):
            out.append(
                f"{fact.get('id')}: {fact['malformed']} malformed plan item(s) ignored; the "
                "earlier plan's items stay open"
            )
    return out


def harness_notes(entries: Sequence[Any]) -> list[str]:
    """One line per kind of whole-message harness record among ``entries`` (entry views with
    ``kind``, ``role``, ``text``, ``meta``, ``seq``): journaled, never pinned (docs/design.md 5.2),
    e.g. ``"harness records, journaled, never pinned: 2 environment (seq 2, 9)"``."""
    seqs: dict[str, list[int]] = {}
    for e in entries:
        kind = harness_kind(kind=e.kind, role=e.role, text=e.text, meta=e.meta)
        if kind:
            seqs.setdefault(kind, []).append(e.seq)
    out = []
    for kind, found in sorted(seqs.items()):
        shown = ", ".join(str(n) for n in found[:10]) + (", ..." if len(found) > 10 else "")
        out.append(f"harness records, journaled, never pinned: {len(found)} {kind} (seq {shown})")
    return out


#: Open requests a context shows verbatim: the latest ones (the next step is the latest);
#: older open requests are listed as one line each up to :data:`OPEN_REQUESTS_LISTED`, the
#: rest counted (docs/design.md 6: pending). They stay active in the ledger: nothing closes them
#: but completion evidence (5.5); only how much of them every context carries is bounded.
OPEN_REQUESTS_VERBATIM = 3
OPEN_REQUESTS_LISTED = 10


def open_requests_split(
    pins: list[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """Split active request pins into ``(verbatim, listed, counted)``, newest first.

    Args:
        pins: pin facts (any order); only active ones with ``pin_kind`` "request" are kept.
            Their age is the ``seq`` of the pinned entry when the fact records it
            (``seq``), else ``origin_fold``, then the id (deterministic).

    Returns:
        The latest :data:`OPEN_REQUESTS_VERBATIM` (shown verbatim), the next
        :data:`OPEN_REQUESTS_LISTED` (one line each) and the rest (a count and a range).
    """
    open_ = [
        p
        for p in pins
        if p.get("pin_kind") == "request" and p.get("lifecycle", "active") == "active"
    ]
    open_.sort(
        key=lambda p: (int(p.get("seq") or 0), int(p.get("origin_fold") or 0), str(p.get("id"))),
        reverse=True,
    )
    a, b = OPEN_REQUESTS_VERBATIM, OPEN_REQUESTS_VERBATIM + OPEN_REQUESTS_LISTED
    return open_[:a], open_[a:b], open_[b:]


def request_line(fact: Mapping[str, Any], limit: int = 160) -> str:
    """One line for an older open request: ``seq N: <first line …> (sha256:<12 hex>)``."""
    text = pin_shown_text(fact)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if len(first) > limit:
        first = first[: limit - 1] + "…"
    support = fact.get("support") or [{}]
    where = f"seq {fact['seq']}: " if fact.get("seq") else ""
    return f"{where}{first} (sha256:{str(support[0].get('entry', ''))[:12]})"
