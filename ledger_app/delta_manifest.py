"""The two records every fold stores, typed: its :class:`Delta` and its :class:`Manifest`.

Pure module (no Django). Each record is built by one function here, whatever kind of fold
stores it (``fold``, ``refold``, ``consolidation``, ``review``: docs/architecture.md, "The
path of a fold"), so every fold of one kind has one shape:

* :func:`delta_make`: the ops the reducer judges (:mod:`ledger_app.reducer`), with the fold
  number, the journal revision they were written against, the evidence (cited entry hashes)
  and the version of the lifecycle rules they are judged by (``lifecycle_rules``, every new
  delta: docs/design.md section 5.5). The fold stores it as canonical JSON text.
* :func:`manifest_make`: what the fold says about itself: the outcome, the previous fold, the
  revision, writer and verifier, the check of the instructions (pins), token figures, and for
  a fold over a range of entries (``fold``, ``refold``) the covered range, its range hash,
  the calls left interrupted and the loss report. ``fold_store`` adds ``storage``.

Stored records are JSON: a reader of a stored delta or manifest gets a plain ``dict`` and
reads it with ``.get`` (older folds lack newer keys); these types describe what is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ledger_app.reducer import LIFECYCLE_RULES


class Delta(TypedDict, total=False):
    """A fold's delta. ``fold``, ``revision``, ``evidence``, ``ops`` and ``lifecycle_rules``
    are always there; the rest depend on the fold's kind.

    Keys: ``fold`` (its number), ``revision`` (the journal's head seq when written),
    ``evidence`` (``{fact id: [entry hash, ...]}``), ``ops`` (reducer ops, in order),
    ``lifecycle_rules`` (:data:`ledger_app.reducer.LIFECYCLE_RULES`), and for a ``fold``
    ``required_pins`` (entry hashes that must be pinned) and ``pin_rules`` (the pin rules'
    version); for a ``refold`` ``refold_of`` (the fold it redoes).
    """

    fold: int
    revision: int
    evidence: dict[str, Any]
    ops: list[dict[str, Any]]
    lifecycle_rules: int
    required_pins: list[str]
    pin_rules: Any
    refold_of: int


def delta_make(
    *,
    fold: int,
    revision: int,
    ops: Sequence[dict[str, Any]],
    evidence: Mapping[str, Any] | None = None,
    **extra: Any,
) -> Delta:
    """The delta of fold number ``fold`` written against journal revision ``revision``.

    Args:
        fold: the fold's number (1 for the first).
        revision: the journal's head seq the ops were written against.
        ops: reducer ops (``{"op": "add", "fact": {...}}``, ``{"op": "close", ...}``, ...).
        evidence: ``{fact id: [entry hash, ...]}``; ``{}`` when none.
        **extra: the kind's own keys (:class:`Delta`: ``required_pins``, ``pin_rules``,
            ``refold_of``).

    Returns:
        :class:`Delta` with ``lifecycle_rules`` set to the rules in force.

    Raises:
        TypeError: a key of ``extra`` that :class:`Delta` does not name.
    """
    unknown = set(extra) - set(Delta.__annotations__)
    if unknown:
        raise TypeError(f"delta_make: unknown delta key(s) {', '.join(sorted(unknown))}")
    delta: dict[str, Any] = {
        "fold": fold,
        "revision": revision,
        "evidence": dict(evidence or {}),
        **extra,
        "lifecycle_rules": LIFECYCLE_RULES,
        "ops": list(ops),
    }
    return delta  # type: ignore[return-value]  # the keys are checked above


class Covered(TypedDict):
    """The entries a fold covers: seq range (inclusive), how many, and their hashes."""

    seq_start: int
    seq_end: int
    entries: int
    entry_hashes: list[str]


class Manifest(TypedDict, total=False):
    """A fold's manifest. Always: ``outcome``, ``previous_fold``, ``revision``, ``writer``,
    ``verifier``, ``instructions``, ``tokens``. A fold over a range (``fold``, ``refold``)
    adds ``covered``, ``range_hash``, ``interrupted_calls`` and ``loss``; the other keys
    are the kind's own or say something only when there is something to say."""

    outcome: str
    previous_fold: int | None
    revision: int
    writer: Any
    verifier: Any
    instructions: dict[str, Any]
    tokens: dict[str, Any]
    covered: Covered
    range_hash: str
    interrupted_calls: list[str]
    loss: dict[str, Any]
    model_calls: list[dict[str, Any]]
    review: dict[str, Any]
    note: str
    conservative: dict[str, Any]
    recovery: dict[str, Any]
    refold_of: int
    withdrawn: list[str]
    consolidation: dict[str, Any]
    storage: dict[str, Any]


def covered_make(seq_start: int, seq_end: int, entry_hashes: Sequence[str]) -> Covered:
    """The ``covered`` section: seqs ``seq_start``..``seq_end`` and their entry hashes."""
    return {
        "seq_start": seq_start,
        "seq_end": seq_end,
        "entries": len(entry_hashes),
        "entry_hashes": list(entry_hashes),
    }


def manifest_make(
    *,
    outcome: str,
    previous_fold: int | None,
    revision: int,
    writer: Any,
    verifier: Any,
    instructions: Mapping[str, Any],
    tokens: Mapping[str, Any],
    covered: Covered | None = None,
    range_hash: str = "",
    interrupted_calls: Sequence[str] = (),
    loss: Mapping[str, Any] | None = None,
    **extra: Any,
) -> Manifest:
    """A fold's manifest.

    Args:
        outcome: the fold's outcome (``accepted``, ``fallback``, ``target_unreachable``, ...).
        previous_fold: the number of the fold before it (``None`` for the first).
        revision: the journal's head seq when the fold was made.
        writer, verifier: who wrote and who judged (a label, or the writer's description).
        instructions: the check of the pins (:func:`ledger_app.services.pins_check.instructions_check`).
        tokens: token figures (``ledger_active`` always; ``covered``, ``source``,
            ``provider``, ``model`` when known), tokens.
        covered: for a fold over a range (:func:`covered_make`); then ``range_hash``,
            ``interrupted_calls`` and ``loss`` are written too.
        **extra: the kind's own keys (:class:`Manifest`).

    Returns:
        :class:`Manifest`.

    Raises:
        TypeError: a key of ``extra`` that :class:`Manifest` does not name, or a range
            fold (``covered``) without its ``loss`` report.
    """
    unknown = set(extra) - set(Manifest.__annotations__)
    if unknown:
        raise TypeError(f"manifest_make: unknown manifest key(s) {', '.join(sorted(unknown))}")
    manifest: dict[str, Any] = {}
    if covered is not None:
        if loss is None:
            raise TypeError("manifest_make: a fold over a range needs its loss report")
        manifest.update(covered=covered, range_hash=range_hash)
    manifest.update(
        previous_fold=previous_fold,
        revision=revision,
        writer=writer,
        verifier=verifier,
        tokens=dict(tokens),
    )
    if covered is not None:
        manifest["interrupted_calls"] = list(interrupted_calls)
    manifest.update(outcome=outcome, instructions=dict(instructions))
    if covered is not None:
        manifest["loss"] = dict(loss or {})
    manifest.update(extra)
    return manifest  # type: ignore[return-value]  # the keys are checked above
