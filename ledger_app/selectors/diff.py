"""The diff of two folds read from the stored fact versions, a page at a time.

docs/design.md section 8 ("a diff between any two folds"). Every fold stores its changed facts as
:class:`~ledger_app.models.LedgerFact` versions (``since <= n < until``), so the difference
between the ledger after fold ``lo`` and after fold ``hi`` (``lo < hi``) is found in SQL,
without rebuilding either state:

* ``new`` rows: versions valid after ``hi`` that started after ``lo`` (``since > lo``);
* ``gone`` rows: versions valid after ``lo`` that ended by ``hi`` (``until <= hi``).

A fact with a ``new`` row and no ``gone`` row is *added*; a ``gone`` row and no ``new`` row,
*removed* (evicted); both, *changed* (unless the two versions are byte-identical, compared by
an MD5 of the stored JSON computed in the database). Every other fact is unchanged. The two
row sets are read in one query as small columns (id, pk, priority, since: no text), then the
digests of the facts on both sides only; they are matched and ordered in Python like
:func:`ledger_app.fact_changes.state_diff` (priority, added/changed/removed, id); a page then reads
its own versions, the earlier versions of its changed facts and their births. Five queries
whatever the size of the ledger or of the diff (six when a fact has versions on both sides:
their digests); the bytes read grow with the number of changes between the two folds (about
100 bytes each), never with the text.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.db.models.functions import MD5

from journal_app.models import Journal
from ledger_app.fact_changes import FactChange, birth_fold, field_changes
from ledger_app.facts import priority_rank
from ledger_app.models import LedgerFact
from ledger_app.selectors.fact_presenters import fact_shown

#: status ranks in the listing order (``ledger_app.fact_changes._order``)
_RANK = {"added": 0, "changed": 1, "removed": 2}
DIFF_STATUSES = tuple(_RANK)


def _valid_after(number: int) -> Q:
    return Q(since__lte=number) & (Q(until__isnull=True) | Q(until__gt=number))


@dataclass
class DiffRow:
    """One fact of a diff page: the :class:`~ledger_app.fact_changes.FactChange` (fields compared)
    and the fold the shown version's fact was born in (``None``: unknown)."""

    change: FactChange
    born: int | None


