"""Presenters of the ledger: plain shaping of what the selectors read, for the UI and the API.

No database access here: every function takes rows and parsed data (``known`` maps hex entry
hashes to their :class:`~journal_app.models.Entry` rows, read once by
:func:`ledger_app.selectors.entries_known`) and returns dataclasses or dicts. The htmx views
render them; the API returns the ``*_out`` dicts, which match the schemas of
:mod:`ledger_app.schemas`. One function per shape, so a page and its endpoint cannot disagree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from journal_app.hashing import display
from journal_app.models import Entry
from ledger_app.facts import CATEGORIES, CONFIDENCES, LIFECYCLES, PRIORITIES, Fact, priority_rank
from ledger_app.filters import FilterError, filter_facts, parse_facts
from ledger_app.models import Fold, FoldAttempt, Proposal, RetirementRequest, Verdict
from ledger_app.services.common import LedgerError

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
#: Who gave a verdict, in the operator's words (``Verdict.judge``).
JUDGES = {
    "verifier": "verifier model",
    "rules": "rules (the verifier's rubric applied mechanically)",
    "reducer": "reducer (a dry run of its rules)",
    "parser": "parser (the item could not become an op)",
}
ROUNDS = {0: "proposal", 1: "repair (the one repair, told why)", 2: "fallback"}
#: Characters of a model's raw reply a page prints (the API returns them whole).
RAW_SHOWN = 20_000


class FactFilterInvalid(LedgerError):
    """A fact filter expression that does not parse (HTTP 422, field ``q``)."""

    status = 422
    code = "invalid_filter"


def fact_dom_id(fact_id: str) -> str:
    """A stable HTML id for a fact (fact ids hold ``:`` and other characters ids avoid)."""
    return "fact-" + hashlib.sha256(fact_id.encode("utf-8")).hexdigest()[:12]


# Support links ----------------------------------------------------------------------------


@dataclass
class SupportLink:
    """One support item of a fact (or one evidence hash), resolved in the fact's scope.

    ``url`` opens the raw entry page (cited chunk or quote highlighted); ``api_url`` reads
    it over the API. ``entry`` is ``None`` when the hash names no entry of this journal
    (never valid support, DESIGN.md 5.1).
    """

    hash: str
    url: str
    api_url: str
    quote: str = ""
    chunk: int | None = None
    entry: Entry | None = None

    def to_dict(self) -> dict[str, Any]:
        """The API's ``SupportOut``."""
        e = self.entry
        return {
            "entry": self.hash,
            "url": self.api_url,
            "resolved": e is not None,
            "seq": e.seq if e else None,
            "kind": e.kind if e else None,
            "role": e.role if e else None,
            "quote": self.quote or None,
            "chunk": self.chunk,
        }


