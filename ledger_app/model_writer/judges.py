"""What a writer may know of a fold, and the judges every item passes (docs/design.md 5.2, 5.3). Pure.

* :class:`FoldContext`: fold number, revision, access to earlier raw entries;
* :func:`code_ops`: what code records in every model fold (failures, interrupted calls);
* :func:`lifecycle_ops`: the lifecycle rules every model fold and its fallback run too
  (requests closed on evidence, approvals recorded as decisions and consumed);
  :func:`with_rules` puts both before the writer's own ops;
* :func:`rules_judgement` / :func:`dry_run`: the mechanical rules' and the reducer's verdicts
  on one op, as :class:`~ledger_app.model_writer.records.Judgement`;
* :func:`earlier_entries`: the earlier entries a fold's ops cite;
* :func:`closure_judgement`: what an op ends or decides (request pins close per part,
  decisions consumed by their action, decision text quoted exactly, consequential is P1).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger_app import reducer
from ledger_app.entry_view import EntryView, command_of
from ledger_app.fact_text import clip, redact
from ledger_app.facts import support_hashes
from ledger_app.mechanical import interrupted_fact, is_routine_read, is_submit, outcome_fact
from ledger_app.model_writer.records import Judgement
from ledger_app.offline import EvidenceIndex, OfflineWriter, RuleVerdict, is_check_command
from ledger_app.offline.decisions import APPROVAL, AWAIT, acceptance
from ledger_app.offline.request_parts import PART, PartProgress, pin_kinds
from ledger_app.offline.turns import instruction_parts, numbered_items, part_kind
from ledger_app.pin_facts import is_pin_source

Resolver = Callable[[Iterable[int], Iterable[str]], list[EntryView]]
EvidenceFn = Callable[[Sequence[dict[str, Any]]], dict[str, dict[str, Any]]]


@dataclass
class FoldContext:
    """What a writer may know of the fold besides its entries.

    ``resolve(seqs, hashes)`` returns earlier raw entries of the same scope at or before
    ``revision`` (cited support); ``evidence(ops)`` builds the reducer's evidence index for
    ops (docs/design.md 5.2). Defaults: nothing earlier, covered entries only.
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


#: Id prefixes of the facts the lifecycle rules write and end (docs/design.md 5.5): a request
#: pin's ``close``, the completion (``done:``), approvals (``await:`` awaited, ``approval:``
#: given), a request's parts (``part:``) and the user's stated decisions (``decision:``).
#: Not the turn's conclusion (``said:``, the assistant's words at ``reported``): what the
#: assistant said is the model's to write, and its fallback writes no claim
LIFECYCLE_PREFIXES = ("pin:", "done:", AWAIT, APPROVAL, PART, "decision:")
#: the ops of the lifecycle rules a model fold keeps (a pin's ``retire`` goes to review
#: from the writer's own proposal: it is not a conclusion)
LIFECYCLE_OPS = ("add", "close", "supersede", "cancel")


def lifecycle_ops(
    entries: Sequence[EntryView], state: dict[str, Any], proposed: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The ops of the lifecycle rules for ``entries``: what ends or decides, whatever the
    writer (docs/design.md 5.5, "Lifecycles"). A request pin closes on the evidence that
    carried out every part of it, an approval ("yes, approved") becomes a decision quoting
    what was accepted, an awaited approval and a used one end: the offline writer's rules
    (:class:`ledger_app.offline.OfflineWriter`), of which only the ops on the
    :data:`LIFECYCLE_PREFIXES` facts are kept (its tool outcomes and claims are the model's
    to write). A model fold records them with its own ops, as it records
    :func:`code_ops`; so does its mechanical fallback. Labelled ``author: offline``.

    Args:
        entries: the covered entries of the slice, in seq order.
        state: the ledger state before the slice (its pins, open parts, awaited approvals).
        proposed: the writer's own ops: an op on the same fact id (the model closed that
            request itself) is not repeated.

    Returns:
        ops in journal order (``add``/``close``/``supersede``/``cancel``).
    """
    taken = {(op.get("op"), _op_id(op)) for op in proposed}
    kept = []
    for op in OfflineWriter().propose(entries, state):
        target = _op_id(op)
        if op.get("op") not in LIFECYCLE_OPS or not target.startswith(LIFECYCLE_PREFIXES):
            continue
        if (op.get("op"), target) not in taken:
            kept.append(op)
    return kept


def with_rules(
    entries: Sequence[EntryView], state: dict[str, Any], proposed: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A model slice's ops: :func:`code_ops`, then :func:`lifecycle_ops` (less what
    ``proposed`` already holds), then ``proposed`` (the writer's verified ops)."""
    return [*code_ops(entries), *lifecycle_ops(entries, state, proposed), *proposed]


