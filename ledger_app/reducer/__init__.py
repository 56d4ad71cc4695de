"""The deterministic reducer: ``state = reduce(checkpoint, deltas)`` (docs/design.md section 5.2).

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
* lifecycles that end (docs/design.md 5.5), for a delta with ``"lifecycle_rules": 1`` (every
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

Modules, one reason to change each (this package's names are their public face):

* :mod:`.records`: the ops, :data:`EMPTY_STATE`, :class:`DeltaInvalid`,
  :class:`PinViolation`, :class:`OpResult`, :class:`Reduction`;
* :mod:`.state_hash`: :func:`state_bytes`, :func:`state_hash` and its incremental
  accumulator, :func:`fact_changes`, :func:`checkpoint_due`;
* :mod:`.reads`: what a delta may read of the state (:func:`delta_reads`,
  :func:`delta_keys`);
* :mod:`.rules`: the checks each op is judged by, and the lifecycles that end;
* :mod:`.key_index`: the command-key index a replay keeps;
* :mod:`.apply`: :func:`apply_delta`, :func:`apply_in_place`, :func:`reduce`.
"""

from __future__ import annotations

from ledger_app.reducer.apply import apply_delta, apply_in_place, reduce
from ledger_app.reducer.reads import delta_keys, delta_reads
from ledger_app.reducer.records import (
    EMPTY_STATE,
    LIFECYCLE_RULES,
    OPS,
    DeltaInvalid,
    OpResult,
    PinViolation,
    Reduction,
)
from ledger_app.reducer.rules import check_pin
from ledger_app.reducer.state_hash import (
    ACC_EMPTY,
    MUHASH_PRIME,
    acc_hex,
    acc_of,
    acc_parse,
    acc_update,
    checkpoint_due,
    element_of_canonical,
    fact_changes,
    fact_element,
    hash_of,
    state_bytes,
    state_hash,
)

__all__ = [
    "ACC_EMPTY",
    "EMPTY_STATE",
    "LIFECYCLE_RULES",
    "MUHASH_PRIME",
    "OPS",
    "DeltaInvalid",
    "OpResult",
    "PinViolation",
    "Reduction",
    "acc_hex",
    "acc_of",
    "acc_parse",
    "acc_update",
    "apply_delta",
    "apply_in_place",
    "check_pin",
    "checkpoint_due",
    "delta_keys",
    "delta_reads",
    "element_of_canonical",
    "fact_changes",
    "fact_element",
    "hash_of",
    "reduce",
    "state_bytes",
    "state_hash",
]