class FoldDiff(Sequence[DiffRow]):
    """The diff from the state after fold ``a`` to the state after fold ``b`` (fold 0: the
    empty ledger), as a lazy sequence a paginator reads: ``len`` is the number of listed
    changes (of ``status`` when given), a slice one page of :class:`DiffRow`.

    ``a > b`` compares a later state with an earlier one: *added* then means present after
    ``b`` only. ``counts`` (``{"added", "changed", "removed"}``) and ``unchanged`` are the
    whole diff's, whatever ``status`` narrows the listing to.
    """

    def __init__(self, journal: Journal, a: int, b: int, *, status: str = "") -> None:
        self.journal_id = journal.pk
        self.a, self.b = a, b
        self.status = status if status in _RANK else ""
        self.lo, self.hi = min(a, b), max(a, b)
        self.forward = a <= b
        rows = LedgerFact.objects.filter(journal_id=self.journal_id)
        self._new = rows.filter(_valid_after(self.hi), since__gt=self.lo)
        self._gone = rows.filter(_valid_after(self.lo), until__lte=self.hi)
        self._listed: list[tuple[int, int, str, int, str]] | None = None
        self._unchanged: int | None = None

    def _changes(self) -> list[tuple[int, int, str, int, str]]:
        """Every listed change as ``(priority rank, status rank, fact id, row pk, status)``,
        in the listing order; one query of small columns (no fact text), whatever the plan
        statistics say (correlated ``EXISTS`` subqueries were planned as nested loops over
        all versions on PostgreSQL with stale statistics), and a second only when some fact
        has a version on both sides: the MD5 digests of those versions alone (hashing every
        new and gone version's JSON cost more than the rest of the diff)."""
        if self._listed is not None:
            return self._listed
        listed: list[tuple[int, int, str, int, str]] = []
        if self.lo != self.hi:
            # one scan for both sets: a new row started after ``lo``, a gone one at or before
            new: dict[str, tuple[str, int, str]] = {}
            gone: dict[str, tuple[str, int, str]] = {}
            for fact_id, pk, priority, since in (self._new | self._gone).values_list(
                "fact_id", "pk", "priority", "since"
            ):
                (new if since > self.lo else gone)[fact_id] = (fact_id, pk, priority)
            both = [fact_id for fact_id in new if fact_id in gone]
            digest: dict[int, str] = {}
            if both:
                pks = [new[f][1] for f in both] + [gone[f][1] for f in both]
                digest = dict(
                    LedgerFact.objects.filter(pk__in=pks)
                    .annotate(digest=MD5("data"))
                    .values_list("pk", "digest")
                )
            only_new, only_gone = ("added", "removed") if self.forward else ("removed", "added")
            for fact_id, pk, priority in new.values():
                if fact_id not in gone:
                    status = only_new
                elif digest[gone[fact_id][1]] != digest[pk]:
                    status = "changed"
                    if not self.forward:
                        # ranked by the side the diff goes to (as state_diff ranks by ``b``):
                        # a superseded fact's priority drops, so the sides can differ
                        priority = gone[fact_id][2]
                else:
                    continue  # the same version stored again: unchanged
                listed.append((priority_rank(priority), _RANK[status], fact_id, pk, status))
            for fact_id, pk, priority in gone.values():
                if fact_id not in new:
                    listed.append(
                        (priority_rank(priority), _RANK[only_gone], fact_id, pk, only_gone)
                    )
        listed.sort()
        self._listed = listed
        return listed

    @property
    def counts(self) -> dict[str, int]:
        """``{"added": n, "changed": n, "removed": n}`` of the whole diff."""
        counts = dict.fromkeys(DIFF_STATUSES, 0)
        for *_, status in self._changes():
            counts[status] += 1
        return counts

    @property
    def unchanged(self) -> int:
        """Facts in both states with the same version (one ``COUNT``)."""
        if self._unchanged is None:
            # the earlier state's facts less those removed or changed since (an identical
            # re-stored version is neither listed nor counted as changed: it is unchanged)
            earlier = LedgerFact.objects.filter(
                _valid_after(self.lo), journal_id=self.journal_id
            ).count()
            counts = self.counts
            left = counts["removed" if self.forward else "added"]
            self._unchanged = max(0, earlier - left - counts["changed"])
        return self._unchanged

    def _shown(self) -> list[tuple[int, int, str, int, str]]:
        listed = self._changes()
        return [c for c in listed if c[4] == self.status] if self.status else listed

    def __len__(self) -> int:
        return len(self._shown())

    def count(self) -> int:  # type: ignore[override]
        """What :class:`django.core.paginator.Paginator` asks for (same as ``len``)."""
        return len(self)

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, slice):
            return self[index : index + 1][0]
        picked = self._shown()[index]
        status_of = {pk: status for *_, pk, status in picked}
        versions = LedgerFact.objects.in_bulk([pk for *_, pk, _ in picked])
        return self._rows([versions[pk] for *_, pk, _ in picked], status_of)

    def __iter__(self) -> Iterator[DiffRow]:
        return iter(self[0 : len(self)])

    def _rows(self, versions: list[LedgerFact], status_of: dict[int, str]) -> list[DiffRow]:
        """Shape one page: the other side of each changed fact and each fact's birth fold
        (two queries, whatever the page holds)."""
        changed_ids = [v.fact_id for v in versions if status_of[v.pk] == "changed"]
        # a changed fact is listed by its version after ``hi``; read the one after ``lo``
        others = {v.fact_id: v for v in self._gone.filter(fact_id__in=changed_ids)}
        births: dict[str, list[int]] = defaultdict(list)
        born_rows = LedgerFact.objects.filter(
            journal_id=self.journal_id,
            fact_id__in=[v.fact_id for v in versions],
            change="born",
        ).values_list("fact_id", "since")
        for fact_id, since in born_rows:
            births[fact_id].append(since)
        rows = []
        for v in versions:
            status = status_of[v.pk]
            shown = v
            if status == "changed":
                other = others[v.fact_id]
                first, second = (other, v) if self.forward else (v, other)
                shown = second  # the version in the state after fold ``b``
                # shown filtered, as every display surface shows a fact (``fact_shown``)
                before, after = fact_shown(first.fact), fact_shown(second.fact)
                change = FactChange(status, v.fact_id, after, before, field_changes(before, after))
            else:
                change = FactChange(status, v.fact_id, fact_shown(v.fact))
            rows.append(DiffRow(change, birth_fold(births[v.fact_id], shown.since)))
        return rows


def fold_diff(journal: Journal, a: int, b: int, *, status: str = "") -> FoldDiff:
    """The diff of the ledger after fold ``a`` and after fold ``b`` (:class:`FoldDiff`),
    narrowed to ``status`` (``added``, ``changed``, ``removed``; anything else: all).

    The fold numbers are not checked here: a number past the last fold reads as the
    current ledger; the view answers 404 for folds that do not exist.
    """
    return FoldDiff(journal, a, b, status=status)
