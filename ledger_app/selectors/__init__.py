"""The read layer of the ledger: every database read the UI pages and the API share.

DESIGN.md sections 5, 8 and 9. The htmx views (:mod:`ledger_app.views`) and the API
(:mod:`ledger_app.api`) call these selectors for their reads and the presenters
(:mod:`ledger_app.selectors.presenters`, no database) to shape what they read, so a page and
its endpoint show the same state, the same filters and order, the same support links.

Tenant filtering happens before a selector is called: the UI resolves the journal with
:func:`journal_app.selectors.get_journal_for_user`, the API with ``request.auth.journal``;
objects reached by id are filtered here by the user's tenants or the key's tenant, and
answer ``Http404`` outside them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from django.db import connection
from django.db.models import Case, Count, F, Q, QuerySet, When
from django.db.models.fields.json import KT
from django.db.models.functions import Collate
from django.http import Http404

from audit_app.models import AuditEvent, Comment
from journal_app.models import Entry, Journal, Membership, Tenant
from journal_app.privacy import filter_text
from journal_app.selectors import User, entries_by_hash, tenants_for_user
from ledger_app.facts import Fact
from ledger_app.filters import FilterError, Query, fact_matches, parse_facts
from ledger_app.models import (
    Fold,
    FoldAttempt,
    LedgerFact,
    Proposal,
    RetirementRequest,
    TaskRun,
    Verdict,
)
from ledger_app.selectors import presenters
from ledger_app.selectors.diff import FoldDiff, fold_diff

__all__ = [
    "MANIFEST_HASHES_SHOWN",
    "FactsQuery",
    "FoldDiff",
    "context_ledger",
    "entries_known",
    "fact_at",
    "fact_history",
    "fact_seen",
    "facts_at",
    "open_obligations",
    "failed_attempts",
    "fact_comments",
    "fact_deltas",
    "fold_at",
    "fold_attempts",
    "fold_choices",
    "fold_diff",
    "fold_get",
    "fold_neighbours",
    "fold_numbers",
    "fold_reviews",
    "fold_rows",
    "manifest_for_display",
    "retirement_events",
    "retirement_for_tenant",
    "retirement_for_user",
    "retirements_for_tenant",
    "retirements_for_user",
    "state_at",
    "task_executions",
    "task_run_for_tenant",
    "task_runs",
]

#: how many covered entry hashes the fold page prints (the export holds them all)
MANIFEST_HASHES_SHOWN = 20


# Ledger state -------------------------------------------------------------------------------
#
# Since issue 18 the full state is stored only at checkpoints; the facts are rows
# (:class:`LedgerFact`, one per version), so every read below is SQL over indexed columns.
# There is no process-wide cache of parsed states any more.


def _facts_after(journal_id: int, number: int) -> QuerySet[LedgerFact]:
    """The fact versions valid after fold ``number``: ``since <= number < until``."""
    return LedgerFact.objects.filter(journal_id=journal_id, since__lte=number).filter(
        Q(until__isnull=True) | Q(until__gt=number)
    )


#: Facts after a fold (its recorded count) up to which a page sorts the few rows it selects
#: instead of walking the display-order index (see :func:`_fact_order`)
SORT_AT_MOST = 5_000


def _fact_order(qs: QuerySet[LedgerFact], few: bool = False) -> QuerySet[LedgerFact]:
    """``qs`` in fact order (priority, then id by code point): "C" collation on PostgreSQL,
    where the default collation would sort ids differently from Python; SQLite compares
    bytes.

    ``few`` (the fold holds at most :data:`SORT_AT_MOST` facts): on PostgreSQL the priority
    is ordered under "C" too (the same order: ``P0``...``P3``), which the display-order index
    ``ledgerfact_order`` cannot serve, so the planner selects the fold's rows by ``since``
    and sorts them. Walking that index instead filters every row of the journal's later
    folds away: 129 ms for the 153 facts of fold 17 in a 100,000-fact ledger, 0.4 ms sorted;
    for a fold holding most of the rows the index walk is the fast one (issue 18).
    """
    if connection.vendor == "postgresql":
        if few:
            return qs.order_by(Collate("priority", "C"), Collate("fact_id", "C"))
        return qs.order_by("priority", Collate("fact_id", "C"))
    return qs.order_by("priority", "fact_id")


def state_at(fold: Fold | None) -> dict[str, Any]:
    """The whole ledger state after ``fold`` (the empty state for ``None``), a new dict.

    Rebuilt from the nearest checkpoint at or before the fold plus the later deltas,
    through the reducer (:meth:`ledger_app.models.FoldQuerySet.state_after`, DESIGN.md
    5.2). For pages that need every fact (the diff of two folds); the facts pages, the API
    and the context builder read rows instead (:func:`facts_at`, :func:`fact_at`,
    :func:`context_ledger`).
    """
    if fold is None:
        return {"facts": {}}
    return Fold.objects.state_after(fold)


class FactsQuery(Sequence[Fact]):
    """The facts of a filtered, ordered :class:`LedgerFact` query, read lazily: ``len`` is
    one ``COUNT``, a slice one ``LIMIT``/``OFFSET`` query (what a paginator asks for)."""

    def __init__(self, qs: QuerySet[LedgerFact]) -> None:
        self.qs = qs
        self._count: int | None = None

    def __len__(self) -> int:
        if self._count is None:
            self._count = self.qs.count()
        return self._count

    def count(self) -> int:
        return len(self)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [json.loads(d) for d in self.qs[index].values_list("data", flat=True)]
        return json.loads(self.qs.values_list("data", flat=True)[index])

    def __iter__(self) -> Iterator[Fact]:
        for data in self.qs.values_list("data", flat=True).iterator(chunk_size=2000):
            yield json.loads(data)


#: fact filter fields that are :class:`LedgerFact` columns holding exactly what the Python
#: matcher (:func:`ledger_app.filters.fact_matches`) reads: a term on them is a SQL condition.
_FACT_COLUMNS = {"category": "category", "priority": "priority", "confidence": "confidence"}
_INT_LOOKUPS = {"eq": "exact", "lt": "lt", "le": "lte", "gt": "gt", "ge": "gte"}


def _fact_term_q(term: Any) -> tuple[Q, bool] | None:
    """A SQL condition for one fact filter term, and whether it is exact.

    Exact (the same answer as :func:`ledger_app.filters.fact_matches`, negated or not):
    ``category``, ``priority``, ``confidence`` and ``lifecycle`` (the row's columns, written
    by ``ledger_app.services.store._row`` with the same defaults), ``pin`` and ``fold``
    (``origin_fold``; ``NULL`` satisfies no comparison, so a negated one holds, as in
    :func:`ledger_app.filters.compare_int`). A positive ``text`` or ``id`` term with an ASCII
    value is a narrowing ``icontains`` (a fact the matcher keeps passes it, save text holding
    U+0130 or U+212A, the two non-ASCII letters whose lower case is ASCII; the matcher still
    decides), ``None`` for anything else (``author``, ``quote``, ``support``,
    ``pending`` live only in the fact's JSON; a non-ASCII value, because SQLite folds case
    for ASCII only).
    """
    f = term.field
    if f in _FACT_COLUMNS or f == "lifecycle":
        cond = Q(**{f"{_FACT_COLUMNS.get(f, f)}__in": list(term.values)})
    elif f == "pin":
        cond = Q(pin=bool(term.values[0]))
    elif f == "fold":
        if term.op == "range":
            cond = Q(origin_fold__gte=term.values[0], origin_fold__lte=term.values[1])
        else:
            cond = Q(**{f"origin_fold__{_INT_LOOKUPS[term.op]}": term.values[0]})
    elif f in ("text", "id") and not term.negate and str(term.values[0]).isascii():
        column = "text" if f == "text" else "fact_id"
        return Q(**{f"{column}__icontains": term.values[0]}), False
    else:
        return None
    return (~cond if term.negate else cond), True


class _ParsedOnRead(Sequence[Fact]):
    """Facts held as their stored JSON, parsed when read (a page parses its 100 only)."""

    def __init__(self, data: list[str]) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def count(self) -> int:
        return len(self.data)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [json.loads(d) for d in self.data[index]]
        return json.loads(self.data[index])


def facts_at(
    journal: Journal, fold: Fold | None, *, chosen: Mapping[str, str | None], q: str = ""
) -> presenters.FactSelection:
    """The facts after ``fold`` matching the filters, in the display order (SQL).

    The same selection as :func:`presenters.facts_select` over the whole state: the exact
    filters ``chosen`` (over :data:`presenters.FACT_FILTERS`) are SQL conditions and
    ``shown`` is a :class:`FactsQuery` read page by page. A filter expression ``q``
    (:data:`ledger_app.filters.FACT_FIELDS`) is compiled term by term (:func:`_fact_term_q`):
    when every term is exact in SQL, ``shown`` stays a lazy :class:`FactsQuery` (one
    ``COUNT``, one page). Otherwise the rows the SQL conditions leave are read in one query
    and the Python matcher (:func:`ledger_app.filters.fact_matches`) decides the rest, so the
    answer is the matcher's whatever the database's case folding: ``text`` terms on the
    ``text`` column (no JSON parsed; then ``shown`` parses only the page read), other terms
    (``author``, ``quote``, ``support``, ``pending``, ``id``) on the parsed facts. A bad
    expression selects nothing and carries its ``error``. ``total`` (facts after the fold,
    unfiltered) is the fold's recorded figure (``manifest["storage"]["facts"]``), or one
    ``COUNT`` for a fold stored before it was recorded: a ``COUNT`` over 100,000 rows took
    50-90 ms (issue 18).
    """
    if fold is None:
        return presenters.facts_select({"facts": {}}, chosen=chosen, q=q)
    qs = _facts_after(fold.journal_id, fold.number)
    wanted = {
        k: str(v)
        for k, v in chosen.items()
        if k in presenters.FACT_FILTERS and v in presenters.FACT_FILTERS[k]
    }
    total = _facts_total(fold)
    if total is None:
        total = qs.count()
    few = total <= SORT_AT_MOST
    q = (q or "").strip()
    shown: Sequence[Fact]
    if q:
        try:
            query = parse_facts(q)
        except FilterError as exc:
            return presenters.FactSelection(total=total, shown=[], chosen=wanted, q=q, error=exc)
        narrowed = qs.filter(**wanted)
        on_text: list[Any] = []  # terms the matcher decides on the text column
        on_json: list[Any] = []  # terms it decides on the parsed fact
        for term in query.terms:
            compiled = _fact_term_q(term)
            if compiled is not None:
                narrowed = narrowed.filter(compiled[0])
            if compiled is None or not compiled[1]:
                (on_text if term.field == "text" else on_json).append(term)
        shown = FactsQuery(_fact_order(narrowed, few))
        if on_text or on_json:
            # the column ``text`` is the fact's text (``_row``): match it without parsing
            by_text = Query(terms=tuple(on_text))
            # a match must hold on the text as shown (secrets filtered), or a search for a
            # secret would tell which pin holds it: checked only where the raw text matched
            kept = [
                data
                for text, data in _fact_order(narrowed, few).values_list("text", "data")
                if fact_matches(by_text, {"text": text})
                and (not on_text or fact_matches(by_text, {"text": filter_text(text).text}))
            ]
            if on_json:
                by_json = Query(terms=tuple(on_json))
                shown = [
                    f
                    for f in map(json.loads, kept)
                    if fact_matches(by_json, f) and fact_matches(by_json, presenters.fact_shown(f))
                ]
            else:
                shown = _ParsedOnRead(kept)
    else:
        shown = unfiltered = FactsQuery(_fact_order(qs.filter(**wanted), few))
        if not wanted:
            unfiltered._count = total
    return presenters.FactSelection(
        total=total,
        shown=shown,  # type: ignore[arg-type]
        chosen=wanted,
        q=q,
    )


def _facts_total(fold: Fold) -> int | None:
    """The number of facts after ``fold`` as the fold recorded it (``manifest["storage"]
    ["facts"]``, :func:`ledger_app.services.store.facts_count`), or ``None`` when its
    manifest is not loaded or predates the figure (the caller counts the rows then)."""
    if "manifest" in fold.get_deferred_fields():
        return None
    n = ((fold.manifest or {}).get("storage") or {}).get("facts")
    return n if isinstance(n, int) else None


def fact_at(journal: Journal, fold: Fold | None, fact_id: str) -> Fact | None:
    """The version of fact ``fact_id`` after ``fold`` (``None``: absent, or no fold)."""
    if fold is None:
        return None
    data = (
        _facts_after(fold.journal_id, fold.number)
        .filter(fact_id=fact_id)
        .values_list("data", flat=True)
        .first()
    )
    return json.loads(data) if data is not None else None


def fact_history(journal: Journal, fact_id: str) -> list[LedgerFact]:
    """Every version of ``fact_id`` (born in fold a, changed in fold b, ended in fold c),
    oldest first; ``until`` of the last one is the fold that evicted it, if any."""
    return list(LedgerFact.objects.filter(journal=journal, fact_id=fact_id).order_by("since"))


def fact_seen(journal: Journal, fact_id: str) -> bool:
    """Whether ``fact_id`` was ever a fact of the journal's ledger (any fold)."""
    return LedgerFact.objects.filter(journal=journal, fact_id=fact_id).exists()


