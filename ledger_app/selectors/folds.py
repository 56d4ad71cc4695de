"""Reads of a journal's folds: the history, one fold, its neighbours and reviews, the deltas
that name a fact, the attempts at a fold with their proposals and verdicts.

A fold's ``state`` (a checkpoint's whole state, megabytes at 100,000 facts) is never loaded
here; the history reads no delta or manifest either, only the manifest figures it lists,
read in the database (:func:`fold_rows`).
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import F, Q, QuerySet
from django.db.models.fields.json import KT
from django.http import Http404

from journal_app.models import Journal
from ledger_app.models import Fold, FoldAttempt, Proposal, Verdict

#: how many covered entry hashes the fold page prints (the export holds them all)
MANIFEST_HASHES_SHOWN = 20


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
    proposals (by attempt, round) and verdicts (by proposal, pk): three queries (a fourth
    for the fold's delta when a proposal's ops refer to it and ``fold`` came without it)."""
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
    if any(p.ops_from is not None for p in proposals):  # ops stored as a run of the delta's
        delta = fold.__dict__.get("delta")  # loaded with the fold, else one query
        if delta is None:
            delta = Fold.objects.filter(pk=fold.pk).values_list("delta", flat=True).first()
        delta_ops = json.loads(delta).get("ops", []) if delta else []
        for p in proposals:
            p.delta_ops_set(delta_ops)
    verdicts = list(
        Verdict.objects.filter(proposal__in=[p.pk for p in proposals]).order_by("proposal_id", "pk")
    )
    ops_of = {p.pk: p.ops for p in proposals if any(v.op_at is not None for v in verdicts)}
    for v in verdicts:  # a claim and support read from the op they name (op_at)
        if v.op_at is not None:
            v.proposal_ops_set(ops_of[v.proposal_id])
    return attempts, proposals, verdicts


def failed_attempts(journal: Journal, *, limit: int | None = None) -> list[FoldAttempt]:
    """The journal's failed fold attempts (the model was unreachable; nothing stored), newest
    first."""
    qs = FoldAttempt.objects.filter(journal=journal, outcome="failed").order_by(
        "-created_at", "-pk"
    )
    return list(qs[:limit] if limit else qs)
