"""Tokens, index segments and lexical queries shared by both search backends. Pure.

docs/design.md section 7 ("Search backends": one interface, one result contract). Tokenising
happens here and only here, so PostgreSQL and SQLite index and match exactly the same
tokens:

* a **token** is a maximal run of Unicode letters and digits, case-folded (``_``, ``-``,
  ``/``, ``.`` and every other character separate tokens), at most :data:`MAX_TOKEN_CHARS`
  characters (longer runs, such as base64 blobs, are not indexed);
* an entry's tokens are stored in **segments** of at most :data:`SEGMENT_TOKENS` tokens that
  overlap by :data:`SEGMENT_OVERLAP` tokens (PostgreSQL keeps word positions only up to
  16,383; a phrase of up to 64 tokens never falls between two segments);
* a **query** is a list of **terms**; each term is a phrase (its tokens in order, adjacent)
  and an entry matches when one of its segments holds every term.

``sqlite:`` FTS5 receives the segment text with the ``unicode61`` tokenizer (diacritics kept),
``postgresql:`` ``to_tsvector('simple', ...)``: both split the space-joined tokens back into
the same tokens.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from journal_app.errors import DomainError

MAX_TOKEN_CHARS = 100
SEGMENT_TOKENS = 16_000
SEGMENT_OVERLAP = 64
MAX_TERMS = 8
MAX_QUERY_CHARS = 400

_TOKEN = re.compile(r"[^\W_]+")


class QueryInvalid(DomainError, ValueError):
    """A query that cannot be searched: empty, too long, or with too many terms (HTTP 422)."""

    status = 422
    code = "invalid_query"


def tokenize(text: str) -> list[str]:
    """Return the tokens of ``text`` in order (see the module docstring).

    Each token is split from the text as written, then case-folded: all tokens at once, in
    one ``casefold`` of the tokens joined by NUL (case folding maps each character on its
    own, and nothing folds to or from NUL, which is never part of a token); case-folding
    the text before splitting would differ (``İ`` folds to ``i`` and a combining dot, which
    would split the token)."""
    found = _TOKEN.findall(text)
    if not found:
        return []
    joined = "\x00".join(found)
    tokens = (joined.lower() if joined.isascii() else joined.casefold()).split("\x00")
    if max(map(len, tokens)) <= MAX_TOKEN_CHARS:
        return tokens
    return [t for t in tokens if len(t) <= MAX_TOKEN_CHARS]


def segments(tokens: Sequence[str]) -> list[str]:
    """Split ``tokens`` into overlapping segments, each returned as space-joined text.

    Returns:
        One string per segment; ``[]`` for no tokens.
    """
    if not tokens:
        return []
    out = []
    step = SEGMENT_TOKENS - SEGMENT_OVERLAP
    start = 0
    while True:
        out.append(" ".join(tokens[start : start + SEGMENT_TOKENS]))
        if start + SEGMENT_TOKENS >= len(tokens):
            return out
        start += step


@dataclass(frozen=True)
class Query:
    """A parsed lexical query: ``terms`` is a tuple of phrases (tuples of tokens)."""

    terms: tuple[tuple[str, ...], ...]

    @property
    def text(self) -> str:
        """The normalised query (what cursors sign): phrases quoted, space-separated."""
        return " ".join('"' + " ".join(t) + '"' if len(t) > 1 else t[0] for t in self.terms)

    def fts5(self) -> str:
        """FTS5 MATCH expression: ``"a b" AND "c"`` (tokens are letters and digits only)."""
        return " AND ".join('"' + " ".join(t) + '"' for t in self.terms)

    def tsquery(self) -> str:
        """PostgreSQL ``to_tsquery('simple', ...)`` text: ``'a' <-> 'b' & 'c'``."""
        return " & ".join("(" + " <-> ".join(f"'{tok}'" for tok in t) + ")" for t in self.terms)


def parse_query(raw: str) -> Query:
    """Parse a user or planner query into terms.

    Whitespace separates terms; ``"double quotes"`` group words into one phrase. Each term
    is tokenised like the index, so ``0042_add_refund_index`` is the phrase
    ``0042 add refund index`` and ``--fake`` the single token ``fake``. Duplicate terms are
    dropped.

    Raises:
        QueryInvalid: nothing searchable, more than :data:`MAX_QUERY_CHARS` characters, or
            more than :data:`MAX_TERMS` terms.
    """
    if len(raw) > MAX_QUERY_CHARS:
        raise QueryInvalid(f"query is {len(raw)} characters long; the limit is {MAX_QUERY_CHARS}")
    try:
        parts = shlex.split(raw)
    except ValueError:
        parts = raw.replace('"', " ").split()
    terms: list[tuple[str, ...]] = []
    for part in parts:
        toks = tuple(tokenize(part))
        if toks and toks not in terms:
            terms.append(toks)
    if not terms:
        raise QueryInvalid(f"query {raw!r} has nothing searchable (letters or digits)")
    if len(terms) > MAX_TERMS:
        raise QueryInvalid(f"query has {len(terms)} terms; the limit is {MAX_TERMS}")
    return Query(tuple(terms))


def matches(query: Query, text: str) -> bool:
    """True when every term of ``query`` occurs as a phrase in ``text`` (the contract, in Python).

    Used by tests to state the contract independently of the backends, and to locate the
    matching passage of a hit for its snippet.
    """
    tokens = tokenize(text)
    return all(_find(tokens, term) >= 0 for term in query.terms)


def _find(tokens: Sequence[str], term: Sequence[str]) -> int:
    n = len(term)
    for i in range(len(tokens) - n + 1):
        if tokens[i] == term[0] and list(tokens[i : i + n]) == list(term):
            return i
    return -1


def first_match(query: Query, text: str) -> tuple[int, int] | None:
    """Character span ``(start, end)`` in ``text`` of the first occurrence of any term's phrase."""
    spans = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
    tokens = [text[a:b].casefold() for a, b in spans]
    best: tuple[int, int] | None = None
    for term in query.terms:
        i = _find(tokens, term)
        if i >= 0:
            span = (spans[i][0], spans[i + len(term) - 1][1])
            if best is None or span[0] < best[0]:
                best = span
    return best


def snippet(query: Query, text: str, width: int = 160) -> str:
    """About ``width`` characters of ``text`` around the first match, whitespace collapsed."""
    span = first_match(query, text)
    start = 0 if span is None else max(0, span[0] - width // 3)
    piece = text[start : start + width]
    piece = " ".join(piece.split())
    return ("…" if start > 0 else "") + piece + ("…" if start + width < len(text) else "")
