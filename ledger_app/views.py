"""Operator UI pages of the ledger (DESIGN.md section 8): facts at any fold, fold history,
the diff between two folds, the verifier's verdicts of a fold, the three context views and a
fold's invariants, the P0 retirement review queue, the session export.

Thin function views. The scope is resolved by :mod:`journal_app.selectors` (tenant filter,
``Http404``); states are read (parsed once per process, shared, never edited) with
:func:`ledger_app.selectors.parsed_state`;
a review goes through :func:`audit_app.services.retirement_decide` (permission checked
there and in :func:`ledger_app.services.ledger_review`, never by hiding a form).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from audit_app.models import AuditEvent, Comment
from audit_app.roles import EXPORT_PERMISSION, REVIEW_PERMISSION, tenant_role
from audit_app.services import export_record, retirement_decide
from journal_app import selectors
from journal_app.hashing import display
from journal_app.models import Entry, Journal, Membership
from journal_app.views import HtmxHttpRequest, scope_kwargs
from ledger_app import selectors as ledger_selectors
from ledger_app.context_service import ContextError, context_preview, fold_invariants
from ledger_app.diff import state_diff
from ledger_app.export import session_export
from ledger_app.facts import CATEGORIES, CONFIDENCES, LIFECYCLES, PRIORITIES, Fact, priority_rank
from ledger_app.filters import (
    FACT_FIELDS,
    FilterError,
    describe,
    error_parts,
    filter_facts,
    parse_facts,
)
from ledger_app.models import Fold, FoldAttempt, Proposal, RetirementRequest, Verdict
from ledger_app.services import FALLBACK_NOTE, ReviewError, ReviewForbidden

FILTERS: dict[str, tuple[str, ...]] = {
    "category": CATEGORIES,
    "priority": PRIORITIES,
    "lifecycle": LIFECYCLES,
    "confidence": CONFIDENCES,
}
FALLBACK_NOTICE = "mechanical facts only: " + FALLBACK_NOTE
FACTS_PER_PAGE = 100
FOLDS_PER_PAGE = 50
DIFF_PER_PAGE = 100
REVIEWS_PER_PAGE = 25


def _partial(request: HttpRequest, template: str, region: str) -> str:
    htmx = getattr(request, "htmx", None)
    return f"{template}#{region}" if htmx and not htmx.boosted else template


def _is_htmx(request: HttpRequest) -> bool:
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.boosted


def fact_dom_id(fact_id: str) -> str:
    """A stable HTML id for a fact (fact ids hold ``:`` and other characters ids avoid)."""
    return "fact-" + hashlib.sha256(fact_id.encode("utf-8")).hexdigest()[:12]


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
    comments: int = 0
    url: str = ""

    @property
    def first_seq(self) -> int:
        seqs = [s.entry.seq for s in self.support if s.entry is not None]
        return min(seqs) if seqs else 0

    @property
    def dom_id(self) -> str:
        return fact_dom_id(str(self.fact.get("id", "")))


def _support_links(fact: Fact, known: dict[str, Entry]) -> list[SupportLink]:
    links = []
    for item in fact.get("support", []):
        if not isinstance(item, dict):
            continue
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
        if chunk is not None and not quote:
            url += f"#chunk-{chunk}"
        elif quote:
            url += "#quote"
        links.append(SupportLink(display(digest), url, quote, chunk, known.get(digest)))
    return links


def _known(journal: Journal, facts: list[Fact]) -> dict[str, Entry]:
    hashes = [
        str(s.get("entry", "")) for f in facts for s in f.get("support", []) if isinstance(s, dict)
    ]
    return selectors.entries_by_hash(journal, hashes)


def _fact_rows(journal: Journal, facts: list[Fact]) -> list[FactRow]:
    known = _known(journal, facts)
    return [FactRow(f, _support_links(f, known)) for f in facts]


def _fold_number(request: HttpRequest) -> int | None:
    value = request.GET.get("fold", "")
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise Http404("fold must be a number") from None


def _scope_context(request: HttpRequest, journal: Journal) -> dict[str, Any]:
    kwargs = scope_kwargs(journal)
    return {
        "journal": journal,
        "session": journal.session,
        "tenant": journal.session.tenant,
        "scope_kwargs": kwargs,
        "timeline_url": reverse("journal:timeline", kwargs=kwargs),
        "facts_url": reverse("ledger:facts", kwargs=kwargs),
        "folds_url": reverse("ledger:folds", kwargs=kwargs),
        "comment_url": reverse("journal:fact_comment", kwargs=kwargs),
    }


# Facts ------------------------------------------------------------------------------------


@login_required
def facts(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The ledger state after fold ``?fold=N`` (default: latest), filterable, 100 per page.

    Filters are GET parameters ``category``, ``priority``, ``lifecycle``, ``confidence``
    (unknown values are ignored) and ``q``, a filter expression
    (:data:`ledger_app.filters.FACT_FIELDS`; a bad one is shown with its position and
    filters nothing). An htmx request gets only ``#fact-table``.
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    folds = list(
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
    number = _fold_number(request)
    selected: Fold | None = folds[-1] if folds else None
    if number is not None:
        selected = next((f for f in folds if f.number == number), None)
        if selected is None:
            raise Http404("no such fold")
    state = ledger_selectors.parsed_state(selected) if selected else {"facts": {}}
    all_facts: list[Fact] = list(state.get("facts", {}).values())
    chosen = {
        name: request.GET.get(name, "")
        for name, allowed in FILTERS.items()
        if request.GET.get(name, "") in allowed
    }
    q = request.GET.get("q", "").strip()
    error: FilterError | None = None
    shown = [
        f
        for f in all_facts
        if all(f.get(k, "active" if k == "lifecycle" else "") == v for k, v in chosen.items())
    ]
    if q:
        try:
            shown = filter_facts(shown, parse_facts(q))
        except FilterError as exc:
            error, shown = exc, []
    shown.sort(key=lambda f: (priority_rank(f.get("priority", "")), f.get("id", "")))
    page = Paginator(shown, FACTS_PER_PAGE).get_page(request.GET.get("page") or "1")
    rows = _fact_rows(journal, list(page.object_list))
    rows.sort(
        key=lambda r: (priority_rank(r.fact.get("priority", "")), r.first_seq, r.fact.get("id", ""))
    )
    counts = selectors.comment_counts(journal=journal)
    fact_base = reverse("ledger:fact", kwargs={**scope_kwargs(journal), "fact_id": "_"})[:-2]
    for r in rows:
        fact_id = str(r.fact.get("id", ""))
        r.comments = counts.get(fact_id, 0)
        r.url = fact_base + quote(fact_id, safe=":@!$&'()*+,;=-._~") + "/"
    kwargs = scope_kwargs(journal)
    permalink_query = {
        **chosen,
        **({"q": q} if q else {}),
        **({"fold": selected.number} if selected else {}),
    }
    context = {
        **_scope_context(request, journal),
        "folds": folds,
        "selected": selected,
        "latest": folds[-1] if folds else None,
        "rows": rows,
        "page": page,
        "matched": len(shown),
        "total": len(all_facts),
        "filters": [
            {"name": name, "choices": allowed, "value": chosen.get(name, "")}
            for name, allowed in FILTERS.items()
        ],
        "chosen": chosen,
        "q": q,
        "error": error,
        "error_parts": error_parts(q, error) if error else None,
        "fields": describe(FACT_FIELDS),
        "fallback_notice": FALLBACK_NOTICE,
        "here": request.get_full_path(),
        "permalink": request.build_absolute_uri(
            reverse("ledger:facts", kwargs=kwargs)
            + ("?" + urlencode(permalink_query) if permalink_query else "")
        ),
    }
    return render(request, _partial(request, "ledger_app/facts.html", "fact-table"), context)


@dataclass
class FactEvent:
    """One op of a fold's delta about a fact, with the reducer's verdict."""

    fold: int
    kind: str
    op: dict[str, Any]
    status: str
    reason: str


def _fact_history(journal: Journal, fact_id: str) -> list[FactEvent]:
    key = json.dumps(fact_id, ensure_ascii=False)
    events = []
    for number, kind, delta in (
        Fold.objects.filter(journal=journal, delta__contains=key)
        .order_by("number")
        .values_list("number", "kind", "delta")
    ):
        parsed = json.loads(delta)
        verdicts = {v.get("index"): v for v in parsed.get("verdicts", []) if isinstance(v, dict)}
        for i, op in enumerate(parsed.get("ops", [])):
            if not isinstance(op, dict):
                continue
            fact = op.get("fact") if isinstance(op.get("fact"), dict) else {}
            if fact_id not in (op.get("id"), fact.get("id")):
                continue
            v = verdicts.get(i, {})
            events.append(
                FactEvent(number, kind, op, v.get("status", "unknown"), v.get("reason", ""))
            )
    return events


@login_required
def fact_detail(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str, fact_id: str
) -> HttpResponse:
    """One fact: its version after ``?fold=N`` (default latest), support, history (every op
    of every delta about it, with verdicts), retirement requests, and comments."""
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    folds = list(
        Fold.objects.filter(journal=journal).order_by("number").only("id", "number", "state_hash")
    )
    number = _fold_number(request)
    selected = folds[-1] if folds else None
    if number is not None:
        selected = next((f for f in folds if f.number == number), None)
    if selected is None:
        raise Http404("no such fold")
    fact = ledger_selectors.parsed_state(selected).get("facts", {}).get(fact_id)
    history = _fact_history(journal, fact_id)
    if fact is None and not history:
        raise Http404("no such fact in this ledger")
    support = _support_links(fact, _known(journal, [fact])) if fact else []
    here = request.get_full_path()
    context = {
        **_scope_context(request, journal),
        "fact_id": fact_id,
        "fact": fact,
        "selected": selected,
        "support": support,
        "history": history,
        "retirements": list(
            RetirementRequest.objects.filter(journal=journal, fact_id=fact_id)
            .select_related("reviewer")
            .order_by("pk")
        ),
        "comments": list(
            Comment.objects.filter(journal=journal, fact_id=fact_id).select_related("author")
        ),
        "dom_id": fact_dom_id(fact_id),
        "here": here,
        "open": True,
        "permalink": request.build_absolute_uri(here),
    }
    return render(request, "ledger_app/fact.html", context)


# Folds ------------------------------------------------------------------------------------


@login_required
def fold_list(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """Every fold of the scope, 50 per page: range, outcome, writer, verifier, counts,
    tokens; and a form comparing any two folds."""
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    folds = ledger_selectors.fold_rows(journal)
    page = Paginator(folds, FOLDS_PER_PAGE).get_page(request.GET.get("page") or "1")
    numbers = list(
        Fold.objects.filter(journal=journal).order_by("number").values_list("number", flat=True)
    )
    context = {
        **_scope_context(request, journal),
        "folds": list(page.object_list),
        "page": page,
        "numbers": numbers,
        "compare_url": reverse("ledger:fold_compare", kwargs=scope_kwargs(journal)),
        "permalink": request.build_absolute_uri(request.get_full_path()),
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
    review_pk: int | None = None  # a retire op's request in the review queue

    @property
    def fact(self) -> Fact | None:
        fact = self.op.get("fact")
        return fact if isinstance(fact, dict) else None


def _op_rows(journal: Journal, delta: dict[str, Any]) -> list[OpRow]:
    """Every op of ``delta`` with the reducer's verdict and its support/evidence as links
    (one query for all the cited entries)."""
    verdicts = {v.get("index"): v for v in delta.get("verdicts", []) if isinstance(v, dict)}
    ops = [op if isinstance(op, dict) else {"op": repr(op)} for op in delta.get("ops", [])]
    facts_in_ops = [op["fact"] for op in ops if isinstance(op.get("fact"), dict)]
    evidence_hashes = [
        str(h) for op in ops if isinstance(op.get("evidence"), list) for h in op["evidence"]
    ]
    known = _known(journal, [*facts_in_ops, {"support": [{"entry": h} for h in evidence_hashes]}])
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
    return rows


@login_required
def fold_detail(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str, number: int
) -> HttpResponse:
    """One fold: its manifest and every op of its delta with verdict and reason.

    The verifier's view of today: each proposed fact, its evidence, the reducer's verdict
    and reason (rejections first in the summary). Verdicts of a model verifier, once stored
    in the delta's ``verdicts``, show here the same way.
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    fold = ledger_selectors.fold_for_journal(journal, number)
    rows = _op_rows(journal, fold.delta_dict)
    counts = {s: sum(1 for r in rows if r.status == s) for s in ("accepted", "rejected", "pending")}
    reviews = dict(fold.retirements_requested.values_list("fact_id", "pk"))
    for r in rows:
        r.review_pk = reviews.get(r.fact_id) if r.op.get("op") == "retire" else None
    neighbours = set(
        Fold.objects.filter(journal=journal, number__in=[number - 1, number + 1]).values_list(
            "number", flat=True
        )
    )
    kwargs = scope_kwargs(journal)
    writer = fold.manifest.get("writer")
    context = {
        **_scope_context(request, journal),
        "fold": fold,
        "manifest": ledger_selectors.manifest_for_display(fold.manifest),
        "covered_count": (fold.manifest.get("covered") or {}).get("entries")
        if isinstance(fold.manifest.get("covered"), dict)
        else None,
        "writer_label": writer.get("label", "") if isinstance(writer, dict) else "",
        "note": fold.manifest.get("note", ""),
        "rows": rows,
        "rejected": [r for r in rows if r.status == "rejected"],
        "counts": counts,
        "previous_number": number - 1 if number - 1 in neighbours else None,
        "next_number": number + 1 if number + 1 in neighbours else None,
        "fallback_notice": FALLBACK_NOTICE,
        "verifier_url": reverse("ledger:verdicts", kwargs={**kwargs, "number": fold.number}),
        "invariants_url": reverse(
            "ledger:fold_invariants", kwargs={**kwargs, "number": fold.number}
        ),
        "permalink": request.build_absolute_uri(
            reverse("ledger:fold", kwargs={**kwargs, "number": fold.number})
        ),
    }
    return render(request, "ledger_app/fold.html", context)


