"""The analyst's search plan: a few lexical queries by round, most specific first. Pure.

:func:`plan_queries` turns the text that prompted recovery and the trigger scan's
identifiers into up to three rounds of queries (:mod:`recovery_app.lexical` syntax);
:func:`suggest_terms` adds identifiers from the ledger's own notes that share a word with
the question (they suggest where to look; they are never evidence).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from recovery_app.lexical import QueryInvalid, parse_query, tokenize
from recovery_app.triggers import find_identifiers

_STOP = {
    "the",
    "and",
    "for",
    "that",
    "this",
    "with",
    "was",
    "were",
    "have",
    "has",
    "been",
    "may",
    "might",
    "could",
    "should",
    "would",
    "not",
    "but",
    "are",
    "you",
    "your",
    "our",
    "its",
    "from",
    "into",
    "then",
    "than",
    "there",
    "here",
    "what",
    "which",
    "when",
    "where",
    "who",
    "how",
    "why",
    "all",
    "any",
    "can",
    "did",
    "does",
    "done",
    "just",
    "also",
    "about",
    "again",
    "earlier",
    "result",
    "wrong",
    "actually",
    "please",
    "check",
    "sure",
    "think",
    "maybe",
    "last",
    "time",
    "same",
    "method",
    "use",
    "used",
    "one",
    "two",
    "now",
    "some",
    "let",
}


def plan_queries(
    question: str, terms: Sequence[str] = (), suggestions: Sequence[str] = ()
) -> list[list[str]]:
    """Lexical queries by round: most specific first, broader in later rounds.

    Args:
        question: the text that prompted recovery (trigger messages, or the agent's question).
        terms: identifiers from the trigger scan, most specific first.
        suggestions: words from the ledger's own notes that share a token with the question
            (they suggest search terms; they are never evidence).

    Returns:
        Up to three rounds of normalised query strings (see :func:`recovery_app.lexical.parse_query`):
        round 1 the identifiers; round 2 the question's distinctive words (two per query)
        and the suggestions; round 3 single distinctive tokens of the identifiers.
    """
    rounds: list[list[str]] = []
    seen: set[str] = set()

    def add(round_: list[str], raw: str) -> None:
        try:
            text = parse_query(raw).text
        except QueryInvalid:
            return
        if text not in seen:
            seen.add(text)
            round_.append(text)

    first: list[str] = []
    for t in terms:
        add(first, t)
    words = _distinctive(question)
    if not terms and words:
        add(first, " ".join(words[:3]))
    rounds.append(first)
    second: list[str] = []
    for i in range(0, min(len(words), 4), 2):
        add(second, " ".join(words[i : i + 2]))
    for s in suggestions:
        add(second, s)
    rounds.append(second)
    third: list[str] = []
    for t in terms:
        toks = sorted(tokenize(t), key=lambda x: (-any(c.isdigit() for c in x), -len(x)))
        if toks:
            add(third, toks[0])
    rounds.append(third)
    return [r for r in rounds if r]


def _distinctive(text: str) -> list[str]:
    """Words of ``text`` worth searching: not stop words, at least 4 characters, longest first."""
    seen: list[str] = []
    for tok in tokenize(text):
        if len(tok) >= 4 and tok not in _STOP and tok not in seen:
            seen.append(tok)
    return sorted(seen, key=lambda w: (-any(c.isdigit() for c in w), -len(w)))


def suggest_terms(question: str, notes: Iterable[str], limit: int = 2) -> list[str]:
    """Identifiers from ledger notes that share a distinctive word with the question.

    The ledger's own notes may suggest where to look; they are never evidence (docs/design.md 7).
    """
    wanted = set(_distinctive(question))
    out: list[str] = []
    for note in notes:
        if not wanted & set(tokenize(note)):
            continue
        for _, value in find_identifiers(note):
            value = value.removeprefix("sha256:")
            if value not in out:
                out.append(value)
            if len(out) >= limit:
                return out
    return out
