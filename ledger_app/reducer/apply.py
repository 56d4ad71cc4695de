"""Deltas applied to a ledger state: :func:`apply_delta`, :func:`apply_in_place`, :func:`reduce`.

Pure module: no Django, no database, no clock. ``_apply`` judges each op by the rules of
:mod:`ledger_app.reducer.rules` and changes the state it is given in place;
:func:`apply_delta` works on a copy, :func:`reduce` replays deltas onto a copy of a
checkpoint.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ledger_app.facts import Fact
from ledger_app.reducer.key_index import index_of, index_slot
from ledger_app.reducer.records import EMPTY_STATE, OPS, DeltaInvalid, OpResult, Reduction
from ledger_app.reducer.rules import (
    authoritative_later,
    check_confidence,
    check_fact_shape,
    check_pin,
    check_support,
    completion,
    demote,
    end_by_key,
    end_carried,
    unresolved_support,
)


def apply_delta(state: Mapping[str, Any], delta: Mapping[str, Any]) -> Reduction:
    """Apply one delta to ``state`` and return the new state with a verdict per op.

    Args:
        state: a state produced by this module (or :data:`EMPTY_STATE`); not modified.
        delta: see the module docstring.

    Returns:
        :class:`Reduction`.

    Raises:
        DeltaInvalid: ``delta`` lacks ``fold``/``ops``/``evidence`` or an op is not an object.
        PinViolation: after applying the ops a required pin is missing or differs.
    """
    new = copy.deepcopy(dict(state))
    return Reduction(state=new, results=_apply(new, delta))


def apply_in_place(state: dict[str, Any], delta: Mapping[str, Any]) -> list[OpResult]:
    """Apply ``delta`` to ``state`` in place (no copy) and return the verdict per op.

    What :func:`reduce` does for each delta, for a caller that also wants the verdicts
    (``verify_ledger``'s replay). Raises what :func:`apply_delta` raises; on a raise the
    state may be partly changed (replay stops there).
    """
    return _apply(state, delta)


def _apply(new: dict[str, Any], delta: Mapping[str, Any]) -> list[OpResult]:
    """Apply ``delta`` to ``new`` in place and return the verdicts (see :func:`apply_delta`)."""
    for key in ("fold", "ops", "evidence"):
        if key not in delta:
            raise DeltaInvalid(f"delta has no {key!r}", field=key)
    fold = int(delta["fold"])
    evidence: Mapping[str, Mapping[str, Any]] = delta["evidence"]
    facts: dict[str, Fact] = new.setdefault("facts", {})
    results: list[OpResult] = []
    rules = int(delta.get("lifecycle_rules") or 0) >= 1
    keyed = rules and any(
        isinstance(op, dict) and isinstance(op.get("fact"), dict) and op["fact"].get("command_key")
        for op in delta["ops"]
    )
    key_index = index_of(facts) if keyed else None

    for index, op in enumerate(delta["ops"]):
        if not isinstance(op, dict):
            raise DeltaInvalid("an op must be an object", index=index)
        kind = op.get("op")

        def reject(reason: str, fact_id: str = "", _i: int = index, _k: Any = kind) -> None:
            results.append(OpResult(_i, str(_k), "rejected", reason, fact_id))

        def invalid(reason: str, field_name: str, _i: int = index, _k: Any = kind) -> DeltaInvalid:
            return DeltaInvalid(reason, index=_i, op=str(_k), field=field_name)

        if kind not in OPS:
            raise invalid(f"unknown operation {kind!r} (known: {', '.join(OPS)})", "op")

        by_existing = kind == "supersede" and "fact" not in op and "by" in op
        if kind in ("add", "supersede") and not by_existing:
            fact = op.get("fact")
            problem = check_fact_shape(fact)
            if problem or not isinstance(fact, dict):  # the shape check passes dicts only
                raise invalid(problem, "fact")
            unresolved = unresolved_support(fact, evidence)
            if unresolved:
                raise invalid(unresolved, "fact.support")
            if kind == "supersede" and str(op.get("id", "")) not in facts:
                raise invalid(f"unknown fact {op.get('id')!r}", "id")
            fact = copy.deepcopy(fact)
            fact_id = fact.get("id") or f"f{fold}.{index}"
            fact["id"] = fact_id
            fact.setdefault("lifecycle", "active")
            fact.setdefault("author", "writer")
            fact["origin_fold"] = fold
            problem = check_support(fact, evidence) or check_confidence(fact, evidence)
            if not problem and fact.get("pin") and fact["author"] != "code":
                problem = "pins are written by deterministic code, never by a model"
            if not problem and fact_id in facts:
                problem = f"fact id {fact_id!r} already exists"
            if not problem and fact["lifecycle"] != "active":
                problem = "a new fact starts 'active'"
            target = None
            if not problem and kind == "supersede":
                target = facts.get(str(op.get("id", "")))
                if target is None:
                    problem = f"field 'id': unknown fact {op.get('id')!r}"
                elif target["lifecycle"] != "active":
                    problem = f"fact {target['id']!r} is {target['lifecycle']}, not active"
                elif target["priority"] == "P0":
                    problem = "a P0 fact is never superseded; it can only be retired with review"
            if problem:
                reject(problem, fact_id)
                continue
            if target is not None:
                target["lifecycle"] = "superseded"
                target["superseded_by"] = fact_id
                if rules:
                    demote(target)
            facts[fact_id] = fact
            ended = ""
            command_key = fact.get("command_key")
            if key_index is not None and command_key and not fact.get("pin"):
                command_key = str(command_key)
                ends = [
                    f"{old} {end_by_key(facts[old], fact, fold, evidence)} (same command key)"
                    for old in key_index.active(command_key, fact_id)
                ]
                key_index.add(command_key, fact_id)
                ended = "; ".join(ends)
            results.append(OpResult(index, kind, "accepted", ended, fact_id))
            continue

        fact_id = str(op.get("id", ""))
        target = facts.get(fact_id)
        if target is None:
            raise invalid(f"unknown fact {fact_id!r}", "id")
        ev = op.get("evidence", [])
        if not isinstance(ev, list) or not all(isinstance(h, str) for h in ev):
            raise invalid("must be a list of entry hashes", "evidence")
        unknown = [h for h in ev if h not in evidence]
        if unknown:
            raise invalid(
                f"sha256:{unknown[0]} is not a raw entry of this scope at or before the revision",
                "evidence",
            )

        if kind == "evict":
            if target["priority"] in ("P0", "P1") and target["lifecycle"] == "active":
                reject("active P0 and P1 facts are never evicted", fact_id)
            else:
                del facts[fact_id]
                results.append(OpResult(index, kind, "accepted", "", fact_id))
            continue

        assert target is not None
        if target["lifecycle"] != "active":
            reject(f"fact {fact_id!r} is {target['lifecycle']}, not active", fact_id)
            continue

        if kind == "supersede":  # by an existing fact (``by``), no new fact
            newer = facts.get(str(op.get("by", "")))
            if not rules:
                reject("'supersede' by an existing fact needs the delta's lifecycle_rules", fact_id)
            elif newer is None or newer.get("lifecycle", "active") != "active":
                reject(f"field 'by': {op.get('by')!r} is not an active fact", fact_id)
            elif target.get("pin") or target["priority"] == "P0":
                reject("a P0 fact is never superseded; it can only be retired with review", fact_id)
            elif target["category"] == "open_obligation" and (
                "plan_status" not in target
                or not isinstance(newer.get("plan_items"), list)
                or fact_id in newer["plan_items"]
            ):
                reject(
                    "an open obligation ends only by 'close' on completion evidence or "
                    "'cancel'; only a later plan that no longer holds a plan item supersedes it",
                    fact_id,
                )
            else:
                target["lifecycle"] = "superseded"
                target["superseded_by"] = str(op["by"])
                if op.get("reason"):
                    target["ended_reason"] = str(op["reason"])
                demote(target)
                results.append(OpResult(index, kind, "accepted", "", fact_id))
            continue

        if kind == "withdraw":
            refold_of = delta.get("refold_of")
            if target.get("pin"):
                reject("a pin is never withdrawn; it can only be retired with review", fact_id)
            elif refold_of is None or target.get("origin_fold") != refold_of:
                reject(
                    f"only a refold of fold {target.get('origin_fold')} withdraws its facts",
                    fact_id,
                )
            else:
                target["lifecycle"] = "superseded"
                target["superseded_by"] = f"refold:{fold}"
                results.append(OpResult(index, kind, "accepted", "", fact_id))
            continue

        if kind == "retire":
            if target["category"] == "open_obligation":
                reject(
                    "an open obligation ends only by 'close' on completion evidence or 'cancel'",
                    fact_id,
                )
                continue
            if target["priority"] == "P0":
                if not authoritative_later(ev, evidence, int(target.get("origin_fold", 0))):
                    reject(
                        "a P0 fact retires only on authoritative evidence (a later user, "
                        "developer or system entry) from a later fold",
                        fact_id,
                    )
                    continue
                target["pending_retirement"] = {
                    "fold": fold,
                    "evidence": list(ev),
                    "reason": str(op.get("reason", "")),
                }
                results.append(OpResult(index, kind, "pending", "awaiting review", fact_id))
                continue
            if not ev:
                reject("retiring a fact needs evidence", fact_id)
                continue
            target["lifecycle"] = "retired"
            target["ended_by"] = {"fold": fold, "evidence": list(ev)}
            results.append(OpResult(index, kind, "accepted", "", fact_id))
        elif kind == "review":
            pending = target.get("pending_retirement")
            decision = op.get("decision")
            if not pending:
                reject("no retirement of this fact awaits review", fact_id)
            elif decision not in ("approve", "refuse"):
                reject("field 'decision': must be 'approve' or 'refuse'", fact_id)
            elif not op.get("reviewer"):
                reject("field 'reviewer': a review names its reviewer", fact_id)
            else:
                record = {
                    "decision": decision,
                    "reviewer": str(op["reviewer"]),
                    "comment": str(op.get("comment", "")),
                    "at": str(op.get("at", "")),
                    "retirement": pending,
                }
                target.setdefault("reviews", []).append(record)
                del target["pending_retirement"]
                if decision == "approve":
                    target["lifecycle"] = "retired"
                    target["ended_by"] = {"fold": pending["fold"], "evidence": pending["evidence"]}
                results.append(OpResult(index, kind, "accepted", decision, fact_id))
        elif kind == "close":
            request = bool(target.get("pin")) and target.get("pin_kind") == "request"
            closable = not target.get("pin") and target["category"] == "open_obligation"
            if rules:
                closable = (
                    closable
                    or request
                    or (not target.get("pin") and target["category"] == "decision")
                )
            if not closable:
                reject(
                    "only an open obligation, a request pin or a decision can be closed "
                    "(a governing pin ends only by a reviewed retirement)"
                    if rules
                    else "only an open obligation can be closed",
                    fact_id,
                )
            elif not completion(ev, evidence):
                reject(
                    "an open obligation closes only on evidence of completion (a tool result "
                    "that demonstrates it); silence, repetition or a later timestamp do not count",
                    fact_id,
                )
            else:
                target["lifecycle"] = "closed"
                target["ended_by"] = {"fold": fold, "evidence": list(ev)}
                if rules and isinstance(op.get("seq"), int):
                    target["ended_by"]["seq"] = op["seq"]
                if rules and op.get("reason"):
                    target["ended_by"]["reason"] = str(op["reason"])
                ended = ""
                if rules:
                    demote(target)
                    if request:
                        done = end_carried(facts, fact_id, list(ev), fold, op.get("seq"))
                        ended = f"ends {', '.join(done)} (carried it out)" if done else ""
                results.append(OpResult(index, kind, "accepted", ended, fact_id))
        elif kind == "cancel":
            if target["category"] != "open_obligation":
                reject("only an open obligation can be cancelled", fact_id)
            elif not authoritative_later(ev, evidence, -1):
                reject(
                    "cancellation needs an authoritative (user, developer or system) entry", fact_id
                )
            else:
                target["lifecycle"] = "cancelled"
                target["ended_by"] = {"fold": fold, "evidence": list(ev)}
                results.append(OpResult(index, kind, "accepted", "", fact_id))

    if key_index is not None:
        index_slot()[2] = len(facts)
    for pin in delta.get("required_pins", []):
        check_pin(facts, pin["entry"], pin["text"])
    new["folds"] = max(int(new.get("folds", 0)), fold)
    return results


def reduce(
    checkpoint: Mapping[str, Any] | None, deltas: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """Fold ``deltas`` in order onto ``checkpoint`` (``None`` = empty) and return the state.

    Deterministic: the same inputs give the same state and :func:`state_hash`. The
    checkpoint is copied once and the deltas applied in place, so time is linear in the
    number of ops (``bench/`` measures the exponent). Raises what :func:`apply_delta` raises.
    """
    with gc_paused():
        state = copy.deepcopy(dict(checkpoint if checkpoint is not None else EMPTY_STATE))
        for delta in deltas:
            _apply(state, delta)
    return state


#: how many :func:`gc_paused` blocks are open in this process (any thread), and whether
#: the collector was on when the first of them opened
_PAUSE = {"depth": 0, "was_enabled": False}
_PAUSE_LOCK = threading.Lock()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a replay or a context build, re-enabling
    it when the last open pause of the process ends (if it was on before the first).

    The reducer makes only acyclic dicts and lists, so a collection during a replay frees
    nothing, yet each generation-2 collection walks every live object (the growing state and
    the caller's deltas): over 10 ... 10,000 deltas that made ``reduce`` grow with exponent
    1.17, against 1.01 paused (``bench/reducer_scaling.py``); a context build of a long
    journal holds some 10^5 objects the same way. Reference counting still frees everything
    as usual. The collector's switch is process-wide, so pauses are counted under a lock:
    two threads' pauses that overlap in any order leave it as it was before the first
    (``tests/ledger_app/test_reducer_gc.py``)."""
    with _PAUSE_LOCK:
        if _PAUSE["depth"] == 0:
            _PAUSE["was_enabled"] = gc.isenabled()
            gc.disable()
        _PAUSE["depth"] += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _PAUSE["depth"] -= 1
            if _PAUSE["depth"] == 0 and _PAUSE["was_enabled"]:
                gc.enable()