def context_ledger(journal: Journal, fold: Fold | None) -> dict[str, Any]:
    """What the context builder reads of the ledger after ``fold``: the active facts, every
    pin (any lifecycle), the closed obligations (the records of completion the task state
    shows next to their pins) and the used decisions (the continuation record quotes what
    was decided, DESIGN.md 6), as ``{"facts": {...}, "folds": n}``; one SQL query."""
    if fold is None:
        return {"facts": {}, "folds": 0}
    rows = _facts_after(fold.journal_id, fold.number).filter(
        Q(lifecycle="active")
        | Q(pin=True)
        | Q(lifecycle="closed", category__in=("open_obligation", "decision"))
    )
    return {
        "facts": {k: json.loads(d) for k, d in rows.values_list("fact_id", "data")},
        "folds": fold.number,
    }


def open_obligations(journal: Journal) -> int:
    """Active open obligations of the journal's current ledger (one ``COUNT``)."""
    return LedgerFact.objects.filter(
        journal=journal, until__isnull=True, category="open_obligation", lifecycle="active"
    ).count()


def entries_known(journal: Journal, hashes: Iterable[str]) -> dict[str, Entry]:
    """The journal's entries among ``hashes`` (hex), by hash: what support links resolve to."""
    return entries_by_hash(journal, list(hashes))


