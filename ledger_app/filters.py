"""The filter language's fields over ledger facts, and matching facts against a query.

Pure module. The expression language itself (grammar, :class:`FilterError`, :func:`parse`)
is :mod:`journal_app.filters`, shared with the journal's entry filter; its public names are
re-exported here so the ledger's callers have one import.
"""

from __future__ import annotations

from collections.abc import Iterable

from journal_app.filters import (
    ENTRY_FIELDS,
    MAX_EXPRESSION_CHARS,
    FieldSpec,
    FilterError,
    Query,
    Term,
    compare_int,
    describe,
    error_parts,
    parse,
    parse_entries,
)
from ledger_app.facts import AUTHORS, CATEGORIES, CONFIDENCES, LIFECYCLES, PRIORITIES, Fact

__all__ = [
    "ENTRY_FIELDS",
    "FACT_FIELDS",
    "MAX_EXPRESSION_CHARS",
    "FieldSpec",
    "FilterError",
    "Query",
    "Term",
    "compare_int",
    "describe",
    "error_parts",
    "fact_matches",
    "filter_facts",
    "parse",
    "parse_entries",
    "parse_facts",
]

FACT_FIELDS: dict[str, FieldSpec] = {
    "category": FieldSpec("enum", "what kind of fact", CATEGORIES),
    "priority": FieldSpec("enum", "P0 governing ... P3 recoverable", PRIORITIES),
    "lifecycle": FieldSpec("enum", "active unless ended", LIFECYCLES),
    "confidence": FieldSpec("enum", "how it is known", CONFIDENCES),
    "author": FieldSpec("enum", "who wrote the fact", AUTHORS),
    "text": FieldSpec("text", "words in the fact's text"),
    "id": FieldSpec("text", "part of the fact id"),
    "quote": FieldSpec("text", "words in a support quote"),
    "pin": FieldSpec("bool", "a verbatim P0 pin"),
    "pending": FieldSpec("bool", "a retirement awaits review"),
    "support": FieldSpec("hash", "cites an entry hash starting with these digits"),
    "fold": FieldSpec("int", "the fold that added the fact"),
}


def parse_facts(expr: str) -> Query:
    """:func:`parse` with :data:`FACT_FIELDS`."""
    return parse(expr, FACT_FIELDS)


def _fact_term(term: Term, fact: Fact) -> bool:
    f = term.field
    if f in ("category", "priority", "confidence", "author"):
        return fact.get(f) in term.values
    if f == "lifecycle":
        return fact.get("lifecycle", "active") in term.values
    if f in ("text", "id"):
        return term.values[0] in str(fact.get(f, "")).lower()
    if f == "quote":
        return any(
            term.values[0] in str(s.get("quote", "")).lower()
            for s in fact.get("support", [])
            if isinstance(s, dict)
        )
    if f == "pin":
        return bool(fact.get("pin")) is term.values[0]
    if f == "pending":
        return bool(fact.get("pending_retirement")) is term.values[0]
    if f == "support":
        cited = [str(s.get("entry", "")) for s in fact.get("support", []) if isinstance(s, dict)]
        return any(h.startswith(p) for h in cited for p in term.values)
    if f == "fold":
        fold = fact.get("origin_fold")
        return compare_int(term, fold if isinstance(fold, int) else None)
    raise ValueError(f"no fact matcher for field {f!r}")


def fact_matches(query: Query, fact: Fact) -> bool:
    """Whether ``fact`` satisfies every term of ``query`` (a negated term must fail)."""
    return all(_fact_term(t, fact) is not t.negate for t in query.terms)


def filter_facts(facts: Iterable[Fact], query: Query) -> list[Fact]:
    """The facts that match ``query``, in their order."""
    return [f for f in facts if fact_matches(query, f)]
