"""A fold's delta applied to the facts it reads, its running figures, its storage, and
:class:`FoldResult`, what every service that stores a fold returns.

:func:`delta_apply` and the figures (:func:`active_tokens`, :func:`evictable_tokens`,
:func:`facts_count`, :func:`pins_count`, :func:`terms_indexed`) only read. The writes of
every fold, whichever service makes it, are here: :func:`fold_store` writes the
:class:`~ledger_app.models.Fold` row (delta, state hash, a checkpoint when due) and, through
:func:`facts_store`, its :class:`~ledger_app.models.LedgerFact` versions and
:class:`~ledger_app.models.LedgerTerm` counts. The caller holds the journal row lock and the
transaction.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from django.conf import settings
from django.db.models import Sum

from journal_app.models import Journal
from journal_app.services.unfolded import unfolded_after
from journal_app.tokens import count_tokens
from ledger_app import reducer
from ledger_app.budget import render_fact
from ledger_app.facts import Fact
from ledger_app.loss import ledger_terms
from ledger_app.models import Fold, FoldAttempt, LedgerFact, LedgerTerm
from ledger_app.services.records import fold_seal
from ledger_app.services.state import current_facts


@dataclass
class FoldResult:
    """``fold`` is the stored fold (new, or the existing one for the same range); ``created``.

    ``attempt`` is the :class:`~ledger_app.models.FoldAttempt` stored with a new fold;
    ``receipt`` the recovery receipt of the attempt that ran before it (``None`` when
    recovery did not run); ``recovered`` the ids of recovered facts proposed in the fold;
    ``consolidation`` the consolidation fold that followed, when the ledger had passed
    ``LEDGER_CONSOLIDATE_AT_TOKENS``.
    """

    fold: Fold | None
    created: bool
    reason: str = ""
    attempt: FoldAttempt | None = None
    receipt: Any = None
    recovered: list[str] = field(default_factory=list)
    consolidation: Fold | None = None


def term_id(key: str) -> int:
    """The stored form of a term-index key (:func:`ledger_app.loss.term_key`): the first 8
    bytes of its sha256 as a signed 64-bit integer (:class:`~ledger_app.models.LedgerTerm`
    ``term``; docs/design.md 5.2). A 64-bit key keeps the index's rows and btree entries a
    third of the 64-character hex they replaced; two keys of one journal sharing it is a
    chance of about n^2 / 2^65 (1e-9 at 100,000 terms), and would only count an identifier
    as kept."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big", signed=True)


_term = term_id


@dataclass
class Applied:
    """A delta applied to the facts it reads (:func:`delta_apply`), ready to store.

    ``before``/``after``: those facts before and after; ``removed``/``added``: what changed
    (:func:`ledger_app.reducer.fact_changes`); ``state_hash`` and ``acc`` after the delta.
    """

    delta: Mapping[str, Any]
    reduction: reducer.Reduction
    before: dict[str, Fact]
    after: dict[str, Fact]
    removed: list[tuple[str, Fact]]
    added: list[tuple[str, Fact]]
    acc: int
    rest: dict[str, Any]
    state_hash: str
    terms: Counter[str] = field(default_factory=Counter)

    @property
    def number(self) -> int:
        return int(self.delta["fold"])

    def active_added(self) -> list[Fact]:
        """The new versions of changed facts that are active (what this fold wrote)."""
        return [f for _, f in self.added if f.get("lifecycle", "active") == "active"]