@login_required
def fold_compare(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The compare form's target: redirect ``?a=N&b=M`` to the diff's permalink."""
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    try:
        a, b = int(request.GET.get("a", "")), int(request.GET.get("b", ""))
    except ValueError:
        messages.error(request, "Pick two folds to compare.")
        return redirect("ledger:folds", **scope_kwargs(journal))
    return redirect("ledger:fold_diff", **scope_kwargs(journal), a=a, b=b)


@login_required
def fold_diff(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str, a: int, b: int
) -> HttpResponse:
    """The ledger's difference from the state after fold ``a`` to the state after fold ``b``:
    facts added, removed (evicted) and changed (field by field), 100 per page. Fold 0 is
    the empty ledger before the first fold."""
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    folds = {
        f.number: f
        for f in Fold.objects.filter(journal=journal, number__in=[a, b]).only(
            "id", "journal_id", "number", "kind", "outcome", "state_hash"
        )
    }
    states = {}
    for n in (a, b):
        if n == 0:
            states[n] = {"facts": {}}
        elif n in folds:
            states[n] = ledger_selectors.parsed_state(folds[n])
        else:
            raise Http404(f"no fold {n}")
    diff = state_diff(states[a], states[b])
    page = Paginator(diff.changes, DIFF_PER_PAGE).get_page(request.GET.get("page") or "1")
    changes = list(page.object_list)
    known = _known(journal, [c.fact for c in changes])
    links = {c.fact_id: _support_links(c.fact, known) for c in changes}
    rows = [
        {"change": c, "support": links[c.fact_id], "dom_id": fact_dom_id(c.fact_id)}
        for c in changes
    ]
    kwargs = scope_kwargs(journal)
    numbers = list(
        Fold.objects.filter(journal=journal).order_by("number").values_list("number", flat=True)
    )
    context = {
        **_scope_context(request, journal),
        "a": a,
        "b": b,
        "fold_a": folds.get(a),
        "fold_b": folds.get(b),
        "diff": diff,
        "counts": diff.counts,
        "rows": rows,
        "page": page,
        "numbers": numbers,
        "compare_url": reverse("ledger:fold_compare", kwargs=kwargs),
        "swap_url": reverse("ledger:fold_diff", kwargs={**kwargs, "a": b, "b": a}),
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(request, "ledger_app/diff.html", context)


# Verifier verdicts -------------------------------------------------------------------------

#: who gave a verdict, in the operator's words (ledger_app.models.Verdict.judge)
JUDGES = {
    "verifier": "verifier model",
    "rules": "rules (the verifier's rubric applied mechanically)",
    "reducer": "reducer (a dry run of its rules)",
    "parser": "parser (the item could not become an op)",
}
ROUNDS = {0: "proposal", 1: "repair (the one repair, told why)", 2: "fallback"}
RAW_SHOWN = 20_000  # characters of a model's raw reply printed on the page


@dataclass
class JudgeRow:
    """One judge's two verdicts (entailment, temporal) on one proposed item."""

    verdict: Verdict
    label: str


@dataclass
class ItemRow:
    """One proposed item of a writer answer: claim, cited evidence, every judge's verdicts."""

    key: str
    op: str
    claim: str
    accepted: bool
    support: list[SupportLink] = field(default_factory=list)
    judges: list[JudgeRow] = field(default_factory=list)


@dataclass
class ProposalRow:
    proposal: Proposal
    label: str
    items: list[ItemRow] = field(default_factory=list)
    raw: str = ""
    raw_clipped: bool = False


@dataclass
class AttemptRow:
    attempt: FoldAttempt
    proposals: list[ProposalRow] = field(default_factory=list)

    @property
    def note(self) -> str:
        return str(self.attempt.record.get("note", "") or "")

    @property
    def fallback_reason(self) -> str:
        return str(self.attempt.record.get("fallback_reason", "") or "")

    @property
    def calls(self) -> list[dict[str, Any]]:
        calls = self.attempt.record.get("model_calls")
        return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []

    @property
    def usage(self) -> dict[str, Any]:
        usage = self.attempt.record.get("model_usage")
        return usage if isinstance(usage, dict) else {}


def _attempt_rows(journal: Journal, fold: Fold) -> list[AttemptRow]:
    """Every attempt at ``fold`` (the one that stored it and failed ones before it), with
    proposals, items and verdicts: four queries whatever the number of items."""
    attempts = list(
        FoldAttempt.objects.filter(journal=journal, number=fold.number)
        .filter(Q(fold=fold) | Q(fold__isnull=True))
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
    facts: dict[tuple[int, str], Fact] = {}
    for p in proposals:
        for op in p.ops if isinstance(p.ops, list) else []:
            fact = op.get("fact") if isinstance(op, dict) else None
            if isinstance(fact, dict):
                facts[(p.pk, str(fact.get("id", "")))] = fact
    hashes = [str(h) for v in verdicts for h in (v.support if isinstance(v.support, list) else [])]
    hashes += [
        str(s.get("entry", ""))
        for f in facts.values()
        for s in f.get("support", [])
        if isinstance(s, dict)
    ]
    known = selectors.entries_by_hash(journal, hashes)
    items: dict[int, dict[str, ItemRow]] = {}
    for v in verdicts:
        row = items.setdefault(v.proposal_id, {}).get(v.key)
        if row is None:
            fact = facts.get((v.proposal_id, v.key))
            cited = fact if fact and fact.get("support") else None
            support = cited or {"support": [{"entry": h} for h in v.support or []]}
            row = ItemRow(v.key, v.op, v.claim, v.item_accepted, _support_links(support, known))
            items[v.proposal_id][v.key] = row
        row.judges.append(JudgeRow(v, JUDGES.get(v.judge, v.judge)))
    by_attempt: dict[int, list[ProposalRow]] = {}
    for p in proposals:
        by_attempt.setdefault(p.attempt_id, []).append(
            ProposalRow(
                p,
                ROUNDS.get(p.round, f"round {p.round}") if p.kind != "offline" else "offline",
                list(items.get(p.pk, {}).values()),
                p.raw[:RAW_SHOWN],
                len(p.raw) > RAW_SHOWN,
            )
        )
    return [AttemptRow(a, by_attempt.get(a.pk, [])) for a in attempts]


@login_required
def fold_verdicts(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str, number: int
) -> HttpResponse:
    """The verifier page of one fold (DESIGN.md 5.3 and 8, "verifier verdicts and rejections").

    For each :class:`~ledger_app.models.FoldAttempt`: each writer answer (proposal, the one
    repair, the fallback) with each proposed item's claim, cited evidence (links to the raw
    entries, with the quote when there is one) and every judge's two verdicts (entailment and
    temporal) with reasons; the fallback reason and note. Then the reducer's verdicts on the
    fold's delta, rejected ops highlighted: for mechanical folds that is all there is, and
    the page says which writer ran. Bounded queries (no per-item query).
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    fold = ledger_selectors.fold_for_journal(journal, number)
    attempts = _attempt_rows(journal, fold)
    rows = _op_rows(journal, fold.delta_dict)
    writer = fold.manifest.get("writer")
    kwargs = scope_kwargs(journal)
    context = {
        **_scope_context(request, journal),
        "fold": fold,
        "attempts": attempts,
        "judged": any(p.items for a in attempts for p in a.proposals),
        "rows": rows,
        "rejected": [r for r in rows if r.status == "rejected"],
        "writer_label": writer.get("label", "") if isinstance(writer, dict) else "",
        "note": fold.manifest.get("note", ""),
        "fallback_notice": FALLBACK_NOTICE,
        "fold_url": reverse("ledger:fold", kwargs={**kwargs, "number": fold.number}),
        "permalink": request.build_absolute_uri(
            reverse("ledger:verdicts", kwargs={**kwargs, "number": fold.number})
        ),
    }
    return render(request, "ledger_app/verdicts.html", context)


# Context views -----------------------------------------------------------------------------

#: defaults of the context page's budgets (tokens); the API's callers give their own
DEFAULT_WORKING_BUDGET = 32_000
DEFAULT_HARD_LIMIT = 64_000
CONTEXT_FORMATS = ("openai", "anthropic")


def _int_param(request: HttpRequest, name: str, default: int | None) -> int | None:
    value = request.GET.get(name, "").strip().replace(",", "").replace("_", "")
    if value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name}: {value!r} is not a whole number of tokens") from None
    if number < 0:
        raise ValueError(f"{name}: {number} is negative")
    return number


def _parts(content: Any) -> list[dict[str, str]]:
    """A message's content as labelled text parts (OpenAI strings, Anthropic blocks)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"label": "", "text": content}]
    if not isinstance(content, list):
        return [{"label": "", "text": json.dumps(content, ensure_ascii=False, indent=1)}]
    parts = []
    for block in content:
        if not isinstance(block, dict):
            parts.append({"label": "", "text": str(block)})
        elif block.get("type") == "text":
            parts.append({"label": "", "text": str(block.get("text", ""))})
        elif block.get("type") == "tool_use":
            parts.append(
                {
                    "label": f"tool use {block.get('id', '')}: {block.get('name', '')}",
                    "text": json.dumps(block.get("input"), ensure_ascii=False),
                }
            )
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            text = inner if isinstance(inner, str) else json.dumps(inner, ensure_ascii=False)
            error = " (error)" if block.get("is_error") else ""
            parts.append(
                {"label": f"tool result {block.get('tool_use_id', '')}{error}", "text": text}
            )
        else:
            parts.append(
                {"label": str(block.get("type", "")), "text": json.dumps(block, ensure_ascii=False)}
            )
    return parts


def _model_rows(view: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The model view's messages for display: role, tool call id, parts."""
    if not view:
        return []
    rows = []
    if view.get("system"):
        rows.append({"role": "system", "ref": "", "parts": _parts(view["system"])})
    for m in view.get("messages", []):
        if not isinstance(m, dict):
            continue
        parts = _parts(m.get("content"))
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            parts.append(
                {
                    "label": f"tool call {call.get('id', '')}: {fn.get('name', '')}",
                    "text": str(fn.get("arguments", "")),
                }
            )
        rows.append({"role": m.get("role", ""), "ref": m.get("tool_call_id", ""), "parts": parts})
    return rows


def _report_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each invariant of a validation report with its problems (none: ok)."""
    problems = [p for p in report.get("problems", []) if isinstance(p, dict)]
    checks = list(report.get("checks", []))
    checks += sorted({p.get("check", "") for p in problems} - set(checks))
    return [{"check": c, "problems": [p for p in problems if p.get("check") == c]} for c in checks]


def _reports(validation: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": name, "report": report, "rows": _report_rows(report)}
        for name, report in validation.items()
        if isinstance(report, dict)
    ]


@login_required
def context_views(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The three context views of one state side by side (DESIGN.md 6 and 8).

    GET parameters (tokens): ``working_budget`` (default 32,000), ``hard_limit`` (64,000),
    ``tail_tokens`` (default: the builder's, a quarter of the budget), ``revision`` (default:
    the head) and ``format`` (``openai`` or ``anthropic``). Built by
    :func:`ledger_app.context_service.context_preview`, which writes nothing. Shows the model
    view, the frontend view, the debug trace (each compaction decision, reason, token effect)
    and the validation of each invariant. A bad parameter answers 400 with the form and the
    message; an htmx request gets only ``#context-views``.
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    form = {
        "working_budget": request.GET.get("working_budget", "") or str(DEFAULT_WORKING_BUDGET),
        "hard_limit": request.GET.get("hard_limit", "") or str(DEFAULT_HARD_LIMIT),
        "tail_tokens": request.GET.get("tail_tokens", ""),
        "revision": request.GET.get("revision", ""),
        "format": request.GET.get("format", "") or "openai",
    }
    error = ""
    result = None
    try:
        if form["format"] not in CONTEXT_FORMATS:
            raise ValueError(
                f"format: {form['format']!r} is not one of {', '.join(CONTEXT_FORMATS)}"
            )
        working = _int_param(request, "working_budget", DEFAULT_WORKING_BUDGET)
        hard = _int_param(request, "hard_limit", DEFAULT_HARD_LIMIT)
        tail = _int_param(request, "tail_tokens", None)
        revision = _int_param(request, "revision", None)
        budgets: dict[str, Any] = {"working_budget": working, "hard_limit": hard}
        if tail is not None:
            budgets["tail_tokens"] = tail
        result = context_preview(
            journal=journal, revision=revision, target_format=form["format"], **budgets
        )
    except (ValueError, ContextError) as exc:
        error = str(exc)
    context = {
        **_scope_context(request, journal),
        "form": form,
        "formats": CONTEXT_FORMATS,
        "error": error,
        "result": result,
        "model_rows": _model_rows(result.model_view) if result else [],
        "frontend": result.frontend_view if result else {},
        "trace": result.debug_trace if result else {},
        "reports": _reports(result.validation) if result else [],
        "context_url": reverse("ledger:context", kwargs=scope_kwargs(journal)),
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(
        request,
        _partial(request, "ledger_app/context.html", "context-views"),
        context,
        status=400 if error else 200,
    )


@login_required
def fold_invariants_panel(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str, number: int
) -> HttpResponse:
    """The invariants of the context as of one fold (:func:`fold_invariants`, read-only).

    The fold page loads it with htmx (``#invariants``) so the fold page itself stays a
    fixed number of queries; without JavaScript its link opens this page whole.
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    fold = ledger_selectors.fold_for_journal(journal, number)
    error = ""
    panel: dict[str, Any] = {}
    try:
        panel = fold_invariants(fold=fold)
    except ContextError as exc:
        error = str(exc)
    kwargs = scope_kwargs(journal)
    context = {
        **_scope_context(request, journal),
        "fold": fold,
        "panel": panel,
        "error": error,
        "reports": _reports({k: panel[k] for k in ("model", "frontend") if k in panel}),
        "fold_url": reverse("ledger:fold", kwargs={**kwargs, "number": fold.number}),
        "permalink": request.build_absolute_uri(
            reverse("ledger:fold_invariants", kwargs={**kwargs, "number": fold.number})
        ),
    }
    return render(request, _partial(request, "ledger_app/invariants.html", "invariants"), context)


# Review queue -----------------------------------------------------------------------------


@login_required
def review_list(request: HttpRequest) -> HttpResponse:
    """The P0 retirement review queue of the user's tenants: pending first, 25 per page.

    Every member sees the queue; only reviewers and admins can decide (enforced on POST).
    """
    tenant = request.GET.get("tenant", "")
    status = request.GET.get("status", "pending")
    if status not in (*RetirementRequest.Status.values, "all"):
        status = "pending"
    qs = ledger_selectors.retirements_for_user(request.user, tenant=tenant, status=status)
    page = Paginator(qs, REVIEWS_PER_PAGE).get_page(request.GET.get("page") or "1")
    context = {
        "page": page,
        "requests": list(page.object_list),
        "tenant": tenant,
        "status": status,
        "statuses": [*RetirementRequest.Status.values, "all"],
        "tenants": list(selectors.tenants_for_user(request.user).values_list("slug", flat=True)),
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(request, "ledger_app/reviews.html", context)


def _review_context(request: HttpRequest, req: RetirementRequest) -> dict[str, Any]:
    journal = req.journal
    evidence = [str(h) for h in req.evidence if isinstance(h, str)]
    known = selectors.entries_by_hash(journal, evidence)
    role = tenant_role(request.user, journal.session.tenant_id)
    return {
        **_scope_context(request, journal),
        "req": req,
        "evidence": _support_links({"support": [{"entry": h} for h in evidence]}, known),
        "role": role,
        "may_decide": request.user.has_perm(REVIEW_PERMISSION)
        and role in (Membership.Role.REVIEWER, Membership.Role.ADMIN),
        "fact_url": reverse("ledger:facts", kwargs=scope_kwargs(journal))
        + "?"
        + urlencode({"q": f'id:"{req.fact_id}"'}),
        "events": list(
            AuditEvent.objects.filter(
                tenant_id=journal.session.tenant_id, object_type="retirement", object_id=str(req.pk)
            ).order_by("created_at", "pk")
        ),
        "permalink": request.build_absolute_uri(reverse("ledger:review", args=[req.pk])),
    }


@login_required
@require_http_methods(["GET", "POST"])
def review_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One retirement request; POST ``decision`` (approve/refuse) and ``comment`` decides it.

    The POST is CSRF-protected; an operator's POST answers 403 (the permission lives in
    the service, not in the template). A decision records the user and time on the request,
    a review fold in the ledger and an audit event. After a POST a normal request is
    redirected here (PRG); an htmx one gets the ``#review-decision`` fragment.
    """
    req = ledger_selectors.retirement_for_user(request.user, pk)
    error = ""
    status_code = 200
    if request.method == "POST":
        decision = request.POST.get("decision", "")
        comment = request.POST.get("comment", "")
        try:
            fold = retirement_decide(
                request=req, user=request.user, decision=decision, comment=comment
            )
        except ReviewForbidden as exc:
            if not _is_htmx(request):
                raise PermissionDenied(str(exc)) from exc
            error, status_code = f"Refused (403): {exc}. Nothing was changed.", 403
        except ReviewError as exc:
            error, status_code = str(exc), 400
        else:
            if not _is_htmx(request):
                verb = "approved" if decision == "approve" else "refused"
                messages.success(
                    request,
                    f"Retirement of {req.fact_id} {verb}; review fold {fold.number} recorded.",
                )
                return redirect("ledger:review", pk=req.pk)
            req = ledger_selectors.retirement_for_user(request.user, pk)
    context = {
        **_review_context(request, req),
        "error": error,
        "comment": request.POST.get("comment", "") if error else "",
    }
    return render(
        request,
        _partial(request, "ledger_app/review.html", "review-decision"),
        context,
        status=status_code,
    )


# Export -----------------------------------------------------------------------------------


@login_required
def export(request: HttpRequest, tenant: str, session: str) -> FileResponse:
    """Download the session as JSON Lines (``?lane=``, ``?branch=`` narrow it); logged.

    Needs ``audit_app.export_session`` (every role has it). The file is written to a
    temporary file first, so the audit event records its sha256 before it is sent.
    """
    s = selectors.get_session_for_user(request.user, tenant, session)
    if not request.user.has_perm(EXPORT_PERMISSION):
        raise PermissionDenied("your role may not export sessions")
    lane = request.GET.get("lane", "")
    branch = request.GET.get("branch", "")
    out = tempfile.TemporaryFile()
    summary = session_export(session=s, out=out, lane=lane, branch=branch)
    export_record(
        user=request.user, session=s, details={**summary.to_dict(), "lane": lane, "branch": branch}
    )
    out.seek(0)
    name = s.key + (f"-{lane}" if lane else "") + (f"-{branch}" if branch else "") + ".jsonl"
    return FileResponse(out, as_attachment=True, filename=name, content_type="application/x-ndjson")
