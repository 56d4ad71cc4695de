"""Presenters of the ledger: plain shaping of what the selectors read, for the UI and the API.

No database access here: every function takes rows and parsed data (``known`` maps hex entry
hashes to their :class:`~journal_app.models.Entry` rows, read once by
:func:`ledger_app.selectors.entries_known`) and returns dataclasses or dicts. The htmx views
render them; the API returns the ``*_out`` dicts, which match the schemas of
:mod:`ledger_app.schemas`. One function per shape, so a page and its endpoint cannot disagree.

This module shapes facts, folds and their deltas, loss reports, invariants and retirements;
two seams live apart and are re-exported here under their old names: the support links
every evidence cell uses (:mod:`ledger_app.selectors.links`) and the verifier page's
attempts, proposals and verdicts (:mod:`ledger_app.selectors.verifier`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from journal_app.hashing import display
from journal_app.models import Entry
from journal_app.privacy import filter_content, filter_text
from ledger_app.errors import LedgerError
from ledger_app.facts import CATEGORIES, CONFIDENCES, LIFECYCLES, PRIORITIES, Fact, priority_rank
from ledger_app.filters import FilterError, fact_matches, filter_facts, parse_facts
from ledger_app.models import Fold, RetirementRequest
from ledger_app.selectors.links import (
    SupportLink,
    evidence_fact,
    fact_dom_id,
    support_hashes,
    support_links,
)
from ledger_app.selectors.verifier import (
    JUDGES,
    RAW_SHOWN,
    ROUNDS,
    AttemptRow,
    ItemRow,
    JudgeRow,
    ProposalRow,
    attempt_hashes,
    attempt_out,
    attempt_rows,
    items_window,
)

__all__ = [  # the re-exported names first, then this module's own
    "JUDGES",
    "RAW_SHOWN",
    "ROUNDS",
    "AttemptRow",
    "ItemRow",
    "JudgeRow",
    "ProposalRow",
    "SupportLink",
    "attempt_hashes",
    "attempt_out",
    "attempt_rows",
    "evidence_fact",
    "fact_dom_id",
    "items_window",
    "support_hashes",
    "support_links",
    "FACT_FIELDS",
    "FACT_FILTERS",
    "FactEvent",
    "FactFilterInvalid",
    "FactRow",
    "FactSelection",
    "OpRow",
    "OpVerdicts",
    "delta_hashes",
    "delta_ops",
    "fact_events",
    "fact_order",
    "fact_out",
    "fact_rows",
    "fact_shown",
    "op_shown",
    "facts_select",
    "fold_out",
    "invariants_out",
    "loss_out",
    "op_rows",
    "op_verdicts",
    "ops_rejected",
    "proposals_rejected",
    "reducer_rejected",
    "report_rows",
    "reports",
    "retirement_out",
]

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
    secret a user typed into a verbatim pin (DESIGN.md 5.2) shows as ``[filtered: <kind>]``.

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


# Folds ------------------------------------------------------------------------------------


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def proposals_rejected(fold: Fold) -> int:
    """Items the verifier (or the rules) rejected in the writer's proposal and repair, plus
    answers that did not validate: ``manifest.review.rejected`` (DESIGN.md 5.3).

    Reads the ``review_rejected`` annotation of :func:`ledger_app.selectors.fold_rows` when
    present, else the manifest.
    """
    if hasattr(fold, "review_rejected"):
        return _int(fold.review_rejected)
    review = fold.manifest.get("review") if isinstance(fold.manifest, dict) else None
    return _int(review.get("rejected")) if isinstance(review, dict) else 0


def ops_rejected(fold: Fold) -> int:
    """Everything rejected on the way to ``fold``: the stored ``Fold.ops_rejected``, which the
    fold service writes as the reducer's rejected ops plus :func:`proposals_rejected` (a fold
    whose proposal and repair were both rejected reads 2, not 0)."""
    return fold.ops_rejected


def reducer_rejected(fold: Fold) -> int:
    """The ops of the fold's delta the reducer refused (:func:`ops_rejected` less the
    verifier's rejections)."""
    return max(0, fold.ops_rejected - proposals_rejected(fold))