def support_hashes(facts: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every hex entry hash the facts' support cites (for one ``entries_known`` query)."""
    return [
        str(s.get("entry", ""))
        for f in facts
        for s in f.get("support", []) or []
        if isinstance(s, dict)
    ]


def evidence_fact(hashes: Iterable[Any]) -> dict[str, Any]:
    """A fact-shaped holder of bare evidence hashes, for :func:`support_links`."""
    return {"support": [{"entry": str(h)} for h in hashes]}


def support_links(fact: Mapping[str, Any] | None, known: Mapping[str, Entry]) -> list[SupportLink]:
    """The support of ``fact`` as links, in order (the one helper of UI and API)."""
    links = []
    for item in (fact or {}).get("support", []) or []:
        if not isinstance(item, dict):
            continue
        digest = str(item.get("entry", ""))
        chunk = item.get("chunk")
        if chunk is None and isinstance(item.get("chunks"), list) and item["chunks"]:
            chunk = item["chunks"][0]
        chunk = chunk if isinstance(chunk, int) and not isinstance(chunk, bool) else None
        quote = item.get("quote") if isinstance(item.get("quote"), str) else ""
        query: dict[str, Any] = {}
        if chunk is not None:
            query["chunk"] = chunk
        chunks = item.get("chunks")
        if isinstance(chunks, list) and len(chunks) == 2 and all(type(c) is int for c in chunks):
            query["chunks"] = f"{chunks[0]}-{chunks[1]}"
        span = item.get("range")
        if isinstance(span, list) and len(span) == 2 and all(type(c) is int for c in span):
            query["bytes"] = f"{span[0]}-{span[1]}"
        if quote:
            query["quote"] = quote
        url = reverse("journal:entry", args=[display(digest)])
        if query:
            url += "?" + urlencode(query)
        if quote:
            url += "#quote"
        elif chunk is not None:
            url += f"#chunk-{chunk}"
        links.append(
            SupportLink(
                hash=display(digest),
                url=url,
                api_url=f"/api/v1/entries/{display(digest)}",
                quote=quote,
                chunk=chunk,
                entry=known.get(digest),
            )
        )
    return links


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
            shown = filter_facts(shown, parse_facts(q))
        except FilterError as exc:
            error, shown = exc, []
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


def fact_rows(facts: Iterable[Fact], known: Mapping[str, Entry]) -> list[FactRow]:
    """Facts as rows, in the order a page lists them: priority, first cited seq, id."""
    rows = [FactRow(f, support_links(f, known)) for f in facts]
    rows.sort(key=lambda r: (fact_order(r.fact)[0], r.first_seq, fact_order(r.fact)[1]))
    return rows


def fact_out(fact: Fact, known: Mapping[str, Entry]) -> dict[str, Any]:
    """A state's fact as the API's ``FactOut``."""
    return {
        "id": str(fact.get("id", "")),
        "category": str(fact.get("category", "")),
        "priority": str(fact.get("priority", "")),
        "lifecycle": str(fact.get("lifecycle", "")),
        "confidence": str(fact.get("confidence", "")),
        "text": str(fact.get("text", "")),
        "support": [s.to_dict() for s in support_links(fact, known)],
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
                FactEvent(number, kind, op, v.get("status", "unknown"), v.get("reason", ""))
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


def delta_hashes(delta: Mapping[str, Any]) -> list[str]:
    """Every entry hash the delta's ops cite (support and evidence)."""
    ops = delta_ops(delta)
    hashes = support_hashes(op["fact"] for op in ops if isinstance(op.get("fact"), dict))
    return hashes + [
        str(h) for op in ops if isinstance(op.get("evidence"), list) for h in op["evidence"]
    ]


def op_rows(
    delta: Mapping[str, Any],
    known: Mapping[str, Entry],
    reviews: Mapping[str, int] | None = None,
) -> list[OpRow]:
    """Every op of ``delta`` with the reducer's verdict, support and evidence as links.

    Args:
        delta: the fold's parsed delta (with ``verdicts``).
        known: the cited entries (:func:`delta_hashes`).
        reviews: ``{fact_id: retirement request pk}`` of the fold (retire ops link them).
    """
    verdicts = {v.get("index"): v for v in delta.get("verdicts", []) if isinstance(v, dict)}
    rows = []
    for i, op in enumerate(delta_ops(delta)):
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
                op=op,
                status=str(v.get("status", "unknown")),
                reason=str(v.get("reason", "")),
                fact_id=fact_id,
                support=support_links(fact, known) if fact else [],
                evidence=support_links(evidence_fact(evidence), known),
                review_pk=(reviews or {}).get(fact_id) if op.get("op") == "retire" else None,
            )
        )
    return rows


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
    """The API's ``InvariantsOut`` from :func:`ledger_app.context_service.fold_invariants`."""
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
        "fact_text": r.fact_text,
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


# Attempts, proposals, verdicts ------------------------------------------------------------


@dataclass
class JudgeRow:
    """One judge's two verdicts (entailment, temporal) on one proposed item."""

    verdict: Verdict
    label: str

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "judge": v.judge,
            "label": self.label,
            "entailment": v.entailment,
            "entailment_reason": v.entailment_reason,
            "temporal": v.temporal,
            "temporal_reason": v.temporal_reason,
            "accepted": v.accepted,
        }


@dataclass
class ItemRow:
    """One proposed item of a writer answer: claim, cited evidence, every judge's verdicts."""

    key: str
    op: str
    claim: str
    accepted: bool
    support: list[SupportLink] = field(default_factory=list)
    judges: list[JudgeRow] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "op": self.op,
            "claim": self.claim,
            "accepted": self.accepted,
            "support": [s.to_dict() for s in self.support],
            "verdicts": [j.to_dict() for j in self.judges],
        }


@dataclass
class ProposalRow:
    """One writer answer (proposal, repair, fallback) with its items."""

    proposal: Proposal
    label: str
    items: list[ItemRow] = field(default_factory=list)
    raw: str = ""
    raw_clipped: bool = False

    def to_dict(self) -> dict[str, Any]:
        p = self.proposal
        return {
            "round": p.round,
            "kind": p.kind,
            "label": self.label,
            "error": p.error,
            "verifier_error": p.verifier_error,
            "raw": p.raw,
            "verifier_raw": p.verifier_raw,
            "ops": p.ops if isinstance(p.ops, list) else [],
            "items": [i.to_dict() for i in self.items],
            "rejected": sum(1 for i in self.items if not i.accepted),
        }


