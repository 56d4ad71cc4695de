"""Operator UI pages of the ledger (DESIGN.md section 8): facts at any fold, fold history.

Thin function views. The scope is resolved by :mod:`journal_app.selectors` (tenant filter,
``Http404``); states are read with :func:`ledger_app.services.ledger_state`, never edited.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from journal_app import selectors
from journal_app.hashing import display
from journal_app.models import Entry, Journal
from journal_app.views import HtmxHttpRequest
from ledger_app.facts import CATEGORIES, CONFIDENCES, LIFECYCLES, PRIORITIES, Fact, priority_rank
from ledger_app.models import Fold
from ledger_app.services import FALLBACK_NOTE, ledger_state

FILTERS: dict[str, tuple[str, ...]] = {
    "category": CATEGORIES,
    "priority": PRIORITIES,
    "lifecycle": LIFECYCLES,
    "confidence": CONFIDENCES,
}
FALLBACK_NOTICE = "mechanical facts only: " + FALLBACK_NOTE


@dataclass
class SupportLink:
    """One support item of a fact, as a link to the raw entry (with its quote, if any)."""

    hash: str
    url: str
    quote: str = ""
    chunk: int | None = None
    entry: Entry | None = None  # None: it does not resolve in this scope


@dataclass
class FactRow:
    fact: Fact
    support: list[SupportLink] = field(default_factory=list)

    @property
    def first_seq(self) -> int:
        seqs = [s.entry.seq for s in self.support if s.entry is not None]
        return min(seqs) if seqs else 0


def _support_links(fact: Fact, known: dict[str, Entry]) -> list[SupportLink]:
    links = []
    for item in fact.get("support", []):
        digest = str(item.get("entry", ""))
        query: dict[str, Any] = {}
        chunk = item.get("chunk")
        if chunk is None and isinstance(item.get("chunks"), list) and item["chunks"]:
            chunk = item["chunks"][0]
        if isinstance(chunk, int):
            query["chunk"] = chunk
        else:
            chunk = None
        quote = item.get("quote") or ""
        if quote:
            query["quote"] = quote
        url = reverse("journal:entry", args=[display(digest)])
        if query:
            url += "?" + urlencode(query)
        links.append(SupportLink(display(digest), url, quote, chunk, known.get(digest)))
    return links


def _fact_rows(journal: Journal, facts: list[Fact]) -> list[FactRow]:
    hashes = [str(s.get("entry", "")) for f in facts for s in f.get("support", [])]
    known = selectors.entries_by_hash(journal, hashes)
    return [FactRow(f, _support_links(f, known)) for f in facts]


def _scope_kwargs(journal: Journal) -> dict[str, str]:
    return {
        "tenant": journal.session.tenant.slug,
        "session": journal.session.key,
        "lane": journal.lane,
        "branch": journal.branch,
    }


def _fold_number(request: HttpRequest) -> int | None:
    value = request.GET.get("fold", "")
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise Http404("fold must be a number") from None


def _scope_context(request: HttpRequest, journal: Journal) -> dict[str, Any]:
    kwargs = _scope_kwargs(journal)
    return {
        "journal": journal,
        "session": journal.session,
        "tenant": journal.session.tenant,
        "scope_kwargs": kwargs,
        "timeline_url": reverse("journal:timeline", kwargs=kwargs),
        "facts_url": reverse("ledger:facts", kwargs=kwargs),
        "folds_url": reverse("ledger:folds", kwargs=kwargs),
    }


@login_required
def facts(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The ledger state after fold ``?fold=N`` (default: latest), filterable.

    Filters are GET parameters ``category``, ``priority``, ``lifecycle``, ``confidence``
    (unknown values are ignored). An htmx request gets only ``#fact-table``.
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    folds = list(
        Fold.objects.filter(journal=journal)
        .order_by("number")
        .only("id", "journal_id", "number", "kind", "outcome", "seq_start", "seq_end", "created_at")
    )
    number = _fold_number(request)
    selected: Fold | None = folds[-1] if folds else None
    if number is not None:
        selected = next((f for f in folds if f.number == number), None)
        if selected is None:
            raise Http404("no such fold")
    state = ledger_state(journal, selected) if selected else {"facts": {}}
    all_facts: list[Fact] = list(state.get("facts", {}).values())
    chosen = {
        name: request.GET.get(name, "")
        for name, allowed in FILTERS.items()
        if request.GET.get(name, "") in allowed
    }
    shown = [
        f
        for f in all_facts
        if all(f.get(k, "active" if k == "lifecycle" else "") == v for k, v in chosen.items())
    ]
    rows = _fact_rows(journal, shown)
    rows.sort(
        key=lambda r: (priority_rank(r.fact.get("priority", "")), r.first_seq, r.fact.get("id", ""))
    )
    kwargs = _scope_kwargs(journal)
    permalink_query = {**chosen, **({"fold": selected.number} if selected else {})}
    context = {
        **_scope_context(request, journal),
        "folds": folds,
        "selected": selected,
        "latest": folds[-1] if folds else None,
        "rows": rows,
        "total": len(all_facts),
        "filters": [
            {"name": name, "choices": allowed, "value": chosen.get(name, "")}
            for name, allowed in FILTERS.items()
        ],
        "chosen": chosen,
        "fallback_notice": FALLBACK_NOTICE,
        "permalink": request.build_absolute_uri(
            reverse("ledger:facts", kwargs=kwargs)
            + ("?" + urlencode(permalink_query) if permalink_query else "")
        ),
    }
    template = "ledger_app/facts.html"
    if request.htmx and not request.htmx.boosted:
        template += "#fact-table"
    return render(request, template, context)


@login_required
def fold_list(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """Every fold of the scope: range, outcome, writer, verifier, counts, tokens."""
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    folds = list(Fold.objects.filter(journal=journal).order_by("number").defer("delta", "state"))
    context = {
        **_scope_context(request, journal),
        "folds": folds,
        "permalink": request.build_absolute_uri(request.path),
    }
    return render(request, "ledger_app/folds.html", context)


@dataclass
class OpRow:
    """One op of a delta with the reducer's verdict on it."""

    index: int
    op: dict[str, Any]
    status: str
    reason: str
    fact_id: str
    support: list[SupportLink] = field(default_factory=list)
    evidence: list[SupportLink] = field(default_factory=list)

    @property
    def fact(self) -> Fact | None:
        fact = self.op.get("fact")
        return fact if isinstance(fact, dict) else None


