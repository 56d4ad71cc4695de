"""The ledger state's canonical bytes and hash, and when a fold stores the whole state.

Pure module: no Django, no database. :func:`state_hash` is a function of the state alone,
built incrementally from a multiplicative set hash over the facts (the construction below);
:func:`checkpoint_due` says when the next fold stores a full state (docs/design.md 5.2).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import rfc8785

from ledger_app.facts import Fact


def state_bytes(state: Mapping[str, Any]) -> bytes:
    """RFC 8785 canonical JSON of a state (what a checkpoint stores)."""
    return rfc8785.dumps(dict(state))


# The state hash ------------------------------------------------------------------------------
#
# ``state_hash`` must not need the whole state serialised at every fold, so it is
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
    """Whether the next fold stores the full state (a checkpoint, docs/design.md 5.2).

    Due after ``every`` folds since the last checkpoint, or once the deltas stored since it
    reach ``ratio`` times the size of that checkpoint's state (so rebuilding any state reads
    at most about one state's worth of deltas, and checkpoints cost at most ``1 / ratio``
    of the deltas' size). Consolidations are always checkpoints (the caller's rule).
    """
    if folds_since >= every:
        return True
    return delta_bytes_since >= ratio * max(state_bytes_at_last, 1)
