"""Tenant-filtered reads of the ledger for the operator UI (DESIGN.md sections 8 and 9).

The tenant filter is :func:`journal_app.selectors.tenants_for_user`, written once; another
tenant's object answers ``Http404``.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from django.db.models import Case, QuerySet, When
from django.db.models.fields.json import KT
from django.http import Http404

from journal_app.models import Journal
from journal_app.selectors import User, tenants_for_user
from ledger_app.models import Fold, RetirementRequest

#: how many covered entry hashes the fold page prints (the export holds them all)
MANIFEST_HASHES_SHOWN = 20


def retirements_for_user(user: User, *, tenant: str = "", status: str = "") -> QuerySet:
    """P0 retirement requests of the user's tenants, pending first, then newest.

    Args:
        tenant: a tenant slug to narrow to.
        status: ``pending``, ``approved`` or ``refused`` (anything else: all).
    """
    qs = RetirementRequest.objects.filter(
        journal__session__tenant__in=tenants_for_user(user)
    ).select_related("journal__session__tenant", "requested_in", "decided_in", "reviewer")
    if tenant:
        qs = qs.filter(journal__session__tenant__slug=tenant)
    if status in RetirementRequest.Status.values:
        qs = qs.filter(status=status)
    return qs.defer(
        "requested_in__manifest",
        "requested_in__delta",
        "requested_in__state",
        "decided_in__manifest",
        "decided_in__delta",
        "decided_in__state",
    ).order_by(
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


#: parsed fold states by (fold pk, state hash): a fold's state never changes, so a parsed
#: copy stays right; a few are kept (a 10,000-fact state is tens of MB as objects)
_STATES: OrderedDict[tuple[int, str], dict[str, Any]] = OrderedDict()
STATES_KEPT = 4


def parsed_state(fold: Fold) -> dict[str, Any]:
    """The parsed state after ``fold`` (needs ``pk`` and ``state_hash`` loaded), READ-ONLY.

    Parsed once per process and shared between requests (callers must not change it);
    the state column is read only on a miss.
    """
    key = (fold.pk, fold.state_hash)
    state = _STATES.get(key)
    if state is None:
        text = Fold.objects.filter(pk=fold.pk).values_list("state", flat=True).get()
        state = json.loads(text)
        _STATES[key] = state
        while len(_STATES) > STATES_KEPT:
            _STATES.popitem(last=False)
    else:
        _STATES.move_to_end(key)
    return state


def fold_rows(journal: Journal) -> QuerySet:
    """The journal's folds without delta, state or manifest, plus the manifest's token
    figures (``tokens_covered``, ``tokens_ledger``) read in the database."""
    return (
        Fold.objects.filter(journal=journal)
        .order_by("number")
        .defer("delta", "state", "manifest")
        .annotate(
            tokens_covered=KT("manifest__tokens__covered"),
            tokens_ledger=KT("manifest__tokens__ledger_active"),
        )
    )


def fold_for_journal(journal: Journal, number: int) -> Fold:
    """Fold ``number`` of ``journal`` (already tenant-checked); ``Http404`` if absent."""
    fold = Fold.objects.filter(journal=journal, number=number).first()
    if fold is None:
        raise Http404("no such fold")
    return fold


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
