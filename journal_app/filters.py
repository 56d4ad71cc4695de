"""The filter expression language of the operator UI, and its fields over journal entries.

Pure module ("a filter expression over facts and entries with a clear error
for a bad expression"). The language lives here, in the base app, because journal entries
are filtered with it; the ledger's fact fields are in :mod:`ledger_app.filters`. A small
hand-written tokenizer: the grammar is one level deep, and a parser generator would cost a
dependency for twenty lines of scanning.

Grammar::

    expression := term (whitespace term)*          terms are ANDed
    term       := ["-"] [field ":"] value          "-" negates the term
    value      := bare | '"' (char | '\\"' | '\\\\')* '"'
    bare       := any characters up to whitespace (no '"')

A value without a field searches the default field (``text``). By field kind:

* ``enum`` (``category``, ``priority``, ``kind`` ...): one allowed value or several separated
  by commas (any of them), case-insensitive: ``priority:P0,P1``.
* ``text``: case-insensitive substring: ``text:"migration 0042"``.
* ``int`` (``seq``, ``tokens``, ``fold``): ``12``, ``>12``, ``>=12``, ``<12``, ``<=12``, ``10..20``.
* ``bool`` (``pin``, ``error`` ...): ``true``/``false`` (also ``yes``/``no``, ``1``/``0``).
* ``hash`` (``support``, ``hash``): a hex prefix of at least 4 digits, ``sha256:`` optional;
  several separated by commas.

Example: ``category:open_obligation priority:P0 text:"migration" -lifecycle:closed``.

A bad expression raises :class:`FilterError` naming the token, its 1-based position and what
is wrong; nothing is filtered with half an expression.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from journal_app.errors import DomainError
from journal_app.formats.base import KINDS, ROLES

MAX_EXPRESSION_CHARS = 2000
_FIELD = re.compile(r"[A-Za-z_]+")
_INT = re.compile(r"^(>=|<=|>|<)?(\d+)$")
_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")
_HEX = re.compile(r"^[0-9a-f]{4,64}$")
_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0")


class FilterError(DomainError, ValueError):
    """A bad filter expression (HTTP 422 ``invalid_filter``).

    Attributes:
        position: 1-based character position of the bad token in the expression.
        token: the token as written.
        reason: what is wrong, in one sentence.
    """

    status = 422
    code = "invalid_filter"

    def __init__(self, position: int, token: str, reason: str) -> None:
        self.position = position
        self.token = token
        self.reason = reason
        super().__init__(f"position {position}, {token!r}: {reason}")


@dataclass(frozen=True)
class FieldSpec:
    """One searchable field: its ``kind`` (enum/text/int/bool/hash), choices, a help line."""

    kind: str
    help: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Term:
    """One parsed term.

    ``op`` is ``in`` (enum, hash: ``values`` are alternatives), ``contains`` (text),
    ``eq``/``lt``/``le``/``gt``/``ge`` (int: one value), ``range`` (int: low, high inclusive)
    or ``is`` (bool: one value). ``position`` is 1-based.
    """

    field: str
    op: str
    values: tuple[Any, ...]
    negate: bool
    position: int
    raw: str


@dataclass(frozen=True)
class Query:
    """A parsed expression: its terms (ANDed) and the text it came from."""

    terms: tuple[Term, ...] = ()
    source: str = ""

    def __bool__(self) -> bool:
        return bool(self.terms)

    def fields(self) -> set[str]:
        """The field names the expression uses."""
        return {t.field for t in self.terms}


ENTRY_FIELDS: dict[str, FieldSpec] = {
    "kind": FieldSpec("enum", "entry kind", KINDS),
    "role": FieldSpec("enum", "who produced it", ROLES),
    "tool": FieldSpec("text", "part of the tool name"),
    "call": FieldSpec("text", "part of the tool call id"),
    "text": FieldSpec("text", "words in the raw body (canonical JSON)"),
    "seq": FieldSpec("int", "position in the journal"),
    "tokens": FieldSpec("int", "token count"),
    "error": FieldSpec("bool", "a failed tool result"),
    "derived": FieldSpec("bool", "a summary or compaction marker"),
    "hash": FieldSpec("hash", "entry hash starting with these digits"),
}


def _scan(expr: str) -> Iterator[tuple[int, bool, str | None, str, str, bool]]:
    """Yield ``(position, negate, field, value, raw, quoted)`` per term (positions 1-based),
    lazily, so the parser reports the leftmost bad token whatever kind of error it is."""
    i, n = 0, len(expr)
    while i < n:
        if expr[i].isspace():
            i += 1
            continue
        start = i
        negate = False
        if expr[i] == "-" and i + 1 < n and not expr[i + 1].isspace():
            negate = True
            i += 1
        field: str | None = None
        m = _FIELD.match(expr, i)
        if m and m.end() < n and expr[m.end()] == ":":
            field = m.group(0).lower()
            i = m.end() + 1
        quoted = i < n and expr[i] == '"'
        if quoted:
            i += 1
            chars = []
            while True:
                if i >= n:
                    raise FilterError(start + 1, expr[start:], "unterminated quote")
                c = expr[i]
                if c == "\\" and i + 1 < n and expr[i + 1] in '"\\':
                    chars.append(expr[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    chars.append(c)
                    i += 1
            value = "".join(chars)
            if i < n and not expr[i].isspace():
                j = i
                while j < n and not expr[j].isspace():
                    j += 1
                raise FilterError(
                    start + 1, expr[start:j], "a closing quote must be followed by a space"
                )
        else:
            j = i
            while j < n and not expr[j].isspace():
                j += 1
            value = expr[i:j]
            if '"' in value:
                raise FilterError(
                    start + 1, expr[start:j], 'a quote may only open a value: field:"..."'
                )
            i = j
        yield (start + 1, negate, field, value, expr[start:i], quoted)


def _enum(spec: FieldSpec, value: str, pos: int, raw: str, field: str) -> tuple[str, ...]:
    by_lower = {c.lower(): c for c in spec.choices}
    picked = []
    for part in value.split(","):
        choice = by_lower.get(part.strip().lower())
        if choice is None:
            raise FilterError(
                pos,
                raw,
                f"{part.strip()!r} is not a {field} (allowed: {', '.join(spec.choices)})",
            )
        picked.append(choice)
    return tuple(picked)


def _int_term(value: str, pos: int, raw: str, field: str) -> tuple[str, tuple[int, ...]]:
    m = _RANGE.match(value)
    if m:
        low, high = int(m.group(1)), int(m.group(2))
        if low > high:
            raise FilterError(pos, raw, f"the range {low}..{high} is empty (low above high)")
        return "range", (low, high)
    m = _INT.match(value)
    if not m:
        raise FilterError(
            pos, raw, f"{field} takes a number: 12, >12, >=12, <12, <=12 or a range 10..20"
        )
    ops = {None: "eq", ">": "gt", ">=": "ge", "<": "lt", "<=": "le"}
    return ops[m.group(1)], (int(m.group(2)),)


def _hashes(value: str, pos: int, raw: str) -> tuple[str, ...]:
    out = []
    for part in value.split(","):
        digits = part.strip().lower().removeprefix("sha256:")
        if not _HEX.match(digits):
            raise FilterError(
                pos, raw, f"{part.strip()!r} is not a hash prefix (4 to 64 hex digits)"
            )
        out.append(digits)
    return tuple(out)


def parse(expr: str, fields: Mapping[str, FieldSpec], default_field: str = "text") -> Query:
    """Parse ``expr`` against ``fields`` (:data:`FACT_FIELDS` or :data:`ENTRY_FIELDS`).

    Returns:
        :class:`Query` (empty, falsy, for an empty or all-space expression).

    Raises:
        FilterError: unknown field, empty value, a value the field does not take, an
            unterminated quote, or an expression over :data:`MAX_EXPRESSION_CHARS`.
    """
    expr = expr or ""
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise FilterError(
            MAX_EXPRESSION_CHARS + 1, expr[MAX_EXPRESSION_CHARS:][:20], "expression too long"
        )
    terms = []
    for pos, negate, field, value, raw, quoted in _scan(expr):
        name = field or default_field
        spec = fields.get(name)
        if spec is None:
            raise FilterError(pos, raw, f"unknown field {name!r} (known: {', '.join(fields)})")
        if value == "" and not quoted:
            raise FilterError(pos, raw, f"{name}: needs a value")
        if spec.kind == "enum":
            term = Term(name, "in", _enum(spec, value, pos, raw, name), negate, pos, raw)
        elif spec.kind == "text":
            if value == "":
                raise FilterError(pos, raw, f"{name}: needs a value")
            term = Term(name, "contains", (value.lower(),), negate, pos, raw)
        elif spec.kind == "int":
            op, numbers = _int_term(value, pos, raw, name)
            term = Term(name, op, numbers, negate, pos, raw)
        elif spec.kind == "bool":
            low = value.lower()
            if low not in _TRUE + _FALSE:
                raise FilterError(pos, raw, f"{name} takes true or false, not {value!r}")
            term = Term(name, "is", (low in _TRUE,), negate, pos, raw)
        elif spec.kind == "hash":
            term = Term(name, "in", _hashes(value, pos, raw), negate, pos, raw)
        else:  # a FieldSpec with a kind this module does not know: a programming error
            raise ValueError(f"field {name!r} has unknown kind {spec.kind!r}")
        terms.append(term)
    return Query(tuple(terms), expr)


def parse_entries(expr: str) -> Query:
    """:func:`parse` with :data:`ENTRY_FIELDS`."""
    return parse(expr, ENTRY_FIELDS)


def compare_int(term: Term, value: int | None) -> bool:
    """Whether ``value`` satisfies an int term (``None`` never does), ignoring ``negate``."""
    if value is None:
        return False
    a = term.values[0]
    compare: dict[str, Callable[[], bool]] = {
        "eq": lambda: value == a,
        "lt": lambda: value < a,
        "le": lambda: value <= a,
        "gt": lambda: value > a,
        "ge": lambda: value >= a,
        "range": lambda: a <= value <= term.values[1],
    }
    return compare[term.op]()


def describe(fields: Mapping[str, FieldSpec]) -> list[dict[str, str]]:
    """Help rows for the UI: ``[{"name", "kind", "help", "choices"}]``."""
    return [
        {"name": name, "kind": spec.kind, "help": spec.help, "choices": ", ".join(spec.choices)}
        for name, spec in fields.items()
    ]


def error_parts(expr: str, error: FilterError) -> tuple[str, str, str]:
    """``(before, token, after)`` of ``expr`` around the bad token (for highlighting it)."""
    start = max(error.position - 1, 0)
    end = start + len(error.token)
    return expr[:start], expr[start:end], expr[end:]
