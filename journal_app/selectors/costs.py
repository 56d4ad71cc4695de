"""The computed cost of journals, sessions and tenants: :mod:`journal_app.pricing` over the
entries' provider-reported usage, with the price table of ``settings.LEDGER_MODEL_PRICES``.

A journal's cost is stored under its head (journals are append-only and content-addressed):
a :class:`~journal_app.models.JournalCost` row per journal and price table, read by every
process and kept over a restart, with the default cache in front of it (one read, no query,
while the process lives). A page of sessions reads only the journals that grew since any
process last computed them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from journal_app.models import COST_USD_CHARS, Entry, Journal, JournalCost, Session
from journal_app.pricing import CostTotal, Price, cost_add, cost_sum, parse_price_table


def model_prices() -> dict[str, Price]:
    """The price table of ``settings.LEDGER_MODEL_PRICES`` (parsed at start-up by
    :func:`journal_app.pricing.parse_price_table`); ``{}``: no cost is shown."""
    return parse_price_table(settings.LEDGER_MODEL_PRICES or {})


def price_table_key(prices: Mapping[str, Price]) -> str:
    """The digest naming a price table in the cache keys and :class:`JournalCost` rows:
    16 hex digits of the sha256 of the sorted table. A digest, not ``hash()``: str hashes
    differ per process, and the key must name the same figure in every process and after a
    restart."""
    return hashlib.sha256(repr(sorted(prices.items())).encode()).hexdigest()[:16]


def _computed(
    heads: Mapping[int, tuple[int, str]], prices: Mapping[str, Price]
) -> dict[int, CostTotal]:
    """The cost of each journal of ``heads`` over its entries up to its head seq (an entry
    appended since the head was read is left out, so the figure is exactly the head's);
    journals without a call are absent. One query over the entries naming ``usage``."""
    fresh: dict[int, CostTotal] = {}
    rows = Entry.objects.filter(journal_id__in=list(heads), meta__contains='"usage"').values_list(
        "journal_id", "seq", "meta"
    )
    for jid, seq, meta in rows.iterator(chunk_size=2000):
        if seq > heads[jid][0]:
            continue
        try:
            total = cost_add(fresh.get(jid, CostTotal()), prices, json.loads(meta))
        except ValueError:
            continue
        if total.priced or total.unpriced:
            fresh[jid] = total
    return fresh


def _store(
    heads: Mapping[int, tuple[int, str]], table: str, totals: Mapping[int, CostTotal]
) -> None:
    """Write the :class:`JournalCost` row of each journal of ``heads`` (no call: zeros), one
    upsert on ``(journal, table_key)``: two processes racing at one head write the same figure;
    a slower one at an older head may overwrite a newer figure, which the next read at the new
    head then computes again (a row is never taken for a head it does not name). A journal
    deleted meanwhile (the foreign key refuses its row, at the commit: pages run in autocommit)
    leaves nothing stored, and the answer stands."""
    rows = []
    for jid, (head_seq, head_hash) in heads.items():
        total = totals.get(jid, CostTotal())
        usd = str(total.usd)
        if len(usd) > COST_USD_CHARS:
            continue  # a sum past the Decimal context's digits: computed again next time
        rows.append(
            JournalCost(
                journal_id=jid,
                table_key=table,
                head_seq=head_seq,
                head_hash=head_hash,
                usd=usd,
                priced=total.priced,
                unpriced=total.unpriced,
            )
        )
    try:
        with transaction.atomic():
            JournalCost.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["journal", "table_key"],
                update_fields=["head_seq", "head_hash", "usd", "priced", "unpriced", "computed_at"],
            )
    except IntegrityError:
        pass


def journal_costs(journal_ids: Sequence[int], prices: Mapping[str, Price]) -> dict[int, CostTotal]:
    """The computed cost of each journal's calls: :func:`journal_app.pricing.cost_add` over
    its entries with provider usage, a :class:`~journal_app.pricing.CostTotal` (USD over the
    priced calls, and the count of calls whose model has no price or no name).

    Journals are append-only and content-addressed, so a journal's cost under a price table
    (:func:`price_table_key`) is fixed by its head (seq and hash). It is looked up, in order:
    the default cache (under the head seq; the key is the same in every process), then the
    :class:`~journal_app.models.JournalCost` rows whose head is the journal's (one query, read
    by every process and kept over a restart, so a first view after a start parses no entry
    without Redis either), and only then computed (one query over the entries whose metadata
    names ``usage``) and stored in both. Journals without a call are absent from the answer.
    """
    if not prices or not journal_ids:
        return {}
    heads: dict[int, tuple[int, str]] = {
        pk: (seq, head_hash)
        for pk, seq, head_hash in Journal.objects.filter(pk__in=journal_ids).values_list(
            "pk", "head_seq", "head_hash"
        )
    }
    table = price_table_key(prices)
    keys = {jid: f"journal-cost-total:{jid}:{head[0]}:{table}" for jid, head in heads.items()}
    cached = cache.get_many(list(keys.values()))
    out: dict[int, CostTotal] = {}
    missing = []
    for jid, key in keys.items():
        if key in cached:
            if cached[key] is not None:
                out[jid] = CostTotal(*cached[key])
        else:
            missing.append(jid)
    if not missing:
        return out
    found: dict[int, CostTotal | None] = {}
    for row in JournalCost.objects.filter(journal_id__in=missing, table_key=table).values_list(
        "journal_id", "head_seq", "head_hash", "usd", "priced", "unpriced"
    ):
        jid, head_seq, head_hash, usd, priced, unpriced = row
        if (head_seq, head_hash) == heads[jid]:
            found[jid] = CostTotal(Decimal(usd), priced, unpriced) if priced or unpriced else None
    stale = {jid: heads[jid] for jid in missing if jid not in found}
    if stale:
        fresh = _computed(stale, prices)
        _store(stale, table, fresh)
        found.update({jid: fresh.get(jid) for jid in stale})
    cache.set_many(
        {keys[jid]: tuple(total) if total is not None else None for jid, total in found.items()},
        timeout=None,
    )
    out.update({jid: total for jid, total in found.items() if total is not None})
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