def delta_apply(
    journal: Journal,
    previous: Fold | None,
    delta: Mapping[str, Any],
    *,
    extra_ids: Iterable[str] = (),
) -> Applied:
    """Apply ``delta`` to the facts it reads and compute the new state hash.

    Loads the current versions of the facts :func:`ledger_app.reducer.delta_reads` names
    (plus ``extra_ids``) and the active facts of the command keys
    :func:`ledger_app.reducer.delta_keys` names, applies the delta with
    :func:`ledger_app.reducer.apply_delta` (same rules, same verdicts as on the whole
    state) and updates the previous fold's accumulator with the changed facts only: the
    cost follows the delta, not the ledger.

    Raises:
        PinViolation / DeltaInvalid: as :func:`ledger_app.reducer.apply_delta`.
    """
    ids, pins = reducer.delta_reads(delta)
    before = current_facts(
        journal, ids | set(extra_ids), pins, command_keys=reducer.delta_keys(delta)
    )
    rest = {"folds": previous.number if previous else 0}
    reduction = reducer.apply_delta({**rest, "facts": before}, delta)
    after = reduction.state["facts"]
    removed, added = reducer.fact_changes(before, after)
    acc = reducer.acc_update(
        reducer.acc_parse(previous.state_acc) if previous else reducer.ACC_EMPTY, removed, added
    )
    new_rest = {k: v for k, v in reduction.state.items() if k != "facts"}
    terms: Counter[str] = Counter()
    for sign, changed in ((-1, removed), (1, added)):
        for _, fact in changed:
            if fact.get("lifecycle", "active") == "active":
                for key in ledger_terms(render_fact(fact)):
                    terms[key] += sign
    return Applied(
        delta=delta,
        reduction=reduction,
        before=before,
        after=after,
        removed=removed,
        added=added,
        acc=acc,
        rest=new_rest,
        state_hash=reducer.hash_of(acc, new_rest),
        terms=Counter({k: v for k, v in terms.items() if v}),
    )


def terms_indexed(journal: Journal, keys: Iterable[str], applied: Applied) -> set[str]:
    """Which identifier keys (:func:`ledger_app.loss.term_key`) an active fact holds once
    ``applied`` is stored: the :class:`LedgerTerm` counts plus the delta's changes."""
    keys = set(keys)
    by_term = {_term(k): k for k in keys}
    counts = Counter(
        {
            by_term[t]: n
            for t, n in LedgerTerm.objects.filter(
                journal=journal, term__in=list(by_term)
            ).values_list("term", "facts")
        }
    )
    for k in keys:
        counts[k] += applied.terms.get(k, 0)
    return {k for k, n in counts.items() if n > 0}


def _carried(previous: Fold | None, *path: str) -> int | None:
    """A figure the previous fold recorded with this storage (``manifest["storage"]`` set),
    so that the next fold adds its changes instead of counting the ledger again."""
    manifest = getattr(previous, "manifest", None) or {}
    if "storage" not in manifest:
        return None
    value: Any = manifest
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, int) else None


def active_tokens(
    journal: Journal, applied: Applied | None = None, previous: Fold | None = None
) -> int:
    """Tokens of the active facts' texts (each counted alone, summed): the ledger's size.

    The previous fold's figure (when it recorded one) or the current rows' stored counts
    (one aggregate query), plus ``applied``'s changes when it is not stored yet.
    """
    total = _carried(previous, "tokens", "ledger_active")
    if total is None:
        total = (
            LedgerFact.objects.filter(journal=journal, until__isnull=True, lifecycle="active")
            .aggregate(n=Sum("tokens"))
            .get("n")
            or 0
        )
    if applied is not None:
        total += _tokens_changed(applied, lambda f: f.get("lifecycle", "active") == "active")
    return total


#: priorities consolidation may evict (:func:`ledger_app.budget.plan_consolidation`)
EVICTABLE_PRIORITIES = ("P2", "P3")


