"""Shared pieces of the ledger services: domain errors, fold results, entry views, pins.

No state change happens here; every one lives in one sibling module (STYLE.md point 2).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from django.conf import settings
from django.db.models import Q, QuerySet, Sum
from django.db.models.functions import Substr

from journal_app.content import AUTHORITATIVE_ROLES
from journal_app.errors import DomainError
from journal_app.identifiers import RULES_VERSION, Identifier, identifiers_load
from journal_app.models import Entry, EntryIdentifiers, Journal
from journal_app.services import entry_check, entry_identifiers_row
from journal_app.tokens import count_tokens
from ledger_app import reducer
from ledger_app.budget import render_fact
from ledger_app.facts import Fact
from ledger_app.loss import ledger_terms
from ledger_app.mechanical import EntryView
from ledger_app.model_writer.messages import STATE_FACT_LIMIT
from ledger_app.models import COMMAND_KEY_INDEXED, Fold, FoldAttempt, LedgerFact, LedgerTerm
from ledger_app.pins import attachment_problems, expected_text
from ledger_app.services.records import fold_seal


class LedgerError(DomainError):
    """Base of the ledger's domain errors (HTTP 422 unless a subclass says otherwise)."""

    status = 422
    code = "invalid_request"


class FoldRefused(LedgerError):
    """A required pin is missing or altered, or a pin no longer matches its entry; nothing stored.

    HTTP 409: the request is well formed but conflicts with the stored journal or ledger.
    """

    status = 409
    code = "fold_refused"


class FoldFailed(LedgerError):
    """The writer's model was unreachable (or refused): the fold is recorded failed, nothing else.

    HTTP 503 ``model_unavailable``: the failure is the model server's, not the request's, and
    the same request may succeed later (the failed attempt is stored and listed). ``attempt``
    is the stored ``failed`` :class:`~ledger_app.models.FoldAttempt`.
    """

    status = 503
    code = "model_unavailable"

    def __init__(self, message: str, *, attempt: FoldAttempt) -> None:
        super().__init__(message)
        self.attempt = attempt


class ReviewError(LedgerError):
    """A review that cannot be applied (not pending, bad decision); HTTP 409."""

    status = 409
    code = "review_conflict"


class ReviewForbidden(LedgerError):
    """The user is not a reviewer (or admin) of the journal's tenant; HTTP 403."""

    status = 403
    code = "forbidden"


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


def entry_view(entry: Entry) -> EntryView:
    """The pure view of a row that the writers and :mod:`ledger_app.mechanical` read."""
    return EntryView(
        seq=entry.seq,
        entry_hash=entry.entry_hash,
        kind=entry.kind,
        role=entry.role,
        text=entry.text,
        content=entry.content,
        tool_call_id=entry.tool_call_id,
        tool_name=entry.tool_name,
        derived=entry.derived,
        is_error=entry.is_error,
        meta=entry.meta_dict,
        chunk_bytes=_chunk_bytes(entry),
    )


def _chunk_bytes(entry: Entry) -> int:
    # the journal's chunk size when its row is loaded already (no query per entry)
    if Entry.journal.is_cached(entry):
        return entry.journal.chunk_bytes
    return settings.JOURNAL_CHUNK_BYTES


def range_hash(hashes: Sequence[str]) -> str:
    """Idempotency key of a fold: sha256 of the canonical list of covered entry hashes."""
    return hashlib.sha256(rfc8785.dumps(list(hashes))).hexdigest()


def latest_fold(journal: Journal, kind: str | None = None) -> Fold | None:
    """The journal's last fold (of ``kind`` if given), or ``None``; its ``state`` and
    ``delta`` are deferred (a checkpoint's state is the whole ledger: read it on purpose)."""
    qs = Fold.objects.filter(journal=journal).defer("state", "delta")
    if kind:
        qs = qs.filter(kind=kind)
    return qs.order_by("-number").first()


def ledger_state(journal: Journal, fold: Fold | None = None) -> dict[str, Any]:
    """The whole ledger state after ``fold`` (default: the latest); the empty state if none.

    The latest state is read from the current :class:`LedgerFact` rows (one query); an
    earlier one is rebuilt from its nearest checkpoint plus the later deltas
    (:meth:`ledger_app.models.FoldQuerySet.state_after`). A new dict each call. Reads the
    whole ledger: pages, the API and the folds read only the facts they need instead.
    """
    head = latest_fold(journal)
    if head is None:
        return reducer.reduce(None, [])
    if fold is not None and fold.number != head.number:
        return Fold.objects.state_after(fold)
    return {"facts": current_facts(journal), "folds": head.number}