@login_required
def fold_detail(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str, number: int
) -> HttpResponse:
    """One fold: its manifest and every op of its delta with verdict and reason."""
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    fold = Fold.objects.filter(journal=journal, number=number).first()
    if fold is None:
        raise Http404("no such fold")
    delta = fold.delta_dict
    verdicts = {v["index"]: v for v in delta.get("verdicts", [])}
    ops = [op if isinstance(op, dict) else {"op": repr(op)} for op in delta.get("ops", [])]
    hashes = [
        str(s.get("entry", ""))
        for op in ops
        for s in (op.get("fact") or {}).get("support", [])
        if isinstance(s, dict)
    ] + [
        str(h) for op in ops for h in op.get("evidence", []) if isinstance(op.get("evidence"), list)
    ]
    known = selectors.entries_by_hash(journal, hashes)
    rows = []
    for i, op in enumerate(ops):
        v = verdicts.get(i, {})
        fact = op.get("fact") if isinstance(op.get("fact"), dict) else None
        evidence = op.get("evidence") if isinstance(op.get("evidence"), list) else []
        rows.append(
            OpRow(
                index=i,
                op=op,
                status=v.get("status", "unknown"),
                reason=v.get("reason", ""),
                fact_id=v.get("fact_id", "") or (fact or {}).get("id", "") or str(op.get("id", "")),
                support=_support_links(fact, known) if fact else [],
                evidence=_support_links({"support": [{"entry": h} for h in evidence]}, known),
            )
        )
    counts = {s: sum(1 for r in rows if r.status == s) for s in ("accepted", "rejected", "pending")}
    neighbours = dict(
        Fold.objects.filter(journal=journal, number__in=[number - 1, number + 1]).values_list(
            "number", "number"
        )
    )
    kwargs = _scope_kwargs(journal)
    context = {
        **_scope_context(request, journal),
        "fold": fold,
        "manifest": json.dumps(fold.manifest, indent=2, ensure_ascii=False, sort_keys=True),
        "writer_label": (fold.manifest.get("writer") or {}).get("label", "")
        if isinstance(fold.manifest.get("writer"), dict)
        else "",
        "note": fold.manifest.get("note", ""),
        "rows": rows,
        "counts": counts,
        "previous_number": neighbours.get(number - 1),
        "next_number": neighbours.get(number + 1),
        "fallback_notice": FALLBACK_NOTICE,
        "permalink": request.build_absolute_uri(
            reverse("ledger:fold", kwargs={**kwargs, "number": fold.number})
        ),
    }
    return render(request, "ledger_app/fold.html", context)
