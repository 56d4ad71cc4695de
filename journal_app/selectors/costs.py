"""The computed cost of journals, sessions and tenants: :mod:`journal_app.pricing` over the
entries' provider-reported usage, with the price table of ``settings.LEDGER_MODEL_PRICES``.

A journal's cost is cached under its head seq (journals are append-only), so a page of
sessions reads only the journals that grew since it was last shown.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from django.conf import settings
from django.core.cache import cache
from django.db.models import QuerySet

from journal_app.models import Entry, Journal, Session
from journal_app.pricing import CostTotal, Price, cost_add, cost_sum, parse_price_table


def model_prices() -> dict[str, Price]:
    """The price table of ``settings.LEDGER_MODEL_PRICES`` (parsed at start-up by
    :func:`journal_app.pricing.parse_price_table`); ``{}``: no cost is shown."""
    return parse_price_table(settings.LEDGER_MODEL_PRICES or {})


def journal_costs(journal_ids: Sequence[int], prices: Mapping[str, Price]) -> dict[int, CostTotal]:
    """The computed cost of each journal's calls: :func:`journal_app.pricing.cost_add` over
    its entries with provider usage, a :class:`~journal_app.pricing.CostTotal` (USD over the
    priced calls, and the count of calls whose model has no price or no name).

    Journals are append-only, so a journal's cost is cached under its head seq (the default
    cache; the key is the same in every process, so with Redis one process's figure serves
    the others and outlives a restart): a later call reads only the journals that grew.
    Journals without a call are absent from the answer. One query over the entries whose metadata names ``usage``.
    """
    if not prices or not journal_ids:
        return {}
    heads = dict(Journal.objects.filter(pk__in=journal_ids).values_list("pk", "head_seq"))
    # a digest, not hash(): str hashes differ per process, and the key must name the same
    # entry in every process sharing the cache (Redis) and after a restart
    table_key = hashlib.sha256(repr(sorted(prices.items())).encode()).hexdigest()[:16]
    keys = {jid: f"journal-cost-total:{jid}:{head}:{table_key}" for jid, head in heads.items()}
    cached = cache.get_many(list(keys.values()))
    out: dict[int, CostTotal] = {}
    missing = []
    for jid, key in keys.items():
        if key in cached:
            if cached[key] is not None:
                out[jid] = CostTotal(*cached[key])
        else:
            missing.append(jid)
    if missing:
        fresh: dict[int, CostTotal] = {}
        rows = Entry.objects.filter(journal_id__in=missing, meta__contains='"usage"').values_list(
            "journal_id", "meta"
        )
        for jid, meta in rows.iterator(chunk_size=2000):
            try:
                total = cost_add(fresh.get(jid, CostTotal()), prices, json.loads(meta))
            except ValueError:
                continue
            if total.priced or total.unpriced:
                fresh[jid] = total
        cache.set_many(
            {keys[jid]: tuple(fresh[jid]) if jid in fresh else None for jid in missing},
            timeout=None,
        )
        out.update(fresh)
    return out


def session_costs(sessions: Sequence[Session]) -> dict[int, CostTotal]:
    """The computed cost of each session: the sum of its journals' (:func:`journal_costs`,
    :func:`journal_app.pricing.cost_sum`); sessions without a call are absent."""
    prices = model_prices()
    if not prices or not sessions:
        return {}
    owner = dict(
        Journal.objects.filter(session__in=[s.pk for s in sessions]).values_list("pk", "session_id")
    )
    by_session: dict[int, list[CostTotal]] = {}
    for jid, total in journal_costs(list(owner), prices).items():
        by_session.setdefault(owner[jid], []).append(total)
    return {sid: cost_sum(totals) for sid, totals in by_session.items()}


def tenant_costs(sessions: QuerySet[Session]) -> list[tuple[str, CostTotal]]:
    """The computed cost per tenant over ``sessions`` (a page's filtered list):
    ``[(tenant slug, CostTotal)]``, costliest first; tenants without a call are left out."""
    listed = list(sessions.order_by().select_related("tenant"))
    by_tenant: dict[str, list[CostTotal]] = {}
    costs = session_costs(listed)
    for s in listed:
        if s.pk in costs:
            by_tenant.setdefault(s.tenant.slug, []).append(costs[s.pk])
    totals = [(slug, cost_sum(t)) for slug, t in by_tenant.items()]
    return sorted(totals, key=lambda kv: -kv[1].usd)