# Folds --------------------------------------------------------------------------------------


def _annotated(qs: QuerySet[Fold]) -> QuerySet[Fold]:
    return qs.annotate(
        tokens_covered=KT("manifest__tokens__covered"),
        tokens_ledger=KT("manifest__tokens__ledger_active"),
        review_rejected=KT("manifest__review__rejected"),
        previous_number=F("previous__number"),
    )


def fold_rows(journal: Journal) -> QuerySet[Fold]:
    """The journal's folds in order, without delta, state or manifest, annotated with the
    manifest's token figures (``tokens_covered``, ``tokens_ledger``), the verifier's
    rejections (``review_rejected``) and ``previous_number``, read in the database."""
    return _annotated(
        Fold.objects.filter(journal=journal).order_by("number").defer("delta", "state", "manifest")
    )


def fold_choices(journal: Journal) -> list[Fold]:
    """The journal's folds in order, with only what a fold picker shows."""
    return list(
        Fold.objects.filter(journal=journal)
        .order_by("number")
        .only(
            "id",
            "journal_id",
            "number",
            "kind",
            "outcome",
            "seq_start",
            "seq_end",
            "created_at",
            "state_hash",
        )
    )


def fold_numbers(journal: Journal) -> list[int]:
    """The numbers of the journal's folds, in order."""
    return list(
        Fold.objects.filter(journal=journal).order_by("number").values_list("number", flat=True)
    )


