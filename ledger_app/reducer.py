"""The deterministic reducer: ``state = reduce(checkpoint, deltas)`` (DESIGN.md section 5.2).

Pure module: no Django, no database, no clock. Ledger state is computed from the ordered
deltas, never edited in place; replaying every delta from an empty state reproduces the
stored state byte for byte (same canonical JSON, same :func:`state_hash`).

A delta is a dict::

    {"fold": 3,                      # the fold number (later folds have larger numbers)
     "revision": 120,                # journal head seq the fold saw
     "evidence": {"<hex>": {"seq": 7, "kind": "message", "role": "user",
                            "is_error": false, "derived": false, "fold": 3}},
     "required_pins": [{"entry": "<hex>", "text": "..."}],
     "ops": [{"op": "add", "fact": {...}}, ...]}

``evidence`` describes every entry the ops may cite: raw entries of the same scope at or
before ``revision``, with the number of the fold that covered them. It is stored with the
delta, so the reducer needs nothing else to judge an op.

Bad input refuses the whole delta (:class:`DeltaInvalid`, naming the op and field, so the
fold stores nothing): an op that is not an object or names an unknown operation, a fact
without its fields, a reference to an unknown fact, a support or evidence hash outside
``evidence`` (not a raw entry of the scope at or before the revision).

The rules (each broken rule rejects the op with a reason; nothing is dropped silently):

* support must not be a derived entry (a summary or compaction marker) (5.1);
* pins are written by code only, and every required pin must be present verbatim (5.2);
* P0 retirement needs authoritative evidence from a later fold, and then only becomes a
  pending review; a ``review`` op with ``decision="approve"`` retires it (5.2);
* an open obligation closes only on a non-failed tool result or an authoritative
  cancellation (5.2);
* an assistant statement stays ``reported``: ``verified`` needs a tool result, and a
  failed tool result cannot support a success claim (5.2, 5.3);
* lifecycles that end (DESIGN.md 5.5), for a delta with ``"lifecycle_rules": 1`` (every
  fold since; older deltas replay as they were written): an added fact whose
  ``command_key`` equals an active fact's supersedes it (a later run of the same command,
  a later edit of the same file), and a failure (``outcome`` failure) ends *closed* when
  the later fact is a success; a superseded or closed P1/P2 fact drops to P3 history
  (``was_priority`` keeps what it was); ``close`` also ends a request pin
  (``pin_kind`` request; a governing pin never closes) and a ``decision`` (an approval
  consumed by the action it approved), on completion evidence, with the ``seq`` of use;
  ``supersede`` with ``"by"`` (an existing active fact) and no ``fact`` retires a fact into
  a newer one (a plan item the latest plan no longer holds);
* ``withdraw`` (a refold: the same range folded again by a better writer, recorded as a new
  fold, never an edit) supersedes an active non-pin fact only when the delta says
  ``"refold_of": n`` and the fact was born in fold ``n``.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import hashlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import rfc8785

from ledger_app.facts import (
    AUTHORITATIVE_ROLES,
    AUTHORS,
    CATEGORIES,
    CONFIDENCES,
    LIFECYCLES,
    PRIORITIES,
    Fact,
)

#: Version of the lifecycle rules (DESIGN.md 5.5) a fold's delta is written against
#: (``delta["lifecycle_rules"]``); a delta without it replays under the rules before them.
LIFECYCLE_RULES = 1

OPS = ("add", "supersede", "retire", "close", "cancel", "review", "evict", "withdraw")
EMPTY_STATE: dict[str, Any] = {"facts": {}, "folds": 0}


class PinViolation(Exception):
    """A state in which a required pin is missing or differs from the journal text.

    The fold that produced it is refused (DESIGN.md section 5.2).
    """

    def __init__(self, entry: str, reason: str) -> None:
        self.entry = entry
        self.reason = reason
        super().__init__(f"pin for entry sha256:{entry}: {reason}")


class DeltaInvalid(ValueError):
    """Bad input, not a rule breach: the whole delta is refused and nothing of it is stored.

    Raised for a malformed op (not an object, unknown ``op``, a fact without its fields), a
    reference to an unknown fact, and a support or evidence hash that is not a raw entry of
    the scope at or before the fold's revision. Rule breaches (authority, confidence,
    closing without evidence) are *rejected ops* kept in the delta instead.

    Attributes: ``index`` (the op's position, or -1 for the delta), ``op``, ``field``.
    """

    def __init__(self, reason: str, *, index: int = -1, op: str = "", field: str = "") -> None:
        self.index, self.op, self.field, self.reason = index, op, field, reason
        where = f"op {index} ({op!r})" if index >= 0 else "delta"
        super().__init__(f"{where}" + (f", field {field!r}" if field else "") + f": {reason}")


@dataclass
class OpResult:
    """The reducer's verdict on one op: ``status`` accepted/rejected/pending and why."""

    index: int
    op: str
    status: str
    reason: str = ""
    fact_id: str = ""


@dataclass
class Reduction:
    """Output of :func:`apply_delta`: the new state and one :class:`OpResult` per op."""

    state: dict[str, Any]
    results: list[OpResult] = field(default_factory=list)

    @property
    def rejected(self) -> list[OpResult]:
        return [r for r in self.results if r.status == "rejected"]


def state_bytes(state: Mapping[str, Any]) -> bytes:
    """RFC 8785 canonical JSON of a state (what a checkpoint stores)."""
    return rfc8785.dumps(dict(state))


# The state hash ------------------------------------------------------------------------------
#
# ``state_hash`` must not need the whole state serialised at every fold (issue 18), so it is
# built from a *multiplicative set hash* over the facts (MuHash, Bellare and Micciancio, "A
# New Paradigm for Collision-free Hashing: Incrementality at Reduced Cost", EUROCRYPT 1997;
# the construction Bitcoin Core uses for its UTXO-set hash, MuHash3072):
#
# 1. each fact becomes one element of the group of integers modulo the prime
#    ``P = 2**3072 - 1103717``: ``e(id, fact) = SHAKE-256("ledgerkeep fact v2" || len(id)
#    || id || canonical JSON of the fact)`` read as a 3072-bit integer, reduced mod ``P``
#    (the id is length-prefixed and RFC 8785 JSON is one byte string per fact, so two
#    different facts never give the same input);
# 2. the *accumulator* of a set of facts is the product of their elements mod ``P`` (1 for
#    no facts). Adding a fact multiplies by its element, removing one multiplies by the
#    element's inverse, and a changed fact is a removal plus an addition: a fold costs one
#    multiplication per changed fact and one inversion, whatever the ledger's size;
# 3. ``state_hash = sha256("ledgerkeep state v2" 0x00 canonical JSON of the state without
#    its facts 0x00 accumulator as 384 big-endian bytes)``.
#
# Why collisions are out of reach: the facts of a state are a set keyed by id (each id once),
# so two states with the same hash and the same non-fact fields must have fact sets with the
# same product. Finding two different sets with the same product of SHAKE-256 outputs is as
# hard as the discrete logarithm in the multiplicative group mod a 3072-bit prime (about
# 128-bit security), the MuHash theorem, with SHAKE-256 as the random oracle. An XOR or sum
# of per-fact hashes would *not* do: those are linear and broken by Wagner's generalised
# birthday attack. The hash is a function of the state alone (not of the path that led to
# it): replay from scratch, from a checkpoint, and :func:`state_hash` over a whole state all
# give the same value, which is what ``verify_ledger`` compares.

MUHASH_PRIME = 2**3072 - 1103717
_ACC_BYTES = 384
ACC_EMPTY = 1


def fact_element(fact_id: str, fact: Mapping[str, Any]) -> int:
    """The group element of one fact (step 1 above): an integer in ``[1, P)``."""
    return element_of_canonical(fact_id, rfc8785.dumps(dict(fact)))


def element_of_canonical(fact_id: str, canonical: bytes) -> int:
    """:func:`fact_element` from the fact's RFC 8785 bytes (a stored row's ``data``), so a
    caller holding canonical JSON does not parse and re-serialise it."""
    key = fact_id.encode("utf-8")
    data = b"ledgerkeep fact v2\x00%d\x00" % len(key) + key + canonical
    value = int.from_bytes(hashlib.shake_256(data).digest(_ACC_BYTES), "big") % MUHASH_PRIME
    return value or 1


def acc_update(
    acc: int,
    removed: Iterable[tuple[str, Mapping[str, Any]]],
    added: Iterable[tuple[str, Mapping[str, Any]]],
) -> int:
    """The accumulator after removing and adding facts (``(id, fact)`` pairs); one inversion.

    A fact that changed is given in both: its old version in ``removed``, its new one in
    ``added``. Removing a fact that is not in the set gives a meaningless accumulator (the
    caller passes the facts exactly as they were).
    """
    num, den = acc, 1
    for fact_id, fact in added:
        num = num * fact_element(fact_id, fact) % MUHASH_PRIME
    for fact_id, fact in removed:
        den = den * fact_element(fact_id, fact) % MUHASH_PRIME
    return num if den == 1 else num * pow(den, -1, MUHASH_PRIME) % MUHASH_PRIME


def acc_of(facts: Mapping[str, Mapping[str, Any]]) -> int:
    """The accumulator of a whole set of facts (``{id: fact}``)."""
    return acc_update(ACC_EMPTY, (), facts.items())


def acc_hex(acc: int) -> str:
    """The accumulator as 768 hex digits (how a fold stores it)."""
    return acc.to_bytes(_ACC_BYTES, "big").hex()


def acc_parse(text: str) -> int:
    """Inverse of :func:`acc_hex`."""
    return int(text, 16) if text else ACC_EMPTY


def hash_of(acc: int, rest: Mapping[str, Any]) -> str:
    """``state_hash`` from an accumulator and the state's non-fact fields (step 3 above)."""
    head = rfc8785.dumps({k: v for k, v in rest.items() if k != "facts"})
    data = b"ledgerkeep state v2\x00" + head + b"\x00" + acc.to_bytes(_ACC_BYTES, "big")
    return hashlib.sha256(data).hexdigest()


def state_hash(state: Mapping[str, Any]) -> str:
    """The hash of a whole state (see the construction above); equals the incremental one."""
    return hash_of(acc_of(state.get("facts", {})), state)


def delta_reads(delta: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """What :func:`apply_delta` may read of the state: ``(fact ids, pin entry hashes)``.

    The ids every op names (targets, given fact ids, the ids an ``add`` without one would
    get) and the pin ids of the required pins; the entry hashes of the required pins, for
    the pins that cite them under another id. Applying the delta to a state holding only
    these facts (and every fact that is a pin citing one of these entries) gives the same
    verdicts and the same new versions of these facts as applying it to the whole state:
    the reducer reads no other fact. Malformed ops are skipped here (the reducer refuses
    them).
    """
    ids: set[str] = set()
    fold = delta.get("fold")
    for index, op in enumerate(delta.get("ops") or []):
        if not isinstance(op, dict):
            continue
        if "id" in op:
            ids.add(str(op["id"]))
        if "by" in op:
            ids.add(str(op["by"]))
        if op.get("op") == "close" and delta.get("lifecycle_rules"):
            ids |= _carried_ids(str(op.get("id", "")), op.get("evidence"))
        fact = op.get("fact")
        if isinstance(fact, dict):
            ids.add(str(fact.get("id") or f"f{fold}.{index}"))
    entries = {str(p["entry"]) for p in delta.get("required_pins") or [] if isinstance(p, dict)}
    ids |= {f"pin:{e[:16]}" for e in entries}
    return ids, entries


def _carried_ids(pin_id: str, evidence: Any) -> set[str]:
    """The ids of the facts a request's ``close`` ends with it: the outcome facts of its
    evidence (``tool:``/``test:`` + 16 hex of the result, as code names them) and its
    ``done:`` record (:func:`_end_carried`)."""
    if not pin_id.startswith("pin:") or not isinstance(evidence, list):
        return set()
    ids = {f"done:{pin_id[4:]}"}
    for h in evidence:
        if isinstance(h, str):
            ids |= {f"tool:{h[:16]}", f"test:{h[:16]}"}
    return ids


def _end_carried(
    facts: dict[str, Fact], pin_id: str, evidence: list[str], fold: int, seq: Any
) -> list[str]:
    """A request that closes ends the active P1 facts that carried it out (DESIGN.md 5.5:
    its file edits' outcomes and its ``done:`` record drop to P3 history, cited by the
    closed pin, which a context shows as one "done at seq N" line); a consequential action
    other than a file edit (a migration, a deploy) stays P1 until superseded. Returns the
    ids ended."""
    ended = []
    for fid in sorted(_carried_ids(pin_id, evidence)):
        fact = facts.get(fid)
        if (
            fact is None
            or fact.get("pin")
            or fact.get("lifecycle", "active") != "active"
            or fact.get("priority") != "P1"
            or fact.get("outcome") == "failure"
            # a change outside the conversation that lasts (a migration, a deploy, a push)
            # stays P1 until superseded; a file's edit is in the file, its request done
            or (
                fact.get("consequential")
                and not str(fact.get("command_key", "")).startswith("edit:")
            )
        ):
            continue
        fact["lifecycle"] = "closed"
        fact["ended_by"] = {"fold": fold, "evidence": list(evidence), "by": pin_id}
        if isinstance(seq, int):
            fact["ended_by"]["seq"] = seq
        _demote(fact)
        ended.append(fid)
    return ended


def delta_keys(delta: Mapping[str, Any]) -> set[str]:
    """The command keys :func:`apply_delta` may look up in the state (DESIGN.md 5.5): those
    of the facts the delta adds, when it carries ``lifecycle_rules``; ``set()`` otherwise.

    The active facts holding these keys, with the facts :func:`delta_reads` names, are all
    the reducer reads of the state.
    """
    if not delta.get("lifecycle_rules"):
        return set()
    keys: set[str] = set()
    for op in delta.get("ops") or []:
        fact = op.get("fact") if isinstance(op, dict) else None
        if isinstance(fact, dict) and fact.get("command_key"):
            keys.add(str(fact["command_key"]))
    return keys


def fact_changes(
    before: Mapping[str, Fact], after: Mapping[str, Fact]
) -> tuple[list[tuple[str, Fact]], list[tuple[str, Fact]]]:
    """``(removed, added)`` between two versions of a set of facts, in id order.

    A changed fact is in both lists (old version removed, new one added); an unchanged one
    in neither. Feed both to :func:`acc_update`.
    """
    removed, added = [], []
    for fact_id in sorted(before.keys() | after.keys()):
        old, new = before.get(fact_id), after.get(fact_id)
        if old == new:
            continue
        if old is not None:
            removed.append((fact_id, old))
        if new is not None:
            added.append((fact_id, new))
    return removed, added


def checkpoint_due(
    *, folds_since: int, delta_bytes_since: int, state_bytes_at_last: int, every: int, ratio: float
) -> bool:
    """Whether the next fold stores the full state (a checkpoint, DESIGN.md 5.2).

    Due after ``every`` folds since the last checkpoint, or once the deltas stored since it
    reach ``ratio`` times the size of that checkpoint's state (so rebuilding any state reads
    at most about one state's worth of deltas, and checkpoints cost at most ``1 / ratio``
    of the deltas' size). Consolidations are always checkpoints (the caller's rule).
    """
    if folds_since >= every:
        return True
    return delta_bytes_since >= ratio * max(state_bytes_at_last, 1)


def _check_fact_shape(fact: Any) -> str:
    if not isinstance(fact, dict):
        return "fact must be an object"
    for name, allowed in (
        ("category", CATEGORIES),
        ("priority", PRIORITIES),
        ("confidence", CONFIDENCES),
    ):
        if fact.get(name) not in allowed:
            return f"field {name!r}: {fact.get(name)!r} is not one of {', '.join(allowed)}"
    if fact.get("lifecycle", "active") not in LIFECYCLES:
        return f"field 'lifecycle': {fact.get('lifecycle')!r} is not one of {', '.join(LIFECYCLES)}"
    if not isinstance(fact.get("text"), str) or not fact["text"]:
        return "field 'text': a fact needs non-empty text"
    support = fact.get("support")
    if not isinstance(support, list) or not support:
        return "field 'support': a fact needs at least one supporting entry"
    for s in support:
        if not isinstance(s, dict) or not isinstance(s.get("entry"), str):
            return "field 'support': each item needs an 'entry' hash"
    if fact.get("author", "writer") not in AUTHORS:
        return f"field 'author': {fact.get('author')!r} is not one of {', '.join(AUTHORS)}"
    return ""


def _unresolved_support(fact: Fact, evidence: Mapping[str, Mapping[str, Any]]) -> str:
    for s in fact["support"]:
        if s["entry"] not in evidence:
            return (
                f"support sha256:{s['entry']} does not resolve to a raw entry of this scope "
                "at or before the fold's revision"
            )
    return ""


def _check_support(fact: Fact, evidence: Mapping[str, Mapping[str, Any]]) -> str:
    for s in fact["support"]:
        info = evidence[s["entry"]]
        if info.get("derived"):
            return f"support sha256:{s['entry']} is a summary or compaction marker, never valid support"
    return ""


def _check_confidence(fact: Fact, evidence: Mapping[str, Mapping[str, Any]]) -> str:
    infos = [evidence[s["entry"]] for s in fact["support"]]
    if fact["confidence"] == "verified" and not fact.get("pin"):
        results = [i for i in infos if i.get("kind") == "tool_result"]
        if not results:
            return (
                "confidence 'verified' needs a tool result that demonstrates it; "
                "an assistant statement stays 'reported'"
            )
        # a search that found nothing exits non-zero: code states "no match", not a success
        no_match = fact.get("outcome") == "no_match" and fact.get("author") in ("code", "offline")
        if (
            fact["category"] != "blocker"
            and not no_match
            and all(i.get("is_error") for i in results)
        ):
            return "a failed tool result cannot support a success claim"
    return ""


def _authoritative_later(
    evidence_ids: Iterable[str], evidence: Mapping[str, Mapping[str, Any]], after_fold: int
) -> bool:
    for h in evidence_ids:
        info = evidence.get(h)
        if (
            info
            and info.get("kind") == "message"
            and info.get("role") in AUTHORITATIVE_ROLES
            and not info.get("derived")
            and not info.get("harness")  # harness records speak for no one (issue 15)
            and int(info.get("fold", 0)) > after_fold
        ):
            return True
    return False


def _completion(evidence_ids: Iterable[str], evidence: Mapping[str, Mapping[str, Any]]) -> bool:
    for h in evidence_ids:
        info = evidence.get(h)
        if info and info.get("kind") == "tool_result" and not info.get("is_error"):
            return True
    return False


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


class _KeyIndex:
    """Command key -> ids of the facts added with it (checked when read: a fact that has
    ended since is skipped), so a replay finds the active fact of a key without a scan."""

    def __init__(self, facts: Mapping[str, Fact]) -> None:
        self.facts = facts
        self.ids: dict[str, list[str]] = {}
        for fid, f in facts.items():
            if f.get("command_key") and f.get("lifecycle", "active") == "active":
                self.ids.setdefault(str(f["command_key"]), []).append(fid)

    def add(self, key: str, fact_id: str) -> None:
        self.ids.setdefault(key, []).append(fact_id)

    def active(self, key: str, but: str) -> list[str]:
        alive = [
            fid
            for fid in self.ids.get(key, ())
            if fid != but
            and (f := self.facts.get(fid)) is not None
            and f.get("command_key") == key
            and f.get("lifecycle", "active") == "active"
            and not f.get("pin")
        ]
        self.ids[key] = alive
        return alive


#: the index of the facts dict the last delta was applied to, and that dict's size after it
#: (a replay applies every delta to the same dict: the index is built once and kept up to
#: date; a dict changed in between by anything else is indexed again)
#: (one slot per thread: a threaded server or worker applies deltas to different states)
_index_local = threading.local()


def _slot() -> list[Any]:
    slot = getattr(_index_local, "slot", None)
    if slot is None:
        slot = _index_local.slot = [None, None, -1]
    return slot


def _index_of(facts: dict[str, Fact]) -> _KeyIndex:
    slot = _slot()
    if slot[0] is not facts or slot[2] != len(facts):
        slot[0], slot[1] = facts, _KeyIndex(facts)
    index: _KeyIndex = slot[1]
    return index


def _demote(fact: Fact) -> None:
    """A superseded or closed P1/P2 fact becomes P3 history (DESIGN.md 5.5)."""
    if fact.get("priority") in ("P1", "P2") and not fact.get("pin"):
        fact["was_priority"] = fact["priority"]
        fact["priority"] = "P3"


def _end_by_key(old: Fact, new: Fact, fold: int, evidence: Mapping[str, Mapping[str, Any]]) -> str:
    """End ``old`` because ``new`` holds its command key; returns the lifecycle it ends in."""
    if old.get("outcome") == "failure" and new.get("outcome") == "success":
        shown = [
            s["entry"]
            for s in new["support"]
            if evidence.get(s["entry"], {}).get("kind") == "tool_result"
        ]
        old["lifecycle"] = "closed"
        old["ended_by"] = {
            "fold": fold,
            "evidence": shown or [s["entry"] for s in new["support"]],
            "by": new["id"],
        }
    else:
        old["lifecycle"] = "superseded"
        old["superseded_by"] = new["id"]
    _demote(old)
    return str(old["lifecycle"])


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
    key_index = _index_of(facts) if keyed else None

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
            problem = _check_fact_shape(fact)
            if problem or not isinstance(fact, dict):  # the shape check passes dicts only
                raise invalid(problem, "fact")
            unresolved = _unresolved_support(fact, evidence)
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
            problem = _check_support(fact, evidence) or _check_confidence(fact, evidence)
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
                    _demote(target)
            facts[fact_id] = fact
            ended = ""
            command_key = fact.get("command_key")
            if key_index is not None and command_key and not fact.get("pin"):
                command_key = str(command_key)
                ends = [
                    f"{old} {_end_by_key(facts[old], fact, fold, evidence)} (same command key)"
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
                _demote(target)
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
                if not _authoritative_later(ev, evidence, int(target.get("origin_fold", 0))):
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
            elif not _completion(ev, evidence):
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
                    _demote(target)
                    if request:
                        done = _end_carried(facts, fact_id, list(ev), fold, op.get("seq"))
                        ended = f"ends {', '.join(done)} (carried it out)" if done else ""
                results.append(OpResult(index, kind, "accepted", ended, fact_id))
        elif kind == "cancel":
            if target["category"] != "open_obligation":
                reject("only an open obligation can be cancelled", fact_id)
            elif not _authoritative_later(ev, evidence, -1):
                reject(
                    "cancellation needs an authoritative (user, developer or system) entry", fact_id
                )
            else:
                target["lifecycle"] = "cancelled"
                target["ended_by"] = {"fold": fold, "evidence": list(ev)}
                results.append(OpResult(index, kind, "accepted", "", fact_id))

    if key_index is not None:
        _slot()[2] = len(facts)
    for pin in delta.get("required_pins", []):
        check_pin(facts, pin["entry"], pin["text"])
    new["folds"] = max(int(new.get("folds", 0)), fold)
    return results


def check_pin(facts: Mapping[str, Fact], entry: str, text: str) -> None:
    """Raise :class:`PinViolation` unless an active P0 pin cites ``entry`` with ``text`` exactly."""
    by_id = facts.get(f"pin:{entry[:16]}")
    candidates = [by_id] if by_id is not None and by_id.get("pin") else facts.values()
    found = False
    for f in candidates:
        if f.get("pin") and any(s["entry"] == entry for s in f["support"]):
            found = True
            if f["text"] != text:
                raise PinViolation(entry, "pin text differs from the journal entry")
            if f["priority"] != "P0":
                raise PinViolation(entry, "pin is not P0")
    if not found:
        raise PinViolation(entry, "required pin is missing")


def reduce(
    checkpoint: Mapping[str, Any] | None, deltas: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """Fold ``deltas`` in order onto ``checkpoint`` (``None`` = empty) and return the state.

    Deterministic: the same inputs give the same state and :func:`state_hash`. The
    checkpoint is copied once and the deltas applied in place, so time is linear in the
    number of ops (``bench/`` measures the exponent). Raises what :func:`apply_delta` raises.
    """
    with _gc_paused():
        state = copy.deepcopy(dict(checkpoint if checkpoint is not None else EMPTY_STATE))
        for delta in deltas:
            _apply(state, delta)
    return state


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a replay, re-enabling it after (if it
    was on). The reducer makes only acyclic dicts and lists, so a collection during a replay
    frees nothing, yet each generation-2 collection walks every live object (the growing
    state and the caller's deltas): over 10 ... 10,000 deltas that made ``reduce`` grow with
    exponent 1.17, against 1.01 paused (``bench/reducer_scaling.py``). Reference counting
    still frees everything as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