def current_facts(
    journal: Journal,
    ids: Iterable[str] | None = None,
    pin_entries: Iterable[str] = (),
    *,
    where: Q | None = None,
    command_keys: Iterable[str] = (),
) -> dict[str, Fact]:
    """``{id: fact}`` of the journal's current facts (the state after the latest fold).

    Args:
        ids: only these facts (``None``: every fact, or those matching ``where``).
        pin_entries: also the pins citing these entry hashes.
        where: an extra filter on :class:`LedgerFact` columns.
        command_keys: also the active facts holding these command keys (with ``ids``).
    """
    if ids is None:
        qs = LedgerFact.objects.filter(journal=journal, until__isnull=True)
        if where is not None:
            qs = qs.filter(where)
        return {fact_id: json.loads(data) for fact_id, data in qs.values_list("fact_id", "data")}
    versions = LedgerFact.objects.filter(journal=journal)
    if where is not None:
        versions = versions.filter(where)
    pins = list(pin_entries)
    branches = [versions.filter(fact_id__in=list(ids))]
    if pins:
        branches.append(versions.filter(pin=True, pin_entry__in=pins))
    keys = sorted(set(command_keys))
    if keys:
        prefixes = sorted({k[:COMMAND_KEY_INDEXED] for k in keys})
        branches.append(
            versions.alias(key_prefix=Substr("command_key", 1, COMMAND_KEY_INDEXED)).filter(
                lifecycle="active", key_prefix__in=prefixes, command_key__in=keys
            )
        )
    return _current_of(branches)


def _current_of(branches: Sequence[QuerySet[LedgerFact]]) -> dict[str, Fact]:
    """``{id: fact}`` of the current versions among the rows ``branches`` select, in
    ``fact_id`` order: ONE statement, the branches joined by ``UNION`` (not ``OR``), the
    current version (``until`` null) kept here rather than in SQL.

    Why (issue 18, a fold's cost independent of the ledger's size): a branch is a lookup by
    key (fact ids on ``ledgerfact_unique_version``, pin entries on ``ledgerfact_pin_entry``,
    command keys on ``ledgerfact_command``) that reads the few versions of those keys. With
    ``until IS NULL`` in the SQL, or the lookups joined by ``OR``, PostgreSQL without
    planner statistics (a bulk load not yet analysed; autovacuum off) estimates the
    journal's current rows at a handful and reads all of them through ``ledgerfact_now``
    instead: 60-200 ms per lookup at 100,000 facts against 1 ms at 1,000.
    """
    parts = [b.order_by().values_list("fact_id", "data", "until") for b in branches]
    rows = parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]
    return {
        fact_id: json.loads(data)
        for fact_id, data, until in rows.order_by("fact_id")
        if until is None
    }


def writer_state(
    journal: Journal,
    head: Fold | None,
    *,
    models: bool = False,
    keys: tuple[Iterable[str], Iterable[str]] | None = None,
    id_prefixes: Sequence[str] = (),
    pin_ids: Callable[[dict[str, Fact]], set[str]] | None = None,
) -> dict[str, Any]:
    """The part of the state a writer reads before a fold, from the rows (issue 18).

    ``id_prefixes``: also every active fact whose id starts with one of them (the offline
    writer's open request parts and unused approvals: a few rows). ``pin_ids(pins)``: also
    the facts (any lifecycle) with the ids it gives for the loaded pins (a request's parts).

    Always the active pins (a writer matches cancellations against them). With ``keys``,
    ``(command keys, fact ids)`` from the writer's ``state_keys(entries)`` (the offline and
    mechanical writers declare what a fold over these entries can look up: the repeated
    commands it may supersede, the plan items and call obligations it may close), only the
    active facts with those command keys and the facts with those ids: a few indexed rows,
    whatever the ledger's size. Without (a writer that declares nothing), every active fact
    with a command key and every ``todo:`` fact, as before. A model writer (``models``) is
    also shown the first ``STATE_FACT_LIMIT`` active facts by priority and fold
    (:func:`ledger_app.model_writer.messages.state_json`). Never the whole ledger.

    Returns:
        ``{"facts": {id: fact}, "folds": n}``, a reducer state holding those facts.
    """
    rows = LedgerFact.objects.filter(journal=journal)
    pins = Q(pin=True, lifecycle="active", until__isnull=True)  # ledgerfact_now_pins
    if keys is None:
        where = Q(lifecycle="active", command_key__gt="") | Q(fact_id__startswith="todo:") | pins
        facts = _current_of([rows.filter(where, until__isnull=True)])
    else:
        command_keys, ids = (sorted(set(k)) for k in keys)
        branches = [rows.filter(pins)]
        if command_keys:
            # the indexed prefix finds the rows (ledgerfact_command), the key decides
            prefixes = sorted({k[:COMMAND_KEY_INDEXED] for k in command_keys})
            branches.append(
                rows.alias(key_prefix=Substr("command_key", 1, COMMAND_KEY_INDEXED)).filter(
                    lifecycle="active", key_prefix__in=prefixes, command_key__in=command_keys
                )
            )
        if ids:
            branches.append(rows.filter(fact_id__in=ids))
        for prefix in id_prefixes:
            branches.append(rows.filter(lifecycle="active", fact_id__startswith=prefix))
        facts = _current_of(branches)  # one statement of indexed lookups
        more = pin_ids({k: f for k, f in facts.items() if f.get("pin")}) if pin_ids else set()
        more -= facts.keys()
        if more:
            facts.update(_current_of([rows.filter(fact_id__in=sorted(more))]))
    if models:
        shown = (
            LedgerFact.objects.filter(journal=journal, until__isnull=True, lifecycle="active")
            .order_by("priority", "origin_fold", "pk")
            .values_list("fact_id", "data")[:STATE_FACT_LIMIT]
        )
        facts.update({k: json.loads(d) for k, d in shown})
    return {"facts": facts, "folds": head.number if head else 0}