def fold_get(journal: Journal, number: int) -> Fold:
    """Fold ``number`` of ``journal`` (annotated like :func:`fold_rows`); ``Http404`` if absent."""
    # ``state`` (a checkpoint's whole state, megabytes at 100k facts) loads only if asked
    fold = _annotated(Fold.objects.filter(journal=journal, number=number).defer("state")).first()
    if fold is None:
        raise Http404(f"no fold {number}")
    return fold


def fold_at(journal: Journal, number: int | None) -> Fold | None:
    """Fold ``number`` (``Http404`` if absent), or the latest (``None`` before any fold)."""
    if number is None:
        return _annotated(
            Fold.objects.filter(journal=journal).order_by("-number").defer("state")
        ).first()
    return fold_get(journal, number)


def fold_neighbours(journal: Journal, number: int) -> set[int]:
    """Which of ``number - 1`` and ``number + 1`` are folds of the journal."""
    return set(
        Fold.objects.filter(journal=journal, number__in=[number - 1, number + 1]).values_list(
            "number", flat=True
        )
    )


def fold_reviews(fold: Fold) -> dict[str, int]:
    """``{fact_id: retirement request pk}`` of the retirements ``fold`` requested."""
    return dict(fold.retirements_requested.values_list("fact_id", "pk"))