def fold_out(fold: Fold) -> dict[str, Any]:
    """One fold's summary (the folds page row, the API's ``FoldOut``)."""
    previous = getattr(fold, "previous_number", None)
    return {
        "number": fold.number,
        "kind": fold.kind,
        "outcome": fold.outcome,
        "seq_start": fold.seq_start,
        "seq_end": fold.seq_end,
        "revision": fold.revision,
        "range_hash": display(fold.range_hash),
        "state_hash": display(fold.state_hash),
        "writer": fold.writer,
        "verifier": fold.verifier,
        "facts_added": fold.facts_added,
        "ops_rejected": ops_rejected(fold),
        "reducer_rejected": reducer_rejected(fold),
        "proposals_rejected": proposals_rejected(fold),
        "tokens_covered": _maybe_int(getattr(fold, "tokens_covered", None)),
        "tokens_ledger": _maybe_int(getattr(fold, "tokens_ledger", None)),
        "previous": previous,
        "created_at": fold.created_at,
    }


def _maybe_int(value: Any) -> int | None:
    return None if value is None else _int(value)


@dataclass
class OpRow:
    """One op of a delta with the reducer's verdict on it."""

    index: int
    op: dict[str, Any]
    status: str
    reason: str
    fact_id: str
    support: list[SupportLink] = field(default_factory=list)
    evidence: list[SupportLink] = field(default_factory=list)
    review_pk: int | None = None  # a retire op's request in the review queue

    @property
    def fact(self) -> Fact | None:
        fact = self.op.get("fact")
        return fact if isinstance(fact, dict) else None

    def to_dict(self) -> dict[str, Any]:
        """The API's ``VerdictOut``."""
        return {
            "index": self.index,
            "op": str(self.op.get("op", "")),
            "status": self.status,
            "reason": self.reason,
            "fact_id": self.fact_id or None,
        }


