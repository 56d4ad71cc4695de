"""The P0 pins code writes: one per authoritative system, developer or user message. Pure.

A pin holds its message's text verbatim minus the harness blocks inside it (author
``code``; pin rules 3: a ``pin_kind``, governing or request, and its ``attachments``).
:func:`pin_facts` writes the pins of a fold's entries, :func:`required_pins` lists the text
each pin must hold (what a fold and the checks compare byte for byte). Layout and
classification are :mod:`ledger_app.pins`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from journal_app.content import AUTHORITATIVE_ROLES, PIN_RULES, is_authoritative, pin_text
from journal_app.harness import DEFAULT_ATTACHMENT_TOKENS
from ledger_app.entry_view import EntryView
from ledger_app.facts import Fact
from ledger_app.pins import classify, pin_layout


def pin_id(entry_hash: str) -> str:
    """The id code gives the pin of the entry of ``entry_hash`` (hex): ``pin:<16 hex>``.
    Cheaper than ``pin_fact(entry)["id"]``, which lays the message out."""
    return f"pin:{entry_hash[:16]}"


def pin_fact(
    entry: EntryView,
    *,
    objective: bool = False,
    attachment_tokens: int = DEFAULT_ATTACHMENT_TOKENS,
    rules: int = PIN_RULES,
) -> Fact:
    """The P0 pin of one authoritative message (docs/design.md 5.2), written by code.

    Pin rules 3 (:data:`journal_app.content.PIN_RULES`): ``text`` is the message's text
    verbatim minus the harness blocks inside it (:func:`journal_app.content.pin_text`; the
    whole text when it is harness blocks only); ``attachments`` lists attached material over
    ``attachment_tokens`` tokens (``PIN_ATTACHMENT_TOKENS``; :func:`ledger_app.pins.pin_layout`
    gives the fields); ``pin_kind`` is ``"governing"`` or ``"request"`` and ``pin_reason``
    says why (:func:`ledger_app.pins.classify`; ``objective``: the session's first request).
    Cited by the entry's hash; id ``pin:<16 hex>``. Under ``rules`` 1 and 2 (what a fold
    written then held, e.g. for a refold of it): the text whole, no kind, no
    attachments.
    """
    base: Fact = {
        "id": pin_id(entry.entry_hash),
        "category": "constraint" if entry.role in ("system", "developer") else "objective",
        "priority": "P0",
        "lifecycle": "active",
        "confidence": "verified",
        "text": entry.text,
        "support": [{"entry": entry.entry_hash}],
        "pin": True,
        "author": "code",
    }
    if rules < 3:
        return base
    text, attachments, words = pin_layout(entry.text, attachment_tokens=attachment_tokens)
    kind, reason = classify(role=entry.role, words=words.strip(), objective=objective)
    fact: Fact = {**base, "text": text, "pin_kind": kind, "pin_reason": reason, "seq": entry.seq}
    if attachments:
        fact["attachments"] = attachments
    return fact


#: ``pin_reason`` of user pins that are never the session's objective: standing instructions,
#: and a message with no words (harness blocks or an attachment only)
NOT_OBJECTIVE = ("instructions", "empty")


def objective_pinned(facts: Mapping[str, Fact]) -> bool:
    """Whether the ledger ``facts`` already hold the session's objective: an active user pin
    (category ``objective``) whose ``pin_reason`` is not in :data:`NOT_OBJECTIVE`. Pins
    folded before pin rules 3 count (any user pin)."""
    return any(
        f.get("pin")
        and f.get("category") == "objective"
        and f.get("lifecycle", "active") == "active"
        and f.get("pin_reason") not in NOT_OBJECTIVE
        for f in facts.values()
    )


def pin_facts(
    entries: Sequence[EntryView],
    *,
    state: Mapping[str, Any] | None = None,
    attachment_tokens: int = DEFAULT_ATTACHMENT_TOKENS,
) -> list[Fact]:
    """The pins of ``entries`` (every :func:`is_pin_source`, in order, :func:`pin_fact`).

    The first user pin with words that are not standing instructions is the session's
    objective, in the session's first fold only (``state["folds"]`` 0 or absent), unless
    ``state`` (the ledger before these entries; its active pins suffice) already holds one
    (:func:`objective_pinned`). docs/design.md 5.2.
    """
    # the session's objective is in its first fold: a later fold never names one (the
    # objective may have closed since, a request that was done: docs/design.md 5.2)
    first = int((state or {}).get("folds") or 0) == 0
    want_objective = first and not objective_pinned((state or {}).get("facts") or {})
    out: list[Fact] = []
    for e in entries:
        if not is_pin_source(e):
            continue
        fact = pin_fact(
            e, objective=want_objective and e.role == "user", attachment_tokens=attachment_tokens
        )
        if want_objective and e.role == "user" and fact["pin_reason"] not in NOT_OBJECTIVE:
            want_objective = False
        out.append(fact)
    return out


def pin_text_of(entry: EntryView, rules: int = PIN_RULES) -> str:
    """The text the pin of ``entry`` holds under pin rules ``rules``
    (:func:`journal_app.content.pin_text`): what a required pin and a check compare."""
    return pin_text(entry.text, rules)


def is_pin_source(entry: EntryView, rules: int = PIN_RULES) -> bool:
    """Authoritative message (:func:`journal_app.content.is_authoritative`, under pin rules
    ``rules``) with non-empty text."""
    # kind and role first: only a system, developer or user message can be one
    # (is_authoritative), and the text and meta of other entries need not be read for it (a
    # build asks this of every entry, most of the folded prefix read as metadata only)
    return (
        entry.kind == "message"
        and entry.role in AUTHORITATIVE_ROLES
        and entry.text != ""
        and is_authoritative(
            entry.kind, entry.role, entry.derived, entry.meta, text=entry.text, rules=rules
        )
    )


def required_pins(entries: Sequence[EntryView], rules: int = PIN_RULES) -> list[dict[str, str]]:
    """``[{"entry": hex, "text": pin text}]`` for every pin source in ``entries``: the text
    its pin must hold byte for byte under pin rules ``rules`` (:func:`pin_text_of`)."""
    return [
        {"entry": e.entry_hash, "text": pin_text_of(e, rules)}
        for e in entries
        if is_pin_source(e, rules)
    ]
