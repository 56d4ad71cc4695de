"""The ledger checked against the journal and the reviews (docs/design.md 5.2, 9).

:func:`ledger_verify` replays the deltas and compares them with the stored states; it
cannot see a fold whose stored record is changed *consistently* (a manifest, a
``range_hash``, a ``seq_end``, a pin forged in delta and state alike) or a journal that
lost its last entries. :func:`ledger_integrity` re-derives from the primary source what
each fold stores, reading only what a fold stores (number, kind, previous, seq bounds,
revision, range hash, manifest, delta), never a full ledger state:

* **figures**: each entry's token count, token source and source position (and its
  artifact's figures) against the entry's ``figures_hash``, which binds them to its hash:
  the ledger's token figures are read from them;
* **journal head**: the journal's head against its last entry (seq and hash), and every
  fold's revision at or below it: a truncated journal is reported;
* **fold chain**: numbers 1, 2, 3 ... each naming its predecessor; delta and manifest agree
  with the fold's number and revision;
* **ranges**: a range fold starts right after the previous range fold and ends at or
  before its revision; a refold covers the range of the fold it names;
* **manifest**: the covered seq bounds, entry count, entry hashes, range hash, previous
  fold, outcome and covered token figure, re-derived from the journal;
* **pins**: the delta's required pins are every authoritative message of the range,
  verbatim (under the pin rules the delta names: :func:`journal_app.content.pin_text`);
  every pin op cites one of them with its exact text; under pin rules 3 each pin has a
  ``pin_kind`` and its attachments' ranges and hashes match the pin and the entry (a
  receipt's ``read`` restores them);
* **support**: every hash a delta's ops cite, and every key of its evidence index,
  resolves to an entry of this journal at or before the fold's revision, and the evidence
  describes that entry as the journal does (seq, kind, role, is_error, derived, fold);
* **retirements and reviews**: each retirement request was made by a pending retire op of
  its fold; a decided one points at a review fold whose op, decision and reviewer match,
  an undecided one at none; each review fold answers exactly one request; each decision
  has its audit event (``review.approve`` / ``review.refuse``).

The figures are read with the entries (:mod:`.integrity_rows`), the fold checks are
:class:`~ledger_app.services.integrity_folds.FoldChecker`, the retirements and reviews are
checked here. Read-only. The stored full check the pages show (the replay and these checks,
run in the background) is :mod:`ledger_app.services.full_check`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from audit_app.models import AuditEvent
from journal_app.models import Journal
from ledger_app.models import Fold, RetirementRequest
from ledger_app.services.integrity_folds import FoldChecker
from ledger_app.services.integrity_rows import Problem

#: the checks :func:`ledger_integrity` runs, in the order they are reported
CHECKS = (
    "figures",
    "journal head",
    "fold chain",
    "ranges",
    "manifest",
    "pins",
    "support",
    "retirements",
    "reviews",
)

_FOLD_FIELDS = (
    "pk",
    "number",
    "kind",
    "previous_id",
    "seq_start",
    "seq_end",
    "revision",
    "range_hash",
    "outcome",
    "writer",
    "manifest",
    "delta",
)


def _reviews(checker: FoldChecker, folds: dict[int, tuple[Fold, dict[str, Any]]]) -> None:
    by_pk = {f.pk: (f, d) for f, d in folds.values()}
    requests = list(RetirementRequest.objects.filter(journal=checker.journal).order_by("pk"))
    answered: dict[int, int] = {}
    events = {
        (e.object_id, e.action): e.details
        for e in AuditEvent.objects.filter(
            object_type="retirement",
            object_id__in=[str(r.pk) for r in requests],
            action__in=("review.approve", "review.refuse"),
        )
    }
    for r in requests:
        _request(checker, r, by_pk, events, answered)
    for fold, _ in folds.values():
        if fold.kind != Fold.Kind.REVIEW:
            continue
        review = (fold.manifest or {}).get("review") or {}
        pk = review.get("request")
        if answered.get(fold.pk) != pk or pk is None:
            checker.add(
                "reviews",
                f"a review fold for retirement request {pk!r}, which does not name it as "
                "its decision",
                fold=fold.number,
                fact=review.get("fact_id"),
            )
        expected = hashlib.sha256(f"review:{pk}".encode()).hexdigest()
        if fold.range_hash != expected:
            checker.add(
                "reviews",
                "range_hash is not the review key of its request",
                fold=fold.number,
            )


def _request(
    checker: FoldChecker,
    r: RetirementRequest,
    by_pk: dict[int, tuple[Fold, dict[str, Any]]],
    events: dict[tuple[str, str], Any],
    answered: dict[int, int],
) -> None:
    origin = by_pk.get(r.requested_in_id)
    if origin is None:
        checker.add(
            "retirements", f"request {r.pk}: its fold is not in this journal", fact=r.fact_id
        )
        return
    fold, delta = origin
    ops = delta.get("ops", [])
    made = [
        v
        for v in delta.get("verdicts", [])
        if v.get("op") == "retire"
        and v.get("status") == "pending"
        and v.get("fact_id") == r.fact_id
    ]
    if not made:
        checker.add(
            "retirements",
            f"request {r.pk}: fold {fold.number} has no pending retire op for this fact",
            fold=fold.number,
            fact=r.fact_id,
        )
    else:
        index = made[0].get("index")
        op = ops[index] if isinstance(index, int) and 0 <= index < len(ops) else {}
        if list(op.get("evidence", [])) != list(r.evidence or []):
            checker.add(
                "retirements",
                f"request {r.pk}: its evidence differs from the retire op of fold {fold.number}",
                fold=fold.number,
                fact=r.fact_id,
            )
    status = r.status
    if status == RetirementRequest.Status.PENDING:
        if r.decided_in_id is not None or r.decided_at is not None or r.reviewer_id:
            checker.add(
                "retirements",
                f"request {r.pk} is pending but records a decision",
                fact=r.fact_id,
            )
        return
    decided = by_pk.get(r.decided_in_id) if r.decided_in_id else None
    if decided is None or decided[0].kind != Fold.Kind.REVIEW:
        checker.add(
            "retirements",
            f"request {r.pk} is {status} but no review fold of this journal decided it",
            fact=r.fact_id,
        )
        return
    review_fold, review_delta = decided
    answered[review_fold.pk] = r.pk
    decision = "approve" if status == RetirementRequest.Status.APPROVED else "refuse"
    review_ops = [op for op in review_delta.get("ops", []) if isinstance(op, dict)]
    op = review_ops[0] if len(review_ops) == 1 else {}
    verdicts = review_delta.get("verdicts", [])
    reviewer = r.reviewer.get_username() if r.reviewer_id else None
    if (
        op.get("op") != "review"
        or op.get("id") != r.fact_id
        or op.get("decision") != decision
        or (reviewer is not None and op.get("reviewer") != reviewer)
        or not verdicts
        or verdicts[0].get("status") != "accepted"
    ):
        checker.add(
            "retirements",
            f"request {r.pk} is {status}, but review fold {review_fold.number} records "
            f"{op.get('decision')!r} of {op.get('id')!r} by {op.get('reviewer')!r}",
            fold=review_fold.number,
            fact=r.fact_id,
        )
    if review_fold.number <= fold.number:
        checker.add(
            "retirements",
            f"request {r.pk} was decided in fold {review_fold.number}, before it was made",
            fold=review_fold.number,
            fact=r.fact_id,
        )
    details = events.get((str(r.pk), f"review.{decision}"))
    if not isinstance(details, dict) or details.get("fold") != review_fold.number:
        checker.add(
            "reviews",
            f"request {r.pk} is {status} with no audit event review.{decision} naming "
            f"fold {review_fold.number}",
            fold=review_fold.number,
            fact=r.fact_id,
        )


def ledger_integrity(*, journal: Journal) -> list[Problem]:
    """Check ``journal``'s ledger against the journal and the reviews (module docstring).

    Reads each fold's stored record (no ledger state), the journal's entry hashes and
    figures (bodies of authoritative messages only), the retirement requests and their
    audit events. Read-only.

    Args:
        journal: the scope whose folds are checked.

    Returns:
        Every :class:`Problem` found, in fold order then retirements; empty when the ledger
        agrees with the journal and the reviews.
    """
    journal = Journal.objects.get(pk=journal.pk)
    checker = FoldChecker(journal)
    folds: dict[int, tuple[Fold, dict[str, Any]]] = {}
    for fold in Fold.objects.filter(journal=journal).order_by("number").only(*_FOLD_FIELDS[1:]):
        try:
            delta = json.loads(fold.delta)
        except ValueError:
            delta = None
        if not isinstance(delta, dict):
            checker.add("fold chain", "the stored delta is not a JSON object", fold=fold.number)
            delta = {}
        folds[fold.number] = (fold, delta)
    ordered = [f for f, _ in folds.values()]
    checker.head(ordered)
    prev: Fold | None = None
    last_end = 0
    for expected, (fold, delta) in enumerate(folds.values(), start=1):
        checker.fold(fold, delta, prev, expected)
        if fold.kind in (Fold.Kind.FOLD, Fold.Kind.REFOLD):
            origin = None
            if fold.kind == Fold.Kind.REFOLD:
                pair = folds.get(delta.get("refold_of"))  # type: ignore[arg-type]
                origin = pair[0] if pair and pair[0].kind == Fold.Kind.FOLD else None
            checker.range(fold, delta, last_end, origin)
            if fold.kind == Fold.Kind.FOLD and fold.seq_end is not None:
                last_end = fold.seq_end
        prev = fold
    _reviews(checker, folds)
    return checker.problems
