"""Journal text as a fact quotes it: secrets redacted, whitespace collapsed, clipped. Pure.

A pin is the authoritative text verbatim, secrets included (validation compares it byte for
byte). Every other fact quotes journal text (a command, a path, an error line) only through
:func:`redact`, before it is clipped, so no non-pin fact copies a secret value; every op a
writer proposes passes :func:`redact_op`.
"""

from __future__ import annotations

from typing import Any

from journal_app.identifiers import COMMAND_LIMIT
from journal_app.privacy import redact_secrets

#: the most characters of journal text a fact quotes (:func:`clip`)
TEXT_LIMIT = 400


def clip(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` with whitespace runs collapsed, cut to ``limit`` characters (``…`` at the cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact(text: str) -> str:
    """``text`` with every secret value replaced by ``[filtered: <kind>]``.

    :func:`journal_app.privacy.redact_secrets`, the one detector; deterministic, so the same
    command always gives the same redacted text (facts match repeated commands by it).
    """
    return redact_secrets(text)[0]


def redact_op(op: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``op`` with :func:`redact` applied to its reason and, unless the fact is a
    pin (verbatim by rule, docs/design.md 5.2), to its fact's text and support quotes.

    Every op a writer proposes passes here (:func:`ledger_app.model_writer.compose`).
    """
    fact = op.get("fact")
    out = dict(op)
    if isinstance(op.get("reason"), str):
        out["reason"] = redact(op["reason"])
    if isinstance(fact, dict) and not fact.get("pin"):
        fact = dict(fact)
        if isinstance(fact.get("text"), str):
            fact["text"] = redact(fact["text"])
        if isinstance(fact.get("support"), list):
            fact["support"] = [
                {**s, "quote": redact(s["quote"])}
                if isinstance(s, dict) and isinstance(s.get("quote"), str)
                else s
                for s in fact["support"]
            ]
        out["fact"] = fact
    return out


def shown_command(cmd: str) -> str:
    """A command as a fact shows it: redacted, whitespace collapsed, cut after
    :data:`journal_app.identifiers.COMMAND_LIMIT` characters (the loss report's command
    identifier, so a fact keeps it whole)."""
    flat = " ".join(redact(cmd).split())
    return flat if len(flat) <= COMMAND_LIMIT else flat[:COMMAND_LIMIT].rstrip() + "…"
