"""What a composition records: verdicts, items, rounds, the result (docs/design.md 5.3). Pure.

Every verdict, rejection and repair is stored and shown in the UI; these are the records the
fold service turns into ``Proposal``/``Verdict`` rows and the manifest's review summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ledger_app.model_client import CallRecord

FALLBACK_NOTE = "retrieve raw journal evidence before relying on omitted state"


class WriterFailed(Exception):
    """The writer or verifier model could not be used for this fold (unreachable, refused).

    Attributes: ``calls`` (:class:`CallRecord` list, the failed one last), ``writer`` and
    ``verifier`` (manifest dicts), ``rounds`` (what was received before the failure).
    """

    def __init__(
        self,
        message: str,
        *,
        calls: list[CallRecord],
        writer: dict[str, Any],
        verifier: dict[str, Any],
        rounds: list[RoundRecord],
    ) -> None:
        super().__init__(message)
        self.calls, self.writer, self.verifier, self.rounds = calls, writer, verifier, rounds


@dataclass
class Judgement:
    """One judge's two verdicts on one item. ``judge``: parser, rules, reducer or verifier."""

    judge: str
    entailment: str
    entailment_reason: str
    temporal: str = "valid"
    temporal_reason: str = ""

    @property
    def accepted(self) -> bool:
        return self.entailment == "entailed" and self.temporal == "valid"

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "entailment": self.entailment,
            "entailment_reason": self.entailment_reason,
            "temporal": self.temporal,
            "temporal_reason": self.temporal_reason,
        }


@dataclass
class ItemRecord:
    """One proposed item, the op it became (``{}`` if none could be built), and its verdicts."""

    key: str
    op: dict[str, Any]
    claim: str
    support: list[str] = field(default_factory=list)
    judgements: list[Judgement] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return bool(self.op) and all(j.accepted for j in self.judgements)

    @property
    def reasons(self) -> list[str]:
        """Every rejection reason, prefixed with its judge (``"verifier: ..."``)."""
        out = []
        for j in self.judgements:
            if j.entailment != "entailed":
                out.append(f"{j.judge}: {j.entailment_reason}")
            if j.temporal != "valid":
                out.append(f"{j.judge} (temporal): {j.temporal_reason}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "op": self.op,
            "claim": self.claim,
            "support": self.support,
            "accepted": self.accepted,
            "verdicts": [j.to_dict() for j in self.judgements],
        }


@dataclass
class RoundRecord:
    """One writer answer: ``round`` 0 (proposal) or 1 (repair); ``kind`` proposal, repair,
    offline or fallback; ``raw`` the reply verbatim; ``error`` why it did not validate."""

    round: int
    kind: str
    raw: str = ""
    parsed: dict[str, Any] | None = None
    error: str = ""
    verifier_raw: str = ""
    verifier_error: str = ""
    items: list[ItemRecord] = field(default_factory=list)
    ops: list[dict[str, Any]] = field(default_factory=list)
    cut: bool = False  # the writer's answer was cut at max_tokens (finish_reason length)

    @property
    def rejected(self) -> list[ItemRecord]:
        return [i for i in self.items if not i.accepted]

    @property
    def clean(self) -> bool:
        """Valid reply and nothing rejected."""
        return not self.error and not self.verifier_error and not self.rejected


@dataclass
class Composition:
    """What :func:`compose` returns: the writer ops of one fold and how they were reached."""

    ops: list[dict[str, Any]]
    outcome: str
    writer: dict[str, Any]
    verifier: dict[str, Any]
    rounds: list[RoundRecord] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    note: str = ""
    fallback_reason: str = ""

    def review(self) -> dict[str, Any]:
        """Manifest summary: counts and every rejected item with its reasons."""
        items = [i for r in self.rounds for i in r.items]
        return {
            "rounds": len([r for r in self.rounds if r.kind != "fallback"]),
            "proposed": len(items),
            "accepted": sum(1 for i in items if i.accepted),
            "rejected": sum(1 for i in items if not i.accepted)
            + sum(1 for r in self.rounds if r.error or r.verifier_error),
            "repair": any(r.kind == "repair" for r in self.rounds),
            "fallback_reason": self.fallback_reason,
            "rejections": [
                {"round": r.round, "key": "(answer)", "claim": "", "reasons": [r.error]}
                for r in self.rounds
                if r.error
            ]
            + [
                {"round": r.round, "key": i.key, "claim": i.claim, "reasons": i.reasons}
                for r in self.rounds
                for i in r.items
                if not i.accepted
            ],
        }

    def usage(self) -> dict[str, Any]:
        """Totals over the model calls: calls, input/output tokens, latency (seconds)."""
        return {
            "calls": len(self.calls),
            "input_tokens": sum(c.input_tokens for c in self.calls),
            "output_tokens": sum(c.output_tokens for c in self.calls),
            "latency_s": round(sum(c.latency_s for c in self.calls), 3),
            "total_s": round(sum(c.total_s for c in self.calls), 3),
        }