def _op_id(op: Mapping[str, Any]) -> str:
    """The fact id an op is about: the added fact's, or the one it ends or replaces."""
    if op.get("op") == "add":
        return str((op.get("fact") or {}).get("id", ""))
    return str(op.get("id", ""))


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


def rules_judgement(verdict: RuleVerdict, closure: Judgement | None = None) -> Judgement:
    """:func:`ledger_app.offline.check_item`'s verdict as a ``rules`` :class:`Judgement`,
    joined with :func:`closure_judgement`'s when given (one ``rules`` record per item: a
    verdict fails when either does, with every reason)."""

    def join(ok: str, a: tuple[str, str], b: tuple[str, str] | None) -> tuple[str, str]:
        if b is None or b[0] == ok:
            return a
        if a[0] == ok:
            return b
        return a[0], f"{a[1]}; {b[1]}"

    more = closure
    entail = join(
        "entailed",
        (verdict.entailment, verdict.entailment_reason),
        (more.entailment, more.entailment_reason) if more else None,
    )
    temporal = join(
        "valid",
        (verdict.temporal, verdict.temporal_reason),
        (more.temporal, more.temporal_reason) if more else None,
    )
    return Judgement("rules", entail[0], entail[1], temporal[0], temporal[1])


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
    hashes: set[object] = set()  # what the ops cite, strings kept below
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


def _pin_kind(fact_id: str, index: EvidenceIndex, state: Mapping[str, Any]) -> str | None:
    """The kind of pin ``fact_id`` (``"request"``/``"governing"``; a pin without one is
    governing), from the state or, for a pin of this fold, from its entry; ``None`` when
    ``fact_id`` names no pin."""
    fact = state.get("facts", {}).get(fact_id)
    if fact is not None:
        return str(fact.get("pin_kind") or "governing") if fact.get("pin") else None
    if not fact_id.startswith("pin:"):
        return None
    prefix = fact_id.removeprefix("pin:")
    for e in index.by_hash.values():
        if e.entry_hash.startswith(prefix) and is_pin_source(e):
            return pin_kinds(index.entries, state).get(fact_id, "governing")
    return None


def _pin_text(fact_id: str, index: EvidenceIndex, state: Mapping[str, Any]) -> str:
    fact = state.get("facts", {}).get(fact_id)
    if fact is not None:
        return str(fact.get("text", ""))
    prefix = fact_id.removeprefix("pin:")
    return next((e.text for e in index.by_hash.values() if e.entry_hash.startswith(prefix)), "")


def _pairs(op: Mapping[str, Any], index: EvidenceIndex) -> list[tuple[EntryView, EntryView]]:
    """The (call, result) pairs of the results an op cites as evidence, in seq order."""
    results = sorted(
        (
            index.by_hash[h]
            for h in op.get("evidence", [])
            if isinstance(h, str) and h in index.by_hash
        ),
        key=lambda v: v.seq,
    )
    return [
        (call, r)
        for r in results
        if r.kind == "tool_result" and (call := index.call_of(r)) is not None
    ]


