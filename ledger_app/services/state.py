"""Reads of the ledger's stored state: the latest fold, the current facts, what a writer reads.

Writes nothing. The state after a fold lives in :class:`~ledger_app.models.LedgerFact`
rows (one version per change) and the folds' checkpoints; every read here is a few indexed
lookups whatever the ledger's size, except :func:`ledger_state`, which reads it whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.db.models import Q, QuerySet
from django.db.models.functions import Substr

from journal_app.models import Journal
from ledger_app import reducer
from ledger_app.facts import Fact
from ledger_app.model_writer.messages import STATE_FACT_LIMIT
from ledger_app.models import COMMAND_KEY_INDEXED, Fold, LedgerFact


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

    Why (a fold's cost does not depend on the ledger's size): a branch is a lookup by
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
    """The part of the state a writer reads before a fold, from the rows.

    ``id_prefixes``: also every active fact whose id starts with one of them (the open
    request parts and unused approvals the lifecycle rules read, offline writer or model
    fold: a few rows). ``pin_ids(pins)``: also
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
        branches = [rows.filter(where, until__isnull=True)]
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