@dataclass
class AttemptRow:
    """One :class:`FoldAttempt` with its proposals."""

    attempt: FoldAttempt
    proposals: list[ProposalRow] = field(default_factory=list)

    @property
    def note(self) -> str:
        return str(self.attempt.record.get("note", "") or "")

    @property
    def fallback_reason(self) -> str:
        return str(self.attempt.record.get("fallback_reason", "") or "")

    @property
    def calls(self) -> list[dict[str, Any]]:
        calls = self.attempt.record.get("model_calls")
        return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []

    @property
    def usage(self) -> dict[str, Any]:
        usage = self.attempt.record.get("model_usage")
        return usage if isinstance(usage, dict) else {}

    def to_dict(self) -> dict[str, Any]:
        """The API's ``AttemptOut``."""
        return {**attempt_out(self.attempt), "proposals": [p.to_dict() for p in self.proposals]}


def attempt_out(a: FoldAttempt) -> dict[str, Any]:
    """A fold attempt's summary (the API's ``AttemptSummaryOut``; failed attempts list)."""
    record = a.record if isinstance(a.record, dict) else {}
    calls = record.get("model_calls")
    usage = record.get("model_usage")
    return {
        "id": a.pk,
        "number": a.number,
        "fold": a.fold.number if a.fold_id and a.fold else None,
        "outcome": a.outcome,
        "seq_start": a.seq_start,
        "seq_end": a.seq_end,
        "revision": a.revision,
        "range_hash": display(a.range_hash),
        "writer": a.writer,
        "writer_label": a.writer_label,
        "verifier": a.verifier,
        "error": a.error,
        "note": str(record.get("note", "") or ""),
        "fallback_reason": str(record.get("fallback_reason", "") or ""),
        "model_calls": [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else [],
        "model_usage": usage if isinstance(usage, dict) else {},
        "created_at": a.created_at,
    }


def attempt_hashes(proposals: Sequence[Proposal], verdicts: Sequence[Verdict]) -> list[str]:
    """Every entry hash the proposals' facts and the verdicts cite."""
    hashes = [str(h) for v in verdicts for h in (v.support if isinstance(v.support, list) else [])]
    facts = [
        op["fact"]
        for p in proposals
        for op in (p.ops if isinstance(p.ops, list) else [])
        if isinstance(op, dict) and isinstance(op.get("fact"), dict)
    ]
    return hashes + support_hashes(facts)


def attempt_rows(
    attempts: Sequence[FoldAttempt],
    proposals: Sequence[Proposal],
    verdicts: Sequence[Verdict],
    known: Mapping[str, Entry],
) -> list[AttemptRow]:
    """Attempts with their proposals, each proposed item and every judge's verdicts.

    Args:
        attempts, proposals, verdicts: as read by :func:`ledger_app.selectors.fold_attempts`
            (proposals by attempt then round; verdicts by proposal then pk).
        known: the cited entries (:func:`attempt_hashes`).
    """
    facts: dict[tuple[int, str], Fact] = {}
    for p in proposals:
        for op in p.ops if isinstance(p.ops, list) else []:
            fact = op.get("fact") if isinstance(op, dict) else None
            if isinstance(fact, dict):
                facts[(p.pk, str(fact.get("id", "")))] = fact
    items: dict[int, dict[str, ItemRow]] = {}
    for v in verdicts:
        row = items.setdefault(v.proposal_id, {}).get(v.key)
        if row is None:
            fact = facts.get((v.proposal_id, v.key))
            cited = fact if fact and fact.get("support") else None
            support = cited or evidence_fact(v.support or [])
            row = ItemRow(v.key, v.op, v.claim, v.item_accepted, support_links(support, known))
            items[v.proposal_id][v.key] = row
        row.judges.append(JudgeRow(v, JUDGES.get(v.judge, v.judge)))
    by_attempt: dict[int, list[ProposalRow]] = {}
    for p in proposals:
        by_attempt.setdefault(p.attempt_id, []).append(
            ProposalRow(
                p,
                ROUNDS.get(p.round, f"round {p.round}") if p.kind != "offline" else "offline",
                list(items.get(p.pk, {}).values()),
                p.raw[:RAW_SHOWN],
                len(p.raw) > RAW_SHOWN,
            )
        )
    return [AttemptRow(a, by_attempt.get(a.pk, [])) for a in attempts]