def facts_known(journal: Journal, ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` are facts of the current state (any lifecycle)."""
    # the versions of those ids (ledgerfact_unique_version), the current ones kept here:
    # see _current_of for why ``until IS NULL`` is not in the SQL
    return {
        fact_id
        for fact_id, until in LedgerFact.objects.filter(
            journal=journal, fact_id__in=list(ids)
        ).values_list("fact_id", "until")
        if until is None
    }


def entry_identifiers(entries: Sequence[Entry]) -> dict[str, list[Identifier]]:
    """The stored identifiers of ``entries`` by entry hash (:class:`EntryIdentifiers`).

    Entries appended before identifiers were stored at append get their row now, once (the
    identifiers derive from immutable bytes, so a stored row stays right).
    """
    rows = {
        r.entry_id: r
        for r in EntryIdentifiers.objects.filter(
            entry__in=[e.pk for e in entries], rules=RULES_VERSION
        )
    }
    missing = [entry_identifiers_row(e) for e in entries if e.pk not in rows]
    if missing:
        EntryIdentifiers.objects.bulk_create(missing, ignore_conflicts=True)
        rows.update({r.entry_id: r for r in missing})
    return {e.entry_hash: identifiers_load(rows[e.pk].values) for e in entries}


# Storage: deltas, checkpoints, fact rows (issue 18) ---------------------------------------

#: a checkpoint every this many folds at most (``LEDGER_CHECKPOINT_EVERY_FOLDS``)
CHECKPOINT_EVERY_FOLDS = 1000
#: ... or once the deltas since the last one are this many times its size
CHECKPOINT_DELTA_RATIO = 2.0


def _term(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass
class Applied:
    """A delta applied to the facts it reads (:func:`delta_apply`), ready to store.

    ``before``/``after``: those facts before and after; ``removed``/``added``: what changed
    (:func:`ledger_app.reducer.fact_changes`); ``state_hash`` and ``acc`` after the delta.
    """

    delta: dict[str, Any]
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
    journal: Journal, previous: Fold | None, delta: dict[str, Any], *, extra_ids: Iterable[str] = ()
) -> Applied:
    """Apply ``delta`` to the facts it reads and compute the new state hash (issue 18).

    Loads the current versions of the facts :func:`ledger_app.reducer.delta_reads` names
    (plus ``extra_ids``) and the active facts of the command keys
    :func:`ledger_app.reducer.delta_keys` names, applies the delta with :func:`ledger_app.reducer.apply_delta`
    (same rules, same verdicts as on the whole state) and updates the previous fold's
    accumulator with the changed facts only: the cost follows the delta, not the ledger.

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
        for sign, changed in ((-1, applied.removed), (1, applied.added)):
            for _, fact in changed:
                if fact.get("lifecycle", "active") == "active":
                    total += sign * _tokens(fact)
    return total


#: priorities consolidation may evict (DESIGN.md 5.4; :func:`ledger_app.budget.plan_consolidation`)
EVICTABLE_PRIORITIES = ("P2", "P3")


def evictable_tokens(
    journal: Journal, applied: Applied | None = None, previous: Fold | None = None
) -> int:
    """Tokens of the texts of the facts consolidation may evict (P2/P3, any lifecycle),
    once ``applied`` is stored: the previous fold's figure (``manifest["storage"]
    ["evictable_tokens"]``, carried from fold to fold like ``ledger_active``) or one
    aggregate over the current rows, plus ``applied``'s changes. The fold's consolidation
    gate reads it, so that a ledger whose P0/P1 facts alone are past the start is not
    rebuilt after every fold for nothing to evict (issue 18)."""
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
        for sign, changed in ((-1, applied.removed), (1, applied.added)):
            for _, fact in changed:
                if fact.get("priority") in EVICTABLE_PRIORITIES:
                    total += sign * _tokens(fact)
    return total


def facts_count(
    journal: Journal, applied: Applied | None = None, previous: Fold | None = None
) -> int:
    """Facts of the state (any lifecycle: the rows valid after the fold), once ``applied`` is
    stored: the previous fold's figure (``manifest["storage"]["facts"]``, carried from fold
    to fold like ``evictable_tokens``), or one ``COUNT`` of the current rows when the
    previous fold did not record it (0 before the first fold), plus the facts ``applied``
    creates minus those it removes (evictions). The facts page and the API read it as the
    total of the facts after a fold (:func:`ledger_app.selectors.facts_at`) instead of
    counting 100,000 rows per request (issue 18)."""
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
        every=int(getattr(settings, "LEDGER_CHECKPOINT_EVERY_FOLDS", CHECKPOINT_EVERY_FOLDS)),
        ratio=float(getattr(settings, "LEDGER_CHECKPOINT_DELTA_RATIO", CHECKPOINT_DELTA_RATIO)),
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
    what ``verify_ledger`` re-derives from ``data`` to check them (issue 16, item 5).

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
        # exist already: a fold's query count does not depend on the ledger, issue 18)
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
    accumulator, the full state when it is a checkpoint, and its fact rows (issue 18).

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
    delta_text = rfc8785.dumps({**applied.delta, "verdicts": _verdicts(applied.reduction)}).decode(
        "utf-8"
    )
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
    fold_seal(fold)  # sealed again by a caller that adds the fold's attempts
    return fold


def _info(e: Entry, fold_number: int) -> dict[str, Any]:
    info = {
        "seq": e.seq,
        "kind": e.kind,
        "role": e.role,
        "is_error": e.is_error,
        "derived": e.derived,
        "fold": fold_number,
    }
    if e.kind == "message" and e.role in AUTHORITATIVE_ROLES and not e.derived:
        if not e.authoritative:  # a harness record (issue 15): never authorises a retirement
            info["harness"] = True
    return info


def _cited(ops: Sequence[dict[str, Any]]) -> set[str]:
    cited: set[str] = set()
    for op in ops:
        fact = op.get("fact")
        if isinstance(fact, dict) and isinstance(fact.get("support"), list):
            cited |= {
                s["entry"]
                for s in fact["support"]
                if isinstance(s, dict) and isinstance(s.get("entry"), str)
            }
        if isinstance(op.get("evidence"), list):
            cited |= {h for h in op["evidence"] if isinstance(h, str)}
    return cited


def _evidence(
    journal: Journal,
    covered: Sequence[Entry],
    ops: Sequence[dict[str, Any]],
    number: int,
    revision: int,
) -> dict[str, dict[str, Any]]:
    """Evidence index of a delta: covered entries plus earlier raw entries the ops cite."""
    evidence = {e.entry_hash: _info(e, number) for e in covered}
    missing = _cited(ops) - evidence.keys()
    if missing:
        rows = list(
            Entry.objects.filter(journal=journal, entry_hash__in=missing, seq__lte=revision)
        )
        ranges: list[tuple[int, int, int]] = []
        if rows:
            ranges = list(
                Fold.objects.filter(
                    journal=journal,
                    kind=Fold.Kind.FOLD,
                    seq_start__lte=max(e.seq for e in rows),
                    seq_end__gte=min(e.seq for e in rows),
                ).values_list("number", "seq_start", "seq_end")
            )
        for e in rows:
            owner = next((n for n, a, b in ranges if a <= e.seq <= b), number)
            evidence[e.entry_hash] = _info(e, owner)
    return evidence


def _provider_usage(entries: Sequence[Entry]) -> dict[str, Any]:
    totals = {"input_tokens": 0, "output_tokens": 0, "entries_with_usage": 0}
    for e in entries:
        usage = e.meta_dict.get("usage")
        if isinstance(usage, dict):
            totals["entries_with_usage"] += 1
            for key in ("input_tokens", "output_tokens"):
                value = usage.get(
                    key,
                    usage.get(
                        {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}[key]
                    ),
                )
                if isinstance(value, int):
                    totals[key] += value
    return totals


def instructions_check(
    journal: Journal, state: Mapping[str, Any], *, pins_total: int | None = None
) -> dict[str, Any]:
    """Re-hash pins against their journal entries (issue 3, "instruction integrity").

    For each pin in ``state["facts"]`` the cited entry is read, its hashes recomputed, and
    its text compared with the pin's byte for byte (under the pin's rules:
    :func:`ledger_app.pins.expected_text`), and its attachments with the pin and the entry. A fold passes :func:`pins_to_check`
    (its own pins and a rotating window of earlier ones: bounded work per fold);
    ``pins_total`` is then the number of pins in the whole ledger.

    Returns:
        ``{"pins": pins_total (or the pins checked), "checked": n, "intact": True,
        "pins_hash": sha256 over the checked (entry hash, text hash) pairs}``.

    Raises:
        FoldRefused: an entry's hashes no longer match, or a pin's text differs from it.
    """
    pins = sorted(
        (f for f in state.get("facts", {}).values() if f.get("pin")),
        key=lambda f: f["support"][0]["entry"],
    )
    wanted = [f["support"][0]["entry"] for f in pins]
    rows = (
        {
            e.entry_hash: e
            for e in Entry.objects.filter(journal=journal, entry_hash__in=wanted)
            .select_related("journal__session__tenant")
            .prefetch_related("chunks")
        }
        if wanted
        else {}
    )
    pairs = []
    for fact in pins:
        h = fact["support"][0]["entry"]
        entry = rows.get(h)
        if entry is None:
            raise FoldRefused(f"pin {fact['id']}: entry sha256:{h} is not in this journal")
        problems = entry_check(entry)
        if problems:
            raise FoldRefused(
                f"pin {fact['id']}: entry sha256:{h} fails its hash check: {problems[0]}"
            )
        if expected_text(fact, entry.text) != fact["text"]:
            raise FoldRefused(f"pin {fact['id']}: text differs from entry sha256:{h}")
        attachment = attachment_problems(fact, entry.text)
        if attachment:
            raise FoldRefused(f"pin {fact['id']}: {attachment[0]} (entry sha256:{h})")
        pairs.append([h, hashlib.sha256(fact["text"].encode("utf-8")).hexdigest()])
    return {
        "pins": len(pins) if pins_total is None else pins_total,
        "checked": len(pins),
        "intact": True,
        "pins_hash": hashlib.sha256(rfc8785.dumps(pairs)).hexdigest(),
    }


#: earlier pins a fold re-hashes besides its own (a rotating window, so every pin is
#: re-checked every ``pins / PINS_RECHECKED`` folds; ``verify_ledger`` checks them all)
PINS_RECHECKED = 4


def pins_to_check(journal: Journal, applied: Applied) -> dict[str, Fact]:
    """The pins a fold re-hashes against their entries (:func:`instructions_check`): the
    active pins it wrote or changed, plus a rotating window of :data:`PINS_RECHECKED`
    earlier active pins chosen by the fold's number. Bounded, whatever the ledger's size."""
    pins = {k: f for k, f in applied.added if f.get("pin") and f.get("lifecycle") == "active"}
    earlier = LedgerFact.objects.filter(
        journal=journal, until__isnull=True, pin=True, lifecycle="active"
    )
    # two queries whatever the window (the pins' keys, then the window's facts): the
    # fold's query count does not depend on the ledger (issue 18)
    keys = list(earlier.order_by("pk").values_list("pk", flat=True))
    if keys:
        start = (applied.number * PINS_RECHECKED) % len(keys)
        window = [keys[(start + i) % len(keys)] for i in range(min(PINS_RECHECKED, len(keys)))]
        for fact_id, data in earlier.filter(pk__in=window).values_list("fact_id", "data"):
            if fact_id not in applied.after:
                pins[fact_id] = json.loads(data)
    return pins


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


def _verdicts(reduction: reducer.Reduction) -> list[dict[str, Any]]:
    return [
        {"index": r.index, "op": r.op, "status": r.status, "reason": r.reason, "fact_id": r.fact_id}
        for r in reduction.results
    ]
