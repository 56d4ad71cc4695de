"""How facts are shown, on the pages and over the API: the filtered selection, rows with
their support links, the API's ``FactOut``, a fact's events across folds, and the filtered
copy every display surface shows (:func:`fact_shown`).

No database access: every function takes parsed facts and the cited entries (``known``,
read once by :func:`ledger_app.selectors.entries_known`). One function per shape, so a page
and its endpoint cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from journal_app.models import Entry
from journal_app.privacy import filter_content, filter_text
from ledger_app.errors import LedgerError
from ledger_app.facts import CATEGORIES, CONFIDENCES, LIFECYCLES, PRIORITIES, Fact, priority_rank
from ledger_app.filters import FilterError, fact_matches, filter_facts, parse_facts
from ledger_app.selectors.links import SupportLink, fact_dom_id, support_links

#: The exact-match fact filters of the facts page and ``GET .../ledger`` (field -> values).
FACT_FILTERS: dict[str, tuple[str, ...]] = {
    "category": CATEGORIES,
    "priority": PRIORITIES,
    "lifecycle": LIFECYCLES,
    "confidence": CONFIDENCES,
}
#: The fact fields :func:`fact_out` names; the others go to ``attributes``.
FACT_FIELDS = (
    "id",
    "category",
    "priority",
    "lifecycle",
    "confidence",
    "text",
    "support",
    "pin",
    "author",
    "origin_fold",
)


class FactFilterInvalid(LedgerError):
    """A fact filter expression that does not parse (HTTP 422, field ``q``)."""

    status = 422
    code = "invalid_filter"


# Facts ------------------------------------------------------------------------------------


@dataclass
class FactSelection:
    """The facts of a state that match the filters, in the display order.

    ``total`` counts the state's facts before filtering; ``error`` is the filter expression's
    error (then ``shown`` is empty: a bad filter matches nothing rather than everything).
    """

    total: int
    shown: list[Fact]
    chosen: dict[str, str]
    q: str
    error: FilterError | None = None

    def raise_error(self) -> None:
        """Raise :class:`FactFilterInvalid` when the expression did not parse (the API)."""
        if self.error is not None:
            raise FactFilterInvalid(f"q: {self.error}", field="q")


def fact_order(fact: Mapping[str, Any]) -> tuple[int, str]:
    """The order facts are listed in: priority (P0 first), then id."""
    return priority_rank(str(fact.get("priority", ""))), str(fact.get("id", ""))


def facts_select(
    state: Mapping[str, Any], *, chosen: Mapping[str, str | None], q: str = ""
) -> FactSelection:
    """The facts of ``state`` matching the exact filters ``chosen`` and the expression ``q``.

    Args:
        state: a parsed ledger state (read-only; not changed).
        chosen: ``{field: value}`` over :data:`FACT_FILTERS`; empty, ``None`` or unknown
            values are ignored. A fact without a lifecycle counts as ``active``.
        q: a filter expression (:data:`ledger_app.filters.FACT_FIELDS`), or ``""``.

    Returns:
        :class:`FactSelection`, sorted by :func:`fact_order`.
    """
    facts: list[Fact] = list(state.get("facts", {}).values())
    wanted = {k: str(v) for k, v in chosen.items() if k in FACT_FILTERS and v in FACT_FILTERS[k]}
    shown = [
        f
        for f in facts
        if all(f.get(k, "active" if k == "lifecycle" else "") == v for k, v in wanted.items())
    ]
    q = (q or "").strip()
    error = None
    if q:
        try:
            query = parse_facts(q)
        except FilterError as exc:
            error, shown = exc, []
        else:
            # matched as shown too (secrets filtered): a search never tells where a secret is
            shown = [f for f in filter_facts(shown, query) if fact_matches(query, fact_shown(f))]
    shown.sort(key=fact_order)
    return FactSelection(total=len(facts), shown=shown, chosen=wanted, q=q, error=error)


@dataclass
class FactRow:
    """One fact with its support as links, its comment count and its page."""

    fact: Fact
    support: list[SupportLink] = field(default_factory=list)
    comments: int = 0
    url: str = ""

    @property
    def first_seq(self) -> int:
        seqs = [s.entry.seq for s in self.support if s.entry is not None]
        return min(seqs) if seqs else 0

    @property
    def dom_id(self) -> str:
        return fact_dom_id(str(self.fact.get("id", "")))


def fact_shown(fact: Fact) -> Fact:
    """``fact`` as every display surface shows it: its ``text`` and every string of its other
    attributes filtered by the one detector (:func:`journal_app.privacy.filter_text`), so a
    secret a user typed into a verbatim pin (docs/design.md 5.2) shows as ``[filtered: <kind>]``.

    The ledger's stored state and the context sent to a model keep the pin verbatim (the
    conversation already holds it); only the copy shown is filtered (README, "Tenants,
    users, export").
    Returns ``fact`` itself when nothing is filtered, else a filtered copy; never changes it.
    """
    text = fact.get("text")
    shown_text = filter_text(text) if isinstance(text, str) else None
    extra = {k: v for k, v in fact.items() if k not in FACT_FIELDS}
    shown_extra, labels = filter_content("fact", extra) if extra else ({}, [])
    if not labels and (shown_text is None or not shown_text.filtered):
        return fact
    out = {**fact, **shown_extra}
    if shown_text is not None:
        out["text"] = shown_text.text
    return out


def op_shown(op: dict[str, Any]) -> dict[str, Any]:
    """A delta op as display surfaces show it: its ``fact`` through :func:`fact_shown`."""
    fact = op.get("fact")
    if not isinstance(fact, dict):
        return op
    shown = fact_shown(fact)
    return op if shown is fact else {**op, "fact": shown}


def delta_shown(delta: dict[str, Any]) -> dict[str, Any]:
    """A fold's delta as display surfaces show it (the fold API): each op's fact through
    :func:`op_shown` and each required pin's ``text`` filtered by the one detector. The
    stored delta keeps them verbatim (its hash covers them); returns a shallow copy."""
    out = dict(delta)
    if isinstance(delta.get("ops"), list):
        out["ops"] = [op_shown(op) if isinstance(op, dict) else op for op in delta["ops"]]
    pins = delta.get("required_pins")
    if isinstance(pins, list):
        out["required_pins"] = [
            {**p, "text": filter_text(p["text"]).text}
            if isinstance(p, dict) and isinstance(p.get("text"), str)
            else p
            for p in pins
        ]
    return out


def fact_rows(facts: Iterable[Fact], known: Mapping[str, Entry]) -> list[FactRow]:
    """Facts as rows, in the order a page lists them: priority, first cited seq, id. Each
    row's fact is the shown copy (:func:`fact_shown`)."""
    rows = [FactRow(fact_shown(f), support_links(f, known)) for f in facts]
    rows.sort(key=lambda r: (fact_order(r.fact)[0], r.first_seq, fact_order(r.fact)[1]))
    return rows


def fact_out(fact: Fact, known: Mapping[str, Entry]) -> dict[str, Any]:
    """A state's fact as the API's ``FactOut``, filtered as shown (:func:`fact_shown`)."""
    support = support_links(fact, known)
    fact = fact_shown(fact)
    return {
        "id": str(fact.get("id", "")),
        "category": str(fact.get("category", "")),
        "priority": str(fact.get("priority", "")),
        "lifecycle": str(fact.get("lifecycle", "")),
        "confidence": str(fact.get("confidence", "")),
        "text": str(fact.get("text", "")),
        "support": [s.to_dict() for s in support],
        "pin": bool(fact.get("pin", False)),
        "author": fact.get("author"),
        "origin_fold": fact.get("origin_fold"),
        "attributes": {k: v for k, v in fact.items() if k not in FACT_FIELDS},
    }


@dataclass
class FactEvent:
    """One op of a fold's delta about a fact, with the reducer's verdict."""

    fold: int
    kind: str
    op: dict[str, Any]
    status: str
    reason: str


def fact_events(
    deltas: Iterable[tuple[int, str, Mapping[str, Any]]], fact_id: str
) -> list[FactEvent]:
    """Every op about ``fact_id`` in ``(fold number, fold kind, delta)`` triples, in order."""
    events = []
    for number, kind, delta in deltas:
        verdicts = {v.get("index"): v for v in delta.get("verdicts", []) if isinstance(v, dict)}
        for i, op in enumerate(delta.get("ops", [])):
            if not isinstance(op, dict):
                continue
            fact = op.get("fact") if isinstance(op.get("fact"), dict) else {}
            if fact_id not in (op.get("id"), fact.get("id")):
                continue
            v = verdicts.get(i, {})
            events.append(
                FactEvent(
                    number, kind, op_shown(op), v.get("status", "unknown"), v.get("reason", "")
                )
            )
    return events
