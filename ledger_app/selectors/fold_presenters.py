"""How folds are shown, on the pages and over the API: a fold's summary (the API's
``FoldOut``) and its rejection counts, its delta's ops with the reducer's verdicts, its loss
report, its invariants panel, and the retirement requests it asked for (``RetirementOut``).

No database access: every function takes rows and parsed data (``known`` maps hex entry
hashes to the cited entries, read once by :func:`ledger_app.selectors.entries_known`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from journal_app.hashing import display
from journal_app.models import Entry
from ledger_app.facts import Fact
from ledger_app.models import Fold, RetirementRequest
from ledger_app.selectors.fact_presenters import op_shown
from ledger_app.selectors.links import SupportLink, evidence_fact, support_hashes, support_links

# Folds ------------------------------------------------------------------------------------


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def proposals_rejected(fold: Fold) -> int:
    """Items the verifier (or the rules) rejected in the writer's proposal and repair, plus
    answers that did not validate: ``manifest.review.rejected`` (docs/design.md 5.3).

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