def fact_deltas(journal: Journal, fact_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    """``(number, kind, delta)`` of every fold whose delta names ``fact_id``, in order."""
    key = json.dumps(fact_id, ensure_ascii=False)
    return [
        (number, kind, json.loads(delta))
        for number, kind, delta in Fold.objects.filter(journal=journal, delta__contains=key)
        .order_by("number")
        .values_list("number", "kind", "delta")
    ]


def fact_comments(journal: Journal, fact_id: str) -> list[Comment]:
    """The comments on the fact ``fact_id`` of ``journal``, oldest first."""
    return list(
        Comment.objects.filter(journal=journal, fact_id=fact_id)
        .select_related("author")
        .order_by("created_at", "pk")
    )


def manifest_for_display(manifest: dict[str, Any]) -> str:
    """The manifest as indented JSON, its covered entry hashes cut to the first
    :data:`MANIFEST_HASHES_SHOWN` (a fold of 100,000 entries would print 6.6 MB)."""
    shown = dict(manifest)
    covered = shown.get("covered")
    if isinstance(covered, dict) and isinstance(covered.get("entry_hashes"), list):
        hashes = covered["entry_hashes"]
        if len(hashes) > MANIFEST_HASHES_SHOWN:
            shown["covered"] = covered = dict(covered)
            covered["entry_hashes"] = hashes[:MANIFEST_HASHES_SHOWN] + [
                f"... {len(hashes) - MANIFEST_HASHES_SHOWN:,} more (all in the session export)"
            ]
    return json.dumps(shown, indent=2, ensure_ascii=False, sort_keys=True)


# Attempts, proposals, verdicts ----------------------------------------------------------------


def fold_attempts(
    journal: Journal, fold: Fold
) -> tuple[list[FoldAttempt], list[Proposal], list[Verdict]]:
    """Every attempt at ``fold`` (the one that stored it and the failed ones before it), their
    proposals (by attempt, round) and verdicts (by proposal, pk): three queries."""
    attempts = list(
        FoldAttempt.objects.filter(journal=journal, number=fold.number)
        .filter(Q(fold=fold) | Q(fold__isnull=True))
        .select_related("fold")
        .defer("fold__delta", "fold__state", "fold__manifest")
        .order_by("created_at", "pk")
    )
    proposals = list(
        Proposal.objects.filter(attempt__in=[a.pk for a in attempts]).order_by(
            "attempt_id", "round"
        )
    )
    verdicts = list(
        Verdict.objects.filter(proposal__in=[p.pk for p in proposals]).order_by("proposal_id", "pk")
    )
    return attempts, proposals, verdicts


def failed_attempts(journal: Journal, *, limit: int | None = None) -> list[FoldAttempt]:
    """The journal's failed fold attempts (the model was unreachable; nothing stored), newest
    first."""
    qs = FoldAttempt.objects.filter(journal=journal, outcome="failed").order_by(
        "-created_at", "-pk"
    )
    return list(qs[:limit] if limit else qs)


# Retirements --------------------------------------------------------------------------------


def _retirements() -> QuerySet[RetirementRequest]:
    return RetirementRequest.objects.select_related(
        "journal__session__tenant", "requested_in", "decided_in", "reviewer"
    ).defer(
        "requested_in__manifest",
        "requested_in__delta",
        "requested_in__state",
        "decided_in__manifest",
        "decided_in__delta",
        "decided_in__state",
    )


def retirements_for_user(user: User, *, tenant: str = "", status: str = "") -> QuerySet:
    """P0 retirement requests of the user's tenants, pending first, then newest.

    Args:
        tenant: a tenant slug to narrow to.
        status: ``pending``, ``approved`` or ``refused`` (anything else: all).
    """
    qs = _retirements().filter(journal__session__tenant__in=tenants_for_user(user))
    if tenant:
        qs = qs.filter(journal__session__tenant__slug=tenant)
    if status in RetirementRequest.Status.values:
        qs = qs.filter(status=status)
    return qs.order_by(
        Case(When(status=RetirementRequest.Status.PENDING, then=0), default=1),
        "-created_at",
        "-pk",
    )


def retirement_for_user(user: User, pk: int) -> RetirementRequest:
    """The retirement request ``pk`` if the user may read it; ``Http404`` otherwise."""
    request = retirements_for_user(user).filter(pk=pk).first()
    if request is None:
        raise Http404("no such retirement request")
    return request


def retirements_for_tenant(
    tenant: Tenant,
    *,
    journal: Journal | None = None,
    status: str | None = None,
    fact_id: str | None = None,
) -> QuerySet:
    """P0 retirement requests of ``tenant`` (of ``journal``, ``status``, ``fact_id`` when
    given), newest first."""
    qs = _retirements().filter(journal__session__tenant=tenant)
    if journal is not None:
        qs = qs.filter(journal=journal)
    if fact_id is not None:
        qs = qs.filter(fact_id=fact_id)
    if status:
        qs = qs.filter(status=status)
    return qs.order_by("-created_at", "-pk")


def retirement_for_tenant(tenant: Tenant, pk: int) -> RetirementRequest:
    """The retirement request ``pk`` of ``tenant``; ``Http404`` otherwise (other tenants too)."""
    request = retirements_for_tenant(tenant).filter(pk=pk).first()
    if request is None:
        raise Http404("no such retirement request")
    return request


def retirement_deciders(tenant_id: int, limit: int = 5) -> list[str]:
    """Usernames of the tenant's reviewers and admins (who may decide a P0 retirement), at
    most ``limit``, for the note a user who may not decide sees instead of the buttons."""
    return list(
        Membership.objects.filter(
            tenant_id=tenant_id, role__in=[Membership.Role.REVIEWER, Membership.Role.ADMIN]
        )
        .order_by("user__username")
        .values_list("user__username", flat=True)[:limit]
    )


def retirement_events(request: RetirementRequest) -> list[AuditEvent]:
    """The audit events of a retirement request (decisions and refused attempts), in order."""
    return list(
        AuditEvent.objects.filter(
            tenant_id=request.journal.session.tenant_id,
            object_type="retirement",
            object_id=str(request.pk),
        ).order_by("created_at", "pk")
    )


# Task runs ----------------------------------------------------------------------------------


def task_runs(journal: Journal, *, limit: int) -> list[TaskRun]:
    """The journal's task runs, newest first, at most ``limit``."""
    return list(
        TaskRun.objects.filter(journal=journal)
        .select_related("journal__session")
        .order_by("-created_at", "-pk")[:limit]
    )


def task_run_for_tenant(tenant: Tenant, task_id: str) -> TaskRun:
    """The latest execution record of ``task_id`` in ``tenant``; ``Http404`` otherwise."""
    run = (
        TaskRun.objects.filter(task_id=task_id, journal__session__tenant=tenant)
        .select_related("journal__session")
        .order_by("-created_at", "-pk")
        .first()
    )
    if run is None:
        raise Http404("no such task")
    return run


def task_executions(task_ids: Iterable[str]) -> dict[str, int]:
    """How many runs are recorded for each task id (retries and redeliveries add rows)."""
    rows = (
        TaskRun.objects.filter(task_id__in=list(task_ids))
        .order_by()
        .values("task_id")
        .annotate(n=Count("pk"))
        .values_list("task_id", "n")
    )
    return dict(rows)