def _unproven_parts(
    text: str,
    pairs: list[tuple[EntryView, EntryView]],
    index: EvidenceIndex,
    pin_id: str,
    state: Mapping[str, Any],
    ended: Collection[str],
) -> list[str]:
    """The parts of request ``text`` (:func:`instruction_parts`) that the cited pairs do not
    carry out (:class:`PartProgress`, the offline writer's rule); an item of a numbered list
    whose ``part:`` obligation is closed in ``state``, or by an earlier op of the same
    answer (``ended``), is carried out; so is an acceptance ("Yes, approved.") whose
    approval the same answer or the state records as consumed."""
    listed = numbered_items(text) is not None
    facts = state.get("facts", {})
    h = pin_id.removeprefix("pin:")
    approval = f"approval:{h}"
    if approval in ended or facts.get(approval, {}).get("lifecycle") == "closed":
        return []  # an acceptance is carried out when the action it approved ran (consumed)
    how = acceptance(text)
    if how is not None and how.edited and any(str(e).startswith("approval:") for e in ended):
        return []  # an edit of a proposal ("take 2, but ..."), its restated text used now
    parts = [
        PartProgress(p, part_kind(p, problem=listed))
        for n, p in enumerate(instruction_parts(text), start=1)
        if not (
            listed
            and (
                f"part:{h}.{n}" in ended
                or facts.get(f"part:{h}.{n}", {}).get("lifecycle") == "closed"
            )
        )
    ]
    changed = passed = False
    for call, result in pairs:
        if is_routine_read(call):
            continue
        check = index.test_run(result) is not None or is_check_command(command_of(call))
        ok = not index.failed(result)
        if is_submit(call):
            # a submission after a change and a passing check carries out what is left
            # (the offline writer's rule: a run that submits its fix, tests passing)
            if changed and passed:
                return []
            continue
        changed, passed = changed or (ok and not check), (ok if check else passed)
        for part in parts:
            part.see(call, result, ok=ok, check=check)
    return [p.text for p in parts if not p.done]


def closure_judgement(
    op: Mapping[str, Any],
    index: EvidenceIndex,
    state: Mapping[str, Any],
    ended: Collection[str] = (),
) -> Judgement:
    """The rules' verdict on what an op ends or decides, for every writer (docs/design.md 5.5):

    * a ``close`` of a pin: only a **request** pin closes (a governing pin never does), and
      only when the cited results carry out each of its parts ("fix the crash in B and add
      a regression test" is not closed by one edit of B): temporal ``invalid`` otherwise;
    * a ``close`` of a decision (an approval consumed): the cited evidence holds a
      successful action (not a read) after the approval, else temporal ``invalid``;
    * a ``decision`` fact with ``decision_text``: that text occurs exactly in a cited entry,
      else ``not_entailed`` (what was decided must be quoted, not paraphrased);
    * a ``consequential`` fact is P1 (an action that changed something outside the
      conversation, and its outcome, stays active work state until superseded).

    ``ended``: the ids an earlier op of the same answer closes (a request's parts).

    Returns:
        a ``rules`` :class:`Judgement` (``entailed``/``valid`` when no rule applies).
    """
    entail: list[str] = []
    temporal: list[str] = []
    fact = op.get("fact") if isinstance(op.get("fact"), dict) else None
    if op.get("op") == "close":
        target_id = str(op.get("id", ""))
        kind = _pin_kind(target_id, index, state)
        target = state.get("facts", {}).get(target_id) or {}
        if kind == "governing":
            temporal.append("a governing pin never closes; only a reviewed retirement ends it")
        elif kind == "request":
            missing = _unproven_parts(
                _pin_text(target_id, index, state),
                _pairs(op, index),
                index,
                target_id,
                state,
                ended,
            )
            if missing:
                temporal.append(
                    "the request is not carried out: no cited result completes "
                    + "; ".join(f"'{clip(redact(p), 120)}'" for p in missing)
                )
        elif target.get("category") == "decision":
            after = max(
                (index.by_hash[h].seq for h in support_hashes(target) if h in index.by_hash),
                default=0,
            )
            used = [
                r
                for call, r in _pairs(op, index)
                if r.seq > after and not index.failed(r) and not is_routine_read(call)
            ]
            if not used:
                temporal.append(
                    "an approval is consumed only by the approved action's successful result "
                    "after it; the evidence holds none"
                )
    elif fact is not None:
        quoted = fact.get("decision_text")
        if fact.get("category") == "decision" and isinstance(quoted, str) and quoted.strip():
            cited = [index.by_hash[h] for h in support_hashes(fact) if h in index.by_hash]
            if cited and not any(quoted.strip() in v.text for v in cited):
                entail.append(
                    "the decision's text is not quoted exactly from a cited entry (a "
                    "paraphrase of what was approved is not what was approved)"
                )
        if fact.get("consequential") and fact.get("priority") != "P1":
            entail.append(
                "a consequential action (it changed something outside the conversation) and "
                "its outcome are P1 until superseded"
            )
    return Judgement(
        "rules",
        "not_entailed" if entail else "entailed",
        "; ".join(entail) or "no rule applies",
        "invalid" if temporal else "valid",
        "; ".join(temporal) or "no rule applies",
    )