def evictable_tokens(
    journal: Journal, applied: Applied | None = None, previous: Fold | None = None
) -> int:
    """Tokens of the texts of the facts consolidation may evict (P2/P3, any lifecycle),
    once ``applied`` is stored: the previous fold's figure (``manifest["storage"]
    ["evictable_tokens"]``, carried from fold to fold like ``ledger_active``) or one
    aggregate over the current rows, plus ``applied``'s changes. The fold's consolidation
    gate reads it, so that a ledger whose P0/P1 facts alone are past the start is not
    rebuilt after every fold for nothing to evict."""
    total = _carried(previous, "storage", "evictable_tokens")
    if total is None:
        total = (
            LedgerFact.objects.filter(
                journal=journal, until__isnull=True, priority__in=EVICTABLE_PRIORITIES
            )
            .aggregate(n=Sum("tokens"))
            .get("n")
            or 0
        )
    if applied is not None:
        total += _tokens_changed(applied, lambda f: f.get("priority") in EVICTABLE_PRIORITIES)
    return total


def _tokens_changed(applied: Applied, counts: Callable[[Fact], bool]) -> int:
    """Tokens ``applied`` adds minus those it removes, of the facts ``counts`` selects."""
    return sum(
        sign * _tokens(fact)
        for sign, changed in ((-1, applied.removed), (1, applied.added))
        for _, fact in changed
        if counts(fact)
    )


def facts_count(
    journal: Journal, applied: Applied | None = None, previous: Fold | None = None
) -> int:
    """Facts of the state (any lifecycle: the rows valid after the fold), once ``applied`` is
    stored: the previous fold's figure (``manifest["storage"]["facts"]``, carried from fold
    to fold like ``evictable_tokens``), or one ``COUNT`` of the current rows when the
    previous fold did not record it (0 before the first fold), plus the facts ``applied``
    creates minus those it removes (evictions). The facts page and the API read it as the
    total of the facts after a fold (:func:`ledger_app.selectors.facts_at`) instead of
    counting 100,000 rows per request."""
    n = _carried(previous, "storage", "facts")
    if n is None:
        n = (
            LedgerFact.objects.filter(journal=journal, until__isnull=True).count()
            if previous is not None
            else 0
        )
    if applied is not None:
        added = {fact_id for fact_id, _ in applied.added}
        removed = {fact_id for fact_id, _ in applied.removed}
        n += len(added - removed) - len(removed - added)
    return n


def _tokens(fact: Fact) -> int:
    return count_tokens(str(fact.get("text", "")), settings.TOKEN_ENCODING)


def _since_checkpoint(previous: Fold | None) -> dict[str, int] | None:
    """What the previous fold recorded of the checkpoint before it (``None``: start over)."""
    if previous is None:
        return None
    storage = (previous.manifest or {}).get("storage")
    if not isinstance(storage, dict) or "state_bytes" not in storage:
        return None  # a fold from before this record: take a checkpoint now
    return storage


def _checkpoint_due(since: dict[str, int] | None, delta_bytes: int) -> bool:
    if since is None:
        return True
    return reducer.checkpoint_due(
        folds_since=int(since["folds"]) + 1,
        delta_bytes_since=int(since["delta_bytes"]) + delta_bytes,
        state_bytes_at_last=int(since["state_bytes"]),
        every=settings.LEDGER_CHECKPOINT_EVERY_FOLDS,
        ratio=settings.LEDGER_CHECKPOINT_DELTA_RATIO,
    )


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be")


def _checkpoint_text(journal: Journal, applied: Applied) -> str:
    """The canonical JSON of the whole state after ``applied``, assembled from the rows'
    canonical facts (no parse): equal to ``reducer.state_bytes`` of that state."""
    data = dict(
        LedgerFact.objects.filter(journal=journal, until__isnull=True).values_list(
            "fact_id", "data"
        )
    )
    for fact_id, _ in applied.removed:
        data.pop(fact_id, None)
    for fact_id, fact in applied.added:
        data[fact_id] = rfc8785.dumps(fact).decode("utf-8")
    facts = ",".join(
        rfc8785.dumps(k).decode("utf-8") + ":" + data[k] for k in sorted(data, key=_utf16)
    )
    parts = {k: rfc8785.dumps(v).decode("utf-8") for k, v in applied.rest.items()}
    parts["facts"] = "{" + facts + "}"
    body = ",".join(
        rfc8785.dumps(k).decode("utf-8") + ":" + parts[k] for k in sorted(parts, key=_utf16)
    )
    return "{" + body + "}"