def delta_ops(delta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The delta's ops (a non-object op becomes ``{"op": repr}``)."""
    return [op if isinstance(op, dict) else {"op": repr(op)} for op in delta.get("ops", [])]


def delta_hashes(delta: Mapping[str, Any], window: slice | None = None) -> list[str]:
    """Every entry hash the delta's ops cite (support and evidence); only the ops of
    ``window`` (a page) when given."""
    ops = delta_ops(delta)[window or slice(None)]
    hashes = support_hashes(op["fact"] for op in ops if isinstance(op.get("fact"), dict))
    return hashes + [
        str(h) for op in ops if isinstance(op.get("evidence"), list) for h in op["evidence"]
    ]


def op_rows(
    delta: Mapping[str, Any],
    known: Mapping[str, Entry],
    reviews: Mapping[str, int] | None = None,
    window: slice | None = None,
) -> list[OpRow]:
    """Every op of ``delta`` with the reducer's verdict, support and evidence as links.

    Args:
        delta: the fold's parsed delta (with ``verdicts``).
        known: the cited entries (:func:`delta_hashes`).
        reviews: ``{fact_id: retirement request pk}`` of the fold (retire ops link them).
        window: only the ops of this slice (a page), keeping their indexes in the delta.
    """
    verdicts = {v.get("index"): v for v in delta.get("verdicts", []) if isinstance(v, dict)}
    rows = []
    ops = list(enumerate(delta_ops(delta)))[window or slice(None)]
    for i, op in ops:
        v = verdicts.get(i, {})
        fact = op.get("fact") if isinstance(op.get("fact"), dict) else None
        evidence = op.get("evidence") if isinstance(op.get("evidence"), list) else []
        fact_id = (
            str(v.get("fact_id", "") or "")
            or str((fact or {}).get("id", ""))
            or str(op.get("id", ""))
        )
        rows.append(
            OpRow(
                index=v.get("index", i),
                op=op_shown(op),
                status=str(v.get("status", "unknown")),
                reason=str(v.get("reason", "")),
                fact_id=fact_id,
                support=support_links(fact, known) if fact else [],
                evidence=support_links(evidence_fact(evidence), known),
                review_pk=(reviews or {}).get(fact_id) if op.get("op") == "retire" else None,
            )
        )
    return rows


@dataclass
class OpVerdicts:
    """The reducer's verdicts on a whole delta without shaping its ops (a fold page shows
    one page of :func:`op_rows` but counts and lists rejections over all of them).

    ``counts``: ops per status (``accepted``, ``rejected``, ``pending``); ``rejected``:
    ``(index, op kind, fact id, reason)`` of each rejected op, in delta order.
    """

    total: int
    counts: dict[str, int]
    rejected: list[tuple[int, str, str, str]]


def op_verdicts(delta: Mapping[str, Any]) -> OpVerdicts:
    """:class:`OpVerdicts` of ``delta`` (an op without a verdict counts as ``unknown``)."""
    verdicts = {v.get("index"): v for v in delta.get("verdicts", []) if isinstance(v, dict)}
    counts = {"accepted": 0, "rejected": 0, "pending": 0}
    rejected = []
    ops = delta_ops(delta)
    for i, op in enumerate(ops):
        v = verdicts.get(i, {})
        status = str(v.get("status", "unknown"))
        counts[status] = counts.get(status, 0) + 1
        if status == "rejected":
            fact = op.get("fact") if isinstance(op.get("fact"), dict) else {}
            fact_id = str(v.get("fact_id", "") or "") or str(fact.get("id", "") or op.get("id", ""))
            rejected.append((i, str(op.get("op", "")), fact_id, str(v.get("reason", ""))))
    return OpVerdicts(len(ops), counts, rejected)


def loss_out(fold: Fold) -> dict[str, Any]:
    """The fold's loss report (``manifest.loss``, :mod:`ledger_app.loss`): which identifiers of
    the covered entries the ledger dropped, each with the entry that holds it. ``recorded``
    is false for folds that record none (reviews, checkpoints, older folds)."""
    loss = fold.manifest.get("loss") if isinstance(fold.manifest, dict) else None
    if not isinstance(loss, dict):
        return {
            "fold": fold.number,
            "recorded": False,
            "total": 0,
            "kept": 0,
            "lost_count": 0,
            "lost": [],
            "lost_truncated": 0,
            "by_kind": {},
        }
    return {
        "fold": fold.number,
        "recorded": True,
        "total": _int(loss.get("total")),
        "kept": _int(loss.get("kept")),
        "lost_count": _int(loss.get("lost_count")),
        "lost": [
            {
                "kind": str(i.get("kind", "")),
                "value": str(i.get("value", "")),
                "entry": display(str(i.get("entry", ""))),
                "seq": i.get("seq") if isinstance(i.get("seq"), int) else None,
            }
            for i in loss.get("lost", [])
            if isinstance(i, dict)
        ],
        "lost_truncated": _int(loss.get("lost_truncated")),
        "by_kind": {
            k: dict(v) for k, v in (loss.get("by_kind") or {}).items() if isinstance(v, dict)
        },
    }


# Invariants -------------------------------------------------------------------------------


def report_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each invariant of a validation report with its problems (none: ok)."""
    problems = [p for p in report.get("problems", []) if isinstance(p, dict)]
    checks = list(report.get("checks", []))
    checks += sorted({p.get("check", "") for p in problems} - set(checks))
    return [{"check": c, "problems": [p for p in problems if p.get("check") == c]} for c in checks]


def reports(validation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The named validation reports (``model``, ``frontend``) with their rows."""
    return [
        {"name": name, "report": report, "rows": report_rows(report)}
        for name, report in validation.items()
        if isinstance(report, dict)
    ]


def invariants_out(fold: Fold, panel: Mapping[str, Any]) -> dict[str, Any]:
    """The API's ``InvariantsOut`` from :func:`ledger_app.services.context.fold_invariants`."""
    return {
        "fold": fold.number,
        "status": str(panel.get("status", "")),
        "revision": int(panel.get("revision", 0) or 0),
        "reports": [
            {
                "name": r["name"],
                "ok": not any(row["problems"] for row in r["rows"]),
                "checks": [
                    {"check": row["check"], "ok": not row["problems"], "problems": row["problems"]}
                    for row in r["rows"]
                ],
            }
            for r in reports({k: panel[k] for k in ("model", "frontend") if k in panel})
        ],
        "failure": panel.get("failure"),
    }


# Retirements ------------------------------------------------------------------------------


def retirement_out(r: RetirementRequest) -> dict[str, Any]:
    """A retirement request as the API's ``RetirementOut`` (needs ``journal__session``,
    ``requested_in``, ``decided_in`` and ``reviewer`` selected)."""
    return {
        "id": r.pk,
        "scope": {
            "session": r.journal.session.key,
            "lane": r.journal.lane,
            "branch": r.journal.branch,
        },
        "fact_id": r.fact_id,
        "fact_text": r.shown_fact_text,
        "requested_in": r.requested_in.number,
        "evidence": [display(h) for h in r.evidence],
        "reason": r.reason,
        "status": r.status,
        "reviewer": r.reviewer.get_username() if r.reviewer_id else None,
        "comment": r.comment,
        "decided_at": r.decided_at,
        "decided_in": r.decided_in.number if r.decided_in_id else None,
        "created_at": r.created_at,
    }
