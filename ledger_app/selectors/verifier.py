"""The verifier page's shapes: fold attempts, the writer's answers (proposal, repair,
fallback), each proposed item with its cited evidence and every judge's two verdicts
(docs/design.md 5.3 and 8). The page (:func:`ledger_app.views.folds.fold_verdicts`) and
``GET .../folds/{n}/proposals`` (:mod:`ledger_app.api`) both use them.

No database access: the rows come from :func:`ledger_app.selectors.fold_attempts`.
Re-exported by :mod:`ledger_app.selectors.presenters`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from journal_app.hashing import display
from journal_app.models import Entry
from journal_app.privacy import filter_text
from ledger_app.facts import Fact
from ledger_app.models import FoldAttempt, Proposal, Verdict
from ledger_app.selectors.links import SupportLink, evidence_fact, support_hashes, support_links

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

    @property
    def verifier_raw(self) -> str:
        """The verifier's raw reply as the page shows it: filtered, the first
        :data:`RAW_SHOWN` characters."""
        return filter_text(self.proposal.verifier_raw or "").text[:RAW_SHOWN]

    def to_dict(self) -> dict[str, Any]:
        p = self.proposal
        return {
            "round": p.round,
            "kind": p.kind,
            "label": self.label,
            "error": p.error,
            "verifier_error": p.verifier_error,
            # the models' answers verbatim would show what the prompt carried (filtered there,
            # but a model may echo a secret it saw elsewhere): filtered like every body
            "raw": filter_text(p.raw).text,
            "verifier_raw": filter_text(p.verifier_raw).text,
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
                filter_text(p.raw).text[:RAW_SHOWN],
                len(p.raw) > RAW_SHOWN,
            )
        )
    return [AttemptRow(a, by_attempt.get(a.pk, [])) for a in attempts]


def items_window(attempts: Sequence[AttemptRow], window: slice) -> int:
    """Keep in each proposal only its items whose position among all the ``attempts``'
    items (attempt, round, item order) falls in ``window`` (a page of the verifier page);
    return how many items there are in all."""
    position = 0
    for attempt in attempts:
        for proposal in attempt.proposals:
            n = len(proposal.items)
            start, stop = max(window.start - position, 0), max(window.stop - position, 0)
            proposal.items = proposal.items[start:stop]
            position += n
    return position