def fact_columns(fact: Fact) -> dict[str, Any]:
    """The :class:`LedgerFact` columns derived from a fact (its ``data`` is the fact's
    canonical JSON): what a fold stores beside ``data`` so that pages filter with SQL, and
    what ``verify_ledger`` re-derives from ``data`` to check them.

    Returns:
        ``{category, priority, lifecycle, confidence, pin, pin_entry, origin_fold,
        command_key, text, tokens}`` (``tokens``: of the fact's text, the configured
        encoding).
    """
    support = fact.get("support") or [{}]
    return {
        "category": str(fact.get("category", "")),
        "priority": str(fact.get("priority", "")),
        "lifecycle": str(fact.get("lifecycle", "active")),
        "confidence": str(fact.get("confidence", "")),
        "pin": bool(fact.get("pin")),
        "pin_entry": str(support[0].get("entry", ""))[:64] if fact.get("pin") else "",
        "origin_fold": fact.get("origin_fold"),
        "command_key": str(fact.get("command_key") or ""),
        "text": str(fact.get("text", "")),
        "tokens": _tokens(fact),
    }


def _row(journal: Journal, number: int, fact_id: str, fact: Fact, change: str) -> LedgerFact:
    return LedgerFact(
        journal=journal,
        fact_id=fact_id,
        since=number,
        change=change,
        data=rfc8785.dumps(fact).decode("utf-8"),
        **fact_columns(fact),
    )


def facts_store(journal: Journal, applied: Applied) -> None:
    """Write ``applied``'s changed facts as :class:`LedgerFact` versions and update the
    :class:`LedgerTerm` counts, deleting the terms whose count reaches 0 (the storage step
    of every fold, in its transaction)."""
    number = applied.number
    gone = [fact_id for fact_id, _ in applied.removed]
    if gone:
        LedgerFact.objects.filter(journal=journal, until__isnull=True, fact_id__in=gone).update(
            until=number
        )
    rows = []
    for fact_id, fact in applied.added:
        old = applied.before.get(fact_id)
        if old is None:
            change = "born"
        elif old.get("lifecycle") != fact.get("lifecycle"):
            change = str(fact.get("lifecycle", "changed"))
        else:
            change = "changed"
        rows.append(_row(journal, number, fact_id, fact, change))
    LedgerFact.objects.bulk_create(rows, batch_size=500)
    if applied.terms:
        # read the counts, then one upsert of the new ones (same queries whichever terms
        # exist already: a fold's query count does not depend on the ledger)
        counts = Counter({_term(k): n for k, n in applied.terms.items()})
        counts.update(
            dict(
                LedgerTerm.objects.filter(journal=journal, term__in=list(counts)).values_list(
                    "term", "facts"
                )
            )
        )
        LedgerTerm.objects.bulk_create(
            [LedgerTerm(journal=journal, term=t, facts=n) for t, n in sorted(counts.items())],
            batch_size=500,
            update_conflicts=True,
            unique_fields=["journal", "term"],
            update_fields=["facts"],
        )
        # a term no active fact holds any more is no row (it answers as 0 all the same):
        # half the rows of a 10,000-entry ledger's index were zeros. Always this one query,
        # whichever counts reached 0 (a fold's query count does not depend on the ledger)
        LedgerTerm.objects.filter(journal=journal, term__in=list(counts), facts__lte=0).delete()


def _consolidated_at(fields: Mapping[str, Any]) -> int:
    """The ledger's active tokens after the last consolidation at or before this fold (0:
    none yet), carried like the other storage figures, for the consolidation gate
    (:func:`ledger_app.services.fold.consolidation_due`)."""
    if fields.get("kind") == Fold.Kind.CONSOLIDATION:
        return int((fields.get("manifest") or {}).get("tokens", {}).get("ledger_active") or 0)
    return int(_carried(fields.get("previous"), "storage", "consolidated_at") or 0)


