"""``verify_ledger``: replay the deltas and compare with what is stored (docs/design.md 5.2).

A fold stores its delta, the state hash after it and the accumulator that
hash is built from; the full state only at checkpoints; the facts as :class:`LedgerFact`
version rows. :func:`ledger_verify` replays twice, once from scratch and once from every
stored checkpoint, and compares every fold's stored hash, accumulator and verdicts, every
checkpoint byte for byte, and the fact rows with the facts each fold changed.
"""

from __future__ import annotations

import copy
import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from audit_app.chained_log import log_verify
from journal_app.models import Journal
from ledger_app import reducer
from ledger_app.budget import render_fact
from ledger_app.loss import ledger_terms
from ledger_app.model_writer import FALLBACK_NOTE as FALLBACK_NOTE  # re-exported: views
from ledger_app.models import Fold, LedgerFact, LedgerTerm
from ledger_app.services.records import fold_records_verify
from ledger_app.services.store import delta_verdicts, fact_columns, term_id

CHECKS = [
    "replay from scratch",
    "checkpoint plus delta",
    "state_hash",
    "checkpoint",
    "verdicts",
    "fact rows",
    "fact columns",
    "terms",
    "record_hash",
]


def fold_deltas(journal: Journal) -> list[dict[str, Any]]:
    """Every stored delta of ``journal`` in fold order, verdicts removed (the reducer recomputes them)."""
    out = []
    for raw in (
        Fold.objects.filter(journal=journal).order_by("number").values_list("delta", flat=True)
    ):
        d = json.loads(raw)
        d.pop("verdicts", None)
        out.append(d)
    return out


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Id of the first fact (in id order) that differs between two states, ``"(folds)"`` for the counter."""
    fa, fb = a.get("facts", {}), b.get("facts", {})
    for fact_id in sorted(fa.keys() | fb.keys()):
        if fa.get(fact_id) != fb.get(fact_id):
            return fact_id
    return None if a == b else "(state fields)"


@dataclass
class LedgerVerifyReport:
    """Result of :func:`ledger_verify`. ``mismatch`` names the fold and first differing fact."""

    folds: int = 0
    mismatch: dict[str, Any] | None = None
    checks: list[str] = field(default_factory=list)
    checkpoints: int = 0

    @property
    def ok(self) -> bool:
        return self.mismatch is None


class _Tracked(dict):  # type: ignore[type-arg]
    """The facts of a replayed state, remembering the old version of every fact the reducer
    touches, so that the changes of one delta are known without comparing whole states."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.old: dict[str, Any] = {}

    def _seen(self, key: Any) -> None:
        if key not in self.old:
            value = dict.get(self, key)
            self.old[key] = copy.deepcopy(value) if value is not None else None

    def get(self, key: Any, default: Any = None) -> Any:
        self._seen(key)
        return dict.get(self, key, default)

    def __getitem__(self, key: Any) -> Any:
        self._seen(key)
        return dict.__getitem__(self, key)

    def __contains__(self, key: Any) -> bool:
        self._seen(key)
        return dict.__contains__(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._seen(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        self._seen(key)
        dict.__delitem__(self, key)

    def values(self) -> Any:  # a scan reads every fact
        for key in dict.keys(self):
            self._seen(key)
        return dict.values(self)

    def items(self) -> Any:
        for key in dict.keys(self):
            self._seen(key)
        return dict.items(self)

    def changes(self) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        """``(removed, added)`` since the last call (see :func:`reducer.fact_changes`)."""
        before = {k: v for k, v in self.old.items() if v is not None}
        after = {k: dict.get(self, k) for k in self.old if dict.__contains__(self, k)}
        self.old = {}
        return reducer.fact_changes(before, after)


def _folds(journal: Journal, start: int = 0) -> Iterator[tuple[int, str, str, str, str | None]]:
    qs = (
        Fold.objects.filter(journal=journal, number__gt=start)
        .order_by("number")
        .values_list("number", "delta", "state_hash", "state_acc", "state")
    )
    yield from qs.iterator(chunk_size=200)


def _rows(journal: Journal) -> tuple[dict[int, dict[str, str]], dict[int, set[str]]]:
    """Fact rows by the fold they start at (``data`` with the row's ``change`` appended
    after a NUL, so the change a fold recorded is compared too) and the folds they end at."""
    born: dict[int, dict[str, str]] = defaultdict(dict)
    ended: dict[int, set[str]] = defaultdict(set)
    for fact_id, since, until, data, change in LedgerFact.objects.filter(
        journal=journal
    ).values_list("fact_id", "since", "until", "data", "change"):
        born[since][fact_id] = f"{data}\x00{change}"
        if until is not None:
            ended[until].add(fact_id)
    return born, ended


def _change(old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    """The ``change`` a fact row records (as ``ledger_app.services.store.facts_store``)."""
    if old is None:
        return "born"
    if old.get("lifecycle") != new.get("lifecycle"):
        return str(new.get("lifecycle", "changed"))
    return "changed"


def _mismatch(number: int, check: str, detail: str, fact: str | None = None) -> dict[str, Any]:
    return {"fold": number, "fact": fact, "check": check, "detail": detail}


def _replay(
    journal: Journal,
    state: dict[str, Any],
    acc: int,
    start: int,
    stop: int | None,
    name: str,
    rows: tuple[dict[int, dict[str, str]], dict[int, set[str]]] | None,
    report: LedgerVerifyReport,
) -> dict[str, Any] | None:
    """Apply the stored deltas after fold ``start`` (up to ``stop``) to ``state``, comparing
    each fold's stored hash, accumulator and verdicts (and checkpoints, and fact rows when
    ``rows`` is given); the first mismatch, or ``None``."""
    facts = _Tracked(state.get("facts", {}))
    state["facts"] = facts
    for number, delta_text, stored_hash, stored_acc, checkpoint in _folds(journal, start):
        if stop is not None and number > stop:
            break
        if rows is not None:
            report.folds += 1
        delta = json.loads(delta_text)
        verdicts = delta.pop("verdicts", [])
        try:
            results = reducer.apply_in_place(state, delta)
        except (reducer.PinViolation, reducer.DeltaInvalid) as exc:
            return _mismatch(number, "replay", str(exc))
        removed, added = facts.changes()
        acc = reducer.acc_update(acc, removed, added)
        if reducer.acc_hex(acc) != stored_acc:
            changed = sorted({k for k, _ in removed} | {k for k, _ in added})
            return _mismatch(
                number,
                name,
                f"stored state differs from {name}",
                changed[0] if changed else None,
            )
        if reducer.hash_of(acc, state) != stored_hash:
            return _mismatch(number, "state_hash", "state_hash does not match the stored state")
        if rows is not None and delta_verdicts(reducer.Reduction(state, results)) != verdicts:
            return _mismatch(number, "verdicts", "stored op verdicts differ from the reducer's")
        if checkpoint is not None:
            plain = {**state, "facts": dict.copy(facts)}
            if reducer.state_bytes(plain).decode("utf-8") != checkpoint:
                stored = json.loads(checkpoint)
                return _mismatch(
                    number,
                    "checkpoint",
                    f"stored checkpoint differs from {name}",
                    first_difference(stored, plain),
                )
            if rows is not None:
                report.checkpoints += 1
        if rows is not None:
            born, ended = rows
            olds = dict(removed)
            want_born = {
                k: reducer.state_bytes(v).decode("utf-8") + "\x00" + _change(olds.get(k), v)
                for k, v in added
            }
            want_ended = {k for k, _ in removed}
            if born.get(number, {}) != want_born or ended.get(number, set()) != want_ended:
                diff = sorted(
                    (set(born.get(number, {})) ^ set(want_born))
                    | (ended.get(number, set()) ^ want_ended)
                    | {k for k in want_born if born.get(number, {}).get(k) != want_born[k]}
                )
                return _mismatch(
                    number,
                    "fact rows",
                    "the fact rows differ from the facts this fold changed",
                    diff[0] if diff else None,
                )
    return None


def _terms_mismatch(journal: Journal, facts: dict[str, Any], number: int) -> dict[str, Any] | None:
    """The loss index (:class:`LedgerTerm`) against the replayed facts: every active fact's
    terms counted (``ledger_app.services.store.facts_store``'s rule); the first term whose
    stored count differs, or ``None``."""
    want: Counter[int] = Counter()
    for fact in dict.values(facts):
        if fact.get("lifecycle", "active") == "active":
            for key in ledger_terms(render_fact(fact)):
                want[term_id(key)] += 1
    stored = dict(LedgerTerm.objects.filter(journal=journal).values_list("term", "facts"))
    for term in sorted(want.keys() | stored.keys()):
        if want.get(term, 0) != stored.get(term, 0):
            return _mismatch(
                number,
                "terms",
                f"loss index term {term & 0xFFFFFFFFFFFFFFFF:016x} counts {stored.get(term, 0)} facts, the replayed "
                f"ledger {want.get(term, 0)}",
            )
    return None


def _columns_mismatch(journal: Journal) -> dict[str, Any] | None:
    """The first :class:`LedgerFact` version whose columns are not those its ``data``
    gives (:func:`ledger_app.services.store.fact_columns`): the columns pages filter,
    search and budget with, changed in place below the application. Streams the rows."""
    names = list(fact_columns({}))
    rows = (
        LedgerFact.objects.filter(journal=journal)
        .order_by("since", "fact_id")
        .values_list("since", "fact_id", "data", *names)
        .iterator(chunk_size=2000)
    )
    for since, fact_id, data, *stored in rows:
        try:
            fact = json.loads(data)
        except ValueError:
            return _mismatch(since, "fact columns", "the stored fact is not JSON", fact_id)
        want = fact_columns(fact if isinstance(fact, dict) else {})
        for name, value in zip(names, stored, strict=True):
            if want[name] != value:
                return _mismatch(
                    since,
                    "fact columns",
                    f"column {name} is {value!r}, the fact's data says {want[name]!r}",
                    fact_id,
                )
    return None


def ledger_verify(*, journal: Journal) -> LedgerVerifyReport:
    """Replay every delta and compare with what is stored (docs/design.md 5.2).

    1. **From scratch**: every delta applied in order to the empty state by the reducer; at
       each fold N its stored ``state_hash`` and accumulator must equal the replay's, its op
       verdicts the reducer's, a stored checkpoint the replayed state byte for byte, and its
       :class:`LedgerFact` rows (versions born and ended at N) the facts the delta changed.
    2. **From every checkpoint**: the stored state of each checkpoint, parsed, must hash to
       its stored ``state_hash``; the deltas after it, applied to it, must give every later
       stored hash up to the next checkpoint (what a page rebuilding a state relies on).
    4. **Record hashes** (last): every fold's ``record_hash`` over everything it stores,
       chained to the previous fold's (:func:`ledger_app.services.records.fold_records_verify`).
    3. **Fact columns** (between the two): every :class:`LedgerFact` version's columns
       (text, priority, lifecycle, pin, tokens, ...) must be those its ``data`` gives
       (:func:`_columns_mismatch`).

    Returns:
        :class:`LedgerVerifyReport` with the first mismatch (fold, fact id, which check),
        ``folds`` and ``checkpoints`` counted.
    """
    try:
        return _verify(journal)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        # a stored delta, state or fact that is no longer what the reducer wrote (not
        # JSON, not its shape): name the fold by its record hash when that differs
        report = LedgerVerifyReport()
        report.mismatch = fold_records_verify(journal=journal) or _mismatch(
            0, "stored JSON", f"a stored delta, state or fact cannot be read: {exc}"
        )
        return report


def _verify(journal: Journal) -> LedgerVerifyReport:
    report = LedgerVerifyReport()
    rows = _rows(journal)
    state = reducer.reduce(None, [])
    report.mismatch = _replay(
        journal, state, reducer.ACC_EMPTY, 0, None, "replay from scratch", rows, report
    )
    if report.mismatch is not None:
        return report
    if any(born for born in rows[0].values()) or report.folds:
        current = dict(
            LedgerFact.objects.filter(journal=journal, until__isnull=True).values_list(
                "fact_id", "data"
            )
        )
        replayed = {k: reducer.state_bytes(v).decode("utf-8") for k, v in state["facts"].items()}
        report.mismatch = _terms_mismatch(journal, state["facts"], report.folds)
        if report.mismatch is not None:
            return report
        if current != replayed:
            diff = sorted(
                (current.keys() ^ replayed.keys())
                | {k for k in current if replayed.get(k) != current[k]}
            )
            report.mismatch = _mismatch(
                report.folds, "fact rows", "current fact rows differ from the replay", diff[0]
            )
            return report
    report.mismatch = _columns_mismatch(journal)
    if report.mismatch is not None:
        return report
    checkpoints = list(
        Fold.objects.filter(journal=journal, state__isnull=False)
        .order_by("number")
        .values_list("number", "state", "state_hash", "state_acc")
    )
    for i, (number, text, stored_hash, stored_acc) in enumerate(checkpoints):
        base = json.loads(text)
        acc = reducer.acc_of(base.get("facts", {}))
        if reducer.acc_hex(acc) != stored_acc or reducer.hash_of(acc, base) != stored_hash:
            report.mismatch = _mismatch(
                number, "checkpoint", "stored checkpoint does not hash to its state_hash"
            )
            return report
        stop = checkpoints[i + 1][0] - 1 if i + 1 < len(checkpoints) else None
        report.mismatch = _replay(
            journal, base, acc, number, stop, "checkpoint plus delta", None, report
        )
        if report.mismatch is not None:
            return report
    report.mismatch = fold_records_verify(journal=journal)
    if report.mismatch is not None:
        return report
    report.checks = list(CHECKS)
    return report


def ledger_log_verify(*, journals: list[Journal]) -> list[str]:
    """Recompute the hash-chained log of the tenants of ``journals`` (retirement requests
    and decisions, comments, annotations, audit events; ``audit_app.LogRecord``) and
    compare every logged row with its latest record.

    Returns:
        Problems, the first differing record first (:func:`audit_app.chained_log.log_verify`).
    """
    tenants = {j.session.tenant_id for j in journals}
    return log_verify(chains=tenants)
