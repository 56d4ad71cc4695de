"""What a writer may know of a fold, and the judges every item passes (DESIGN.md 5.2, 5.3). Pure.

* :class:`FoldContext`: fold number, revision, access to earlier raw entries;
* :func:`code_ops`: what code records in every model fold (failures, interrupted calls);
* :func:`rules_judgement` / :func:`dry_run`: the mechanical rules' and the reducer's verdicts
  on one op, as :class:`~ledger_app.model_writer.records.Judgement`;
* :func:`earlier_entries`: the earlier entries a fold's ops cite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ledger_app import reducer
from ledger_app.mechanical import EntryView, interrupted_fact, outcome_fact
from ledger_app.model_writer.records import Judgement
from ledger_app.offline import RuleVerdict

Resolver = Callable[[Iterable[int], Iterable[str]], list[EntryView]]
EvidenceFn = Callable[[Sequence[dict[str, Any]]], dict[str, dict[str, Any]]]


@dataclass
class FoldContext:
    """What a writer may know of the fold besides its entries.

    ``resolve(seqs, hashes)`` returns earlier raw entries of the same scope at or before
    ``revision`` (cited support); ``evidence(ops)`` builds the reducer's evidence index for
    ops (DESIGN.md 5.2). Defaults: nothing earlier, covered entries only.
    """

    number: int
    revision: int
    resolve: Resolver | None = None
    evidence: EvidenceFn | None = None


def default_evidence(entries: Sequence[EntryView], number: int) -> EvidenceFn:
    """An :data:`EvidenceFn` over the covered ``entries`` only (fold ``number``)."""
    index = {
        e.entry_hash: {
            "seq": e.seq,
            "kind": e.kind,
            "role": e.role,
            "is_error": e.is_error,
            "derived": e.derived,
            "fold": number,
        }
        for e in entries
    }
    return lambda ops: index


def code_ops(entries: Sequence[EntryView]) -> list[dict[str, Any]]:
    """What code records in every model fold: failed calls (blockers) and interrupted calls."""
    results = {e.tool_call_id: e for e in entries if e.kind == "tool_result"}
    ops = []
    for e in entries:
        if e.kind != "tool_call":
            continue
        result = results.get(e.tool_call_id)
        if result is None:
            ops.append({"op": "add", "fact": interrupted_fact(e)})
        elif result.is_error:
            ops.append({"op": "add", "fact": outcome_fact(e, result)})
    return ops


def dry_run(
    op: dict[str, Any], state: dict[str, Any], ctx: FoldContext, evidence: EvidenceFn
) -> Judgement:
    """The reducer's verdict on ``op`` applied alone to ``state`` (nothing is kept)."""
    try:
        red = reducer.apply_delta(
            state, {"fold": ctx.number, "evidence": evidence([op]), "ops": [op]}
        )
    except reducer.DeltaInvalid as exc:
        return Judgement("reducer", "not_entailed", str(exc))
    if red.rejected:
        return Judgement("reducer", "not_entailed", red.rejected[0].reason)
    return Judgement("reducer", "entailed", "the reducer's rules accept it")


def rules_judgement(verdict: RuleVerdict) -> Judgement:
    """:func:`ledger_app.offline.check_item`'s verdict as a ``rules`` :class:`Judgement`."""
    return Judgement(
        "rules",
        verdict.entailment,
        verdict.entailment_reason,
        verdict.temporal,
        verdict.temporal_reason,
    )


def earlier_entries(
    ctx: FoldContext,
    ops: Sequence[dict[str, Any]],
    state: dict[str, Any],
    entries: Sequence[EntryView],
    seqs: Iterable[int] = (),
) -> list[EntryView]:
    """Earlier entries the ops (or the facts they end) cite, through ``ctx.resolve``."""
    if ctx.resolve is None:
        return []
    covered = {e.entry_hash for e in entries}
    facts = state.get("facts", {})
    hashes: set[str] = set()
    for op in ops:
        fact = op.get("fact")
        if isinstance(fact, dict):
            hashes |= {s.get("entry") for s in fact.get("support", []) if isinstance(s, dict)}
        hashes |= {h for h in op.get("evidence", []) if isinstance(h, str)}
        target = facts.get(str(op.get("id", "")))
        if target:
            hashes |= {s["entry"] for s in target.get("support", [])}
    wanted = {h for h in hashes if isinstance(h, str)} - covered
    seq_set = set(seqs) - {e.seq for e in entries}
    if not wanted and not seq_set:
        return []
    return ctx.resolve(sorted(seq_set), sorted(wanted))
