"""Reads of the ledger's facts: the state after a fold, a filtered page of its facts, one
fact and its versions and comments, what the context builder reads, and the entries the
facts' support cites.

The full state is stored only at checkpoints; the facts are rows
(:class:`~ledger_app.models.LedgerFact`, one per version, valid after fold ``n`` when
``since <= n < until``), so every read here but :func:`state_at` is SQL over indexed
columns. There is no process-wide cache of parsed states. The shapes come from
:mod:`ledger_app.selectors.fact_presenters`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.functions import Collate

from audit_app.models import Comment
from journal_app.models import Entry, Journal
from journal_app.privacy import filter_text
from journal_app.selectors import entries_by_hash
from ledger_app.facts import Fact
from ledger_app.filters import FilterError, Query, fact_matches, parse_facts
from ledger_app.models import Fold, LedgerFact
from ledger_app.selectors import fact_presenters as presenters


def _facts_after(journal_id: int, number: int) -> QuerySet[LedgerFact]:
    """The fact versions valid after fold ``number``: ``since <= number < until``."""
    return LedgerFact.objects.filter(journal_id=journal_id, since__lte=number).filter(
        Q(until__isnull=True) | Q(until__gt=number)
    )


#: Facts after a fold (its recorded count) up to which a page sorts the few rows it selects
#: instead of walking the display-order index (see :func:`_fact_order`)
SORT_AT_MOST = 5_000


def _fact_order(qs: QuerySet[LedgerFact], few: bool = False) -> QuerySet[LedgerFact]:
    """``qs`` in fact order (priority, then id by code point): "C" collation on PostgreSQL,
    where the default collation would sort ids differently from Python; SQLite compares
    bytes.

    ``few`` (the fold holds at most :data:`SORT_AT_MOST` facts): on PostgreSQL the priority
    is ordered under "C" too (the same order: ``P0``...``P3``), which the display-order index
    ``ledgerfact_order`` cannot serve, so the planner selects the fold's rows by ``since``
    and sorts them. Walking that index instead filters every row of the journal's later
    folds away: 129 ms for the 153 facts of fold 17 in a 100,000-fact ledger, 0.4 ms sorted;
    for a fold holding most of the rows the index walk is the fast one.
    """
    if connection.vendor == "postgresql":
        if few:
            return qs.order_by(Collate("priority", "C"), Collate("fact_id", "C"))
        return qs.order_by("priority", Collate("fact_id", "C"))
    return qs.order_by("priority", "fact_id")


def state_at(fold: Fold | None) -> dict[str, Any]:
    """The whole ledger state after ``fold`` (the empty state for ``None``), a new dict.

    Rebuilt from the nearest checkpoint at or before the fold plus the later deltas,
    through the reducer (:meth:`ledger_app.models.FoldQuerySet.state_after`, docs/design.md
    5.2). For pages that need every fact (the diff of two folds); the facts pages, the API
    and the context builder read rows instead (:func:`facts_at`, :func:`fact_at`,
    :func:`context_ledger`).
    """
    if fold is None:
        return {"facts": {}}
    return Fold.objects.state_after(fold)


class FactsQuery(Sequence[Fact]):
    """The facts of a filtered, ordered :class:`LedgerFact` query, read lazily: ``len`` is
    one ``COUNT``, a slice one ``LIMIT``/``OFFSET`` query (what a paginator asks for)."""

    def __init__(self, qs: QuerySet[LedgerFact]) -> None:
        self.qs = qs
        self._count: int | None = None

    def __len__(self) -> int:
        if self._count is None:
            self._count = self.qs.count()
        return self._count

    def count(self) -> int:
        return len(self)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [json.loads(d) for d in self.qs[index].values_list("data", flat=True)]
        return json.loads(self.qs.values_list("data", flat=True)[index])

    def __iter__(self) -> Iterator[Fact]:
        for data in self.qs.values_list("data", flat=True).iterator(chunk_size=2000):
            yield json.loads(data)


#: fact filter fields that are :class:`LedgerFact` columns holding exactly what the Python
#: matcher (:func:`ledger_app.filters.fact_matches`) reads: a term on them is a SQL condition.
_FACT_COLUMNS = {"category": "category", "priority": "priority", "confidence": "confidence"}
_INT_LOOKUPS = {"eq": "exact", "lt": "lt", "le": "lte", "gt": "gt", "ge": "gte"}


def _fact_term_q(term: Any) -> tuple[Q, bool] | None:
    """A SQL condition for one fact filter term, and whether it is exact.

    Exact (the same answer as :func:`ledger_app.filters.fact_matches`, negated or not):
    ``category``, ``priority``, ``confidence`` and ``lifecycle`` (the row's columns, written
    by ``ledger_app.services.store._row`` with the same defaults), ``pin`` and ``fold``
    (``origin_fold``; ``NULL`` satisfies no comparison, so a negated one holds, as in
    :func:`ledger_app.filters.compare_int`). A positive ``text`` or ``id`` term with an ASCII
    value is a narrowing ``icontains`` (a fact the matcher keeps passes it, save text holding
    U+0130 or U+212A, the two non-ASCII letters whose lower case is ASCII; the matcher still
    decides), ``None`` for anything else (``author``, ``quote``, ``support``,
    ``pending`` live only in the fact's JSON; a non-ASCII value, because SQLite folds case
    for ASCII only).
    """
    f = term.field
    if f in _FACT_COLUMNS or f == "lifecycle":
        cond = Q(**{f"{_FACT_COLUMNS.get(f, f)}__in": list(term.values)})
    elif f == "pin":
        cond = Q(pin=bool(term.values[0]))
    elif f == "fold":
        if term.op == "range":
            cond = Q(origin_fold__gte=term.values[0], origin_fold__lte=term.values[1])
        else:
            cond = Q(**{f"origin_fold__{_INT_LOOKUPS[term.op]}": term.values[0]})
    elif f in ("text", "id") and not term.negate and str(term.values[0]).isascii():
        column = "text" if f == "text" else "fact_id"
        return Q(**{f"{column}__icontains": term.values[0]}), False
    else:
        return None
    return (~cond if term.negate else cond), True


class _ParsedOnRead(Sequence[Fact]):
    """Facts held as their stored JSON, parsed when read (a page parses its 100 only)."""

    def __init__(self, data: list[str]) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def count(self) -> int:
        return len(self.data)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [json.loads(d) for d in self.data[index]]
        return json.loads(self.data[index])


def facts_at(
    journal: Journal, fold: Fold | None, *, chosen: Mapping[str, str | None], q: str = ""
) -> presenters.FactSelection:
    """The facts after ``fold`` matching the filters, in the display order (SQL).

    The same selection as :func:`presenters.facts_select` over the whole state: the exact
    filters ``chosen`` (over :data:`presenters.FACT_FILTERS`) are SQL conditions and
    ``shown`` is a :class:`FactsQuery` read page by page. A filter expression ``q``
    (:data:`ledger_app.filters.FACT_FIELDS`) is compiled term by term (:func:`_fact_term_q`):
    when every term is exact in SQL, ``shown`` stays a lazy :class:`FactsQuery` (one
    ``COUNT``, one page). Otherwise the rows the SQL conditions leave are read in one query
    and the Python matcher (:func:`ledger_app.filters.fact_matches`) decides the rest, so the
    answer is the matcher's whatever the database's case folding: ``text`` terms on the
    ``text`` column (no JSON parsed; then ``shown`` parses only the page read), other terms
    (``author``, ``quote``, ``support``, ``pending``, ``id``) on the parsed facts. A bad
    expression selects nothing and carries its ``error``. ``total`` (facts after the fold,
    unfiltered) is the fold's recorded figure (``manifest["storage"]["facts"]``), or one
    ``COUNT`` for a fold stored before it was recorded: a ``COUNT`` over 100,000 rows took
    50-90 ms.
    """
    if fold is None:
        return presenters.facts_select({"facts": {}}, chosen=chosen, q=q)
    qs = _facts_after(fold.journal_id, fold.number)
    wanted = {
        k: str(v)
        for k, v in chosen.items()
        if k in presenters.FACT_FILTERS and v in presenters.FACT_FILTERS[k]
    }
    total = _facts_total(fold)
    if total is None:
        total = qs.count()
    few = total <= SORT_AT_MOST
    q = (q or "").strip()
    shown: Sequence[Fact]
    if q:
        try:
            query = parse_facts(q)
        except FilterError as exc:
            return presenters.FactSelection(total=total, shown=[], chosen=wanted, q=q, error=exc)
        narrowed = qs.filter(**wanted)
        on_text: list[Any] = []  # terms the matcher decides on the text column
        on_json: list[Any] = []  # terms it decides on the parsed fact
        for term in query.terms:
            compiled = _fact_term_q(term)
            if compiled is not None:
                narrowed = narrowed.filter(compiled[0])
            if compiled is None or not compiled[1]:
                (on_text if term.field == "text" else on_json).append(term)
        shown = FactsQuery(_fact_order(narrowed, few))
        if on_text or on_json:
            # the column ``text`` is the fact's text (``_row``): match it without parsing
            by_text = Query(terms=tuple(on_text))
            # a match must hold on the text as shown (secrets filtered), or a search for a
            # secret would tell which pin holds it: checked only where the raw text matched
            kept = [
                data
                for text, data in _fact_order(narrowed, few).values_list("text", "data")
                if fact_matches(by_text, {"text": text})
                and (not on_text or fact_matches(by_text, {"text": filter_text(text).text}))
            ]
            if on_json:
                by_json = Query(terms=tuple(on_json))
                shown = [
                    f
                    for f in map(json.loads, kept)
                    if fact_matches(by_json, f) and fact_matches(by_json, presenters.fact_shown(f))
                ]
            else:
                shown = _ParsedOnRead(kept)
    else:
        shown = unfiltered = FactsQuery(_fact_order(qs.filter(**wanted), few))
        if not wanted:
            unfiltered._count = total
    return presenters.FactSelection(
        total=total,
        shown=shown,  # type: ignore[arg-type]
        chosen=wanted,
        q=q,
    )


def _facts_total(fold: Fold) -> int | None:
    """The number of facts after ``fold`` as the fold recorded it (``manifest["storage"]
    ["facts"]``, :func:`ledger_app.services.store.facts_count`), or ``None`` when its
    manifest is not loaded or predates the figure (the caller counts the rows then)."""
    if "manifest" in fold.get_deferred_fields():
        return None
    n = ((fold.manifest or {}).get("storage") or {}).get("facts")
    return n if isinstance(n, int) else None


def fact_at(journal: Journal, fold: Fold | None, fact_id: str) -> Fact | None:
    """The version of fact ``fact_id`` after ``fold`` (``None``: absent, or no fold)."""
    if fold is None:
        return None
    data = (
        _facts_after(fold.journal_id, fold.number)
        .filter(fact_id=fact_id)
        .values_list("data", flat=True)
        .first()
    )
    return json.loads(data) if data is not None else None


def fact_history(journal: Journal, fact_id: str) -> list[LedgerFact]:
    """Every version of ``fact_id`` (born in fold a, changed in fold b, ended in fold c),
    oldest first; ``until`` of the last one is the fold that evicted it, if any."""
    return list(LedgerFact.objects.filter(journal=journal, fact_id=fact_id).order_by("since"))


def context_ledger(journal: Journal, fold: Fold | None) -> dict[str, Any]:
    """What the context builder reads of the ledger after ``fold``: the active facts, every
    pin (any lifecycle), the closed obligations (the records of completion the task state
    shows next to their pins) and the used decisions (the continuation record quotes what
    was decided, docs/design.md 6), as ``{"facts": {...}, "folds": n}``; one SQL query."""
    if fold is None:
        return {"facts": {}, "folds": 0}
    rows = _facts_after(fold.journal_id, fold.number).filter(
        Q(lifecycle="active")
        | Q(pin=True)
        | Q(lifecycle="closed", category__in=("open_obligation", "decision"))
    )
    return {
        "facts": {k: json.loads(d) for k, d in rows.values_list("fact_id", "data")},
        "folds": fold.number,
    }


def entries_known(journal: Journal, hashes: Iterable[str]) -> dict[str, Entry]:
    """The journal's entries among ``hashes`` (hex), by hash: what support links resolve to."""
    return entries_by_hash(journal, list(hashes))


def fact_comments(journal: Journal, fact_id: str) -> list[Comment]:
    """The comments on the fact ``fact_id`` of ``journal``, oldest first."""
    return list(
        Comment.objects.filter(journal=journal, fact_id=fact_id)
        .select_related("author")
        .order_by("created_at", "pk")
    )