def fold_store(
    *, journal: Journal, applied: Applied, checkpoint: bool | None = None, **fields: Any
) -> Fold:
    """Store one fold: its delta (with the reducer's verdicts), the state hash and
    accumulator, the full state when it is a checkpoint, and its fact rows.

    Args:
        applied: from :func:`delta_apply`.
        checkpoint: ``True`` (consolidations), ``False``, or ``None``: by the policy
            (:func:`ledger_app.reducer.checkpoint_due` with ``LEDGER_CHECKPOINT_EVERY_FOLDS``
            and ``LEDGER_CHECKPOINT_DELTA_RATIO``; the first fold is always one).
        fields: the other :class:`Fold` columns (``number`` comes from the delta).

    Raises:
        IntegrityError: a fold with the same number or range exists (nothing stored when the
            caller wraps this in a savepoint).
    """
    delta_text = rfc8785.dumps(
        {**applied.delta, "verdicts": delta_verdicts(applied.reduction)}
    ).decode("utf-8")
    since = _since_checkpoint(fields.get("previous"))
    if checkpoint is None:
        checkpoint = _checkpoint_due(since, len(delta_text))
    state = _checkpoint_text(journal, applied) if checkpoint else None
    # the checkpoint policy's running figures, carried from fold to fold (O(1) per fold)
    last = since or {"state_bytes": 0, "folds": 0, "delta_bytes": 0}
    fields["manifest"] = {
        **(fields.get("manifest") or {}),
        "storage": {
            "checkpoint": checkpoint,
            "state_bytes": len(state) if state is not None else int(last["state_bytes"]),
            "folds": 0 if checkpoint else int(last["folds"]) + 1,
            "delta_bytes": 0 if checkpoint else int(last["delta_bytes"]) + len(delta_text),
            "evictable_tokens": evictable_tokens(journal, applied, fields.get("previous")),
            "facts": facts_count(journal, applied, fields.get("previous")),
            "consolidated_at": _consolidated_at(fields),
        },
    }
    fold = Fold.objects.create(
        journal=journal,
        number=applied.number,
        delta=delta_text,
        state=state,
        state_hash=applied.state_hash,
        state_acc=reducer.acc_hex(applied.acc),
        **fields,
    )
    facts_store(journal, applied)
    if fold.kind == Fold.Kind.FOLD:  # the unfolded part now starts after this fold
        unfolded_after(journal.pk, fold.seq_end or 0)
    fold_seal(fold)  # sealed again by a caller that adds the fold's attempts
    return fold


def pins_count(
    journal: Journal, applied: Applied | None = None, previous: Fold | None = None
) -> int:
    """Pins in the ledger (active ones), once ``applied`` is stored: the previous fold's
    figure when it recorded one, else one ``COUNT``."""
    n = _carried(previous, "instructions", "pins")
    if n is None:
        n = LedgerFact.objects.filter(
            journal=journal, until__isnull=True, pin=True, lifecycle="active"
        ).count()
    if applied is not None:
        n -= sum(1 for _, f in applied.removed if f.get("pin") and f.get("lifecycle") == "active")
        n += sum(1 for _, f in applied.added if f.get("pin") and f.get("lifecycle") == "active")
    return n


def delta_verdicts(reduction: reducer.Reduction) -> list[dict[str, Any]]:
    """The reducer's verdict on each op of a delta, as stored in the fold's delta
    (``{"index", "op", "status", "reason", "fact_id"}`` each, in op order)."""
    return [
        {"index": r.index, "op": r.op, "status": r.status, "reason": r.reason, "fact_id": r.fact_id}
        for r in reduction.results
    ]
