"""Tenant-filtered reads for the operator UI (DESIGN.md sections 8 and 9: tenant isolation).

Every read a view makes of a tenant's data goes through here, so the membership filter is
written once. A user sees the tenants they hold a :class:`Membership` of; superusers see
all. Anything outside that answers ``Http404`` (never 403: another tenant's objects do not
exist for this user).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.cache import cache
from django.db.models import (
    F,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.http import Http404

from journal_app.hashing import strip_prefix
from journal_app.models import Artifact, Entry, Journal, Membership, Session, Tenant
from journal_app.pricing import (
    CostTotal,
    Price,
    cost_add,
    cost_sum,
    entry_cost,
    parse_price_table,
    source_model,
)
from journal_app.rounds import Round, group_rounds
from journal_app.times import entry_time as entry_time  # re-exported: views, ledger
from journal_app.waterfall import Step, Waterfall, waterfall

User = AbstractBaseUser | AnonymousUser

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def tenants_for_user(user: User) -> QuerySet[Tenant]:
    """The tenants ``user`` may read: all for a superuser, else those of their memberships."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    if user.is_superuser:
        return Tenant.objects.all()
    return Tenant.objects.filter(membership__user=user)


def journal_start(journal: Journal) -> datetime | None:
    """The source's time of the journal's first timed entry (looks at the first 20 entries),
    the origin of the timeline's relative times; ``None`` when the source has no times."""
    for meta in (
        Entry.objects.filter(journal=journal).order_by("seq").values_list("meta", flat=True)[:20]
    ):
        at = entry_time(json.loads(meta or "{}"))
        if at is not None:
            return at
    return None


def entry_started(meta: dict[str, Any]) -> datetime | None:
    """When the work an entry records began: the earliest of its own time
    (:func:`entry_time`) and the time of the ``turn_context`` attached to it. Codex writes a
    ``turn_context`` record before every model call and the call's items (reasoning, tool
    call, output) afterwards under one timestamp; the importer attaches that record to the
    call's first entry (:mod:`journal_app.formats.codex`), so it dates the round's start.
    ``None`` when neither is known."""
    times = [entry_time(meta)]
    context = meta.get("turn_context")
    if isinstance(context, dict):
        times.append(entry_time(context))
    known = [t for t in times if t is not None]
    return min(known) if known else None


def token_buckets(journal: Journal, buckets: int = 300) -> list[tuple[int, int]]:
    """``(last_seq, tokens)`` for about ``buckets`` equal seq ranges of the journal.

    One grouped query; the database sums ``token_count`` per range, so a journal of
    100,000 entries still sends a few hundred rows.
    """
    size = max(1, -(-journal.head_seq // buckets))
    rows = (
        Entry.objects.filter(journal=journal)
        .annotate(bucket=(F("seq") - 1) / Value(size))
        .values("bucket")
        .annotate(last=Max("seq"), tokens=Sum("token_count"))
        .order_by("bucket")
        .values_list("last", "tokens")
    )
    return [(int(last), int(tokens or 0)) for last, tokens in rows]


def entry_filter(query: Any) -> Q:
    """A database filter for a parsed entry expression (:func:`ledger_app.filters.parse_entries`).

    ``text`` searches the raw body (canonical JSON text) case-insensitively, ``tool`` and
    ``call`` the tool name and call id, ``hash`` the entry hash prefix.
    """
    out = Q()
    for t in query.terms:
        if t.field in ("kind", "role"):
            cond = Q(**{f"{t.field}__in": list(t.values)})
        elif t.field == "text":
            cond = Q(body__icontains=t.values[0])
        elif t.field == "tool":
            cond = Q(tool_name__icontains=t.values[0])
        elif t.field == "call":
            cond = Q(tool_call_id__icontains=t.values[0])
        elif t.field in ("error", "derived"):
            cond = Q(**{"is_error" if t.field == "error" else "derived": t.values[0]})
        elif t.field == "hash":
            cond = Q()
            for prefix in t.values:
                cond |= Q(entry_hash__startswith=prefix)
        elif t.field in ("seq", "tokens"):
            column = "seq" if t.field == "seq" else "token_count"
            if t.op == "range":
                cond = Q(**{f"{column}__gte": t.values[0], f"{column}__lte": t.values[1]})
            else:
                lookup = {"eq": "exact", "lt": "lt", "le": "lte", "gt": "gt", "ge": "gte"}[t.op]
                cond = Q(**{f"{column}__{lookup}": t.values[0]})
        else:
            raise ValueError(f"no entry filter for field {t.field!r}")
        out &= ~cond if t.negate else cond
    return out


def get_session_for_user(user: User, tenant_slug: str, key: str) -> Session:
    """The session ``tenant_slug/key`` if ``user`` may read it; ``Http404`` otherwise."""
    session = (
        Session.objects.filter(tenant__in=tenants_for_user(user), tenant__slug=tenant_slug, key=key)
        .select_related("tenant")
        .first()
    )
    if session is None:
        raise Http404("no such session")
    return session


def get_journal_for_user(user: User, tenant_slug: str, key: str, lane: str, branch: str) -> Journal:
    """The journal of scope ``tenant/key/lane/branch`` if ``user`` may read it; else ``Http404``."""
    journal = (
        Journal.objects.filter(
            session__tenant__in=tenants_for_user(user),
            session__tenant__slug=tenant_slug,
            session__key=key,
            lane=lane,
            branch=branch,
        )
        .select_related("session__tenant")
        .first()
    )
    if journal is None:
        raise Http404("no such journal")
    return journal


def parse_hash(value: str) -> str:
    """``sha256:<hex>`` or ``<hex>`` to bare lowercase hex; ``Http404`` if it is not 64 hex digits."""
    digest = strip_prefix(value)
    if not _HEX64.match(digest):
        raise Http404("not a sha256 digest")
    return digest


def entry_for_user(user: User, entry_hash: str) -> Entry:
    """The entry with ``entry_hash`` (either spelling) if ``user`` may read it; else ``Http404``."""
    entry = (
        Entry.objects.filter(
            journal__session__tenant__in=tenants_for_user(user), entry_hash=parse_hash(entry_hash)
        )
        .select_related("journal__session__tenant", "artifact__tenant")
        .first()
    )
    if entry is None:
        raise Http404("no such entry")
    return entry


def artifact_for_user(user: User, tenant_slug: str, content_hash: str) -> Artifact:
    """The artifact ``tenant/content_hash`` if ``user`` may read it; else ``Http404``."""
    artifact = (
        Artifact.objects.filter(
            tenant__in=tenants_for_user(user),
            tenant__slug=tenant_slug,
            content_hash=parse_hash(content_hash),
        )
        .select_related("tenant")
        .first()
    )
    if artifact is None:
        raise Http404("no such artifact")
    return artifact


def neighbour_hashes(entry: Entry) -> tuple[str | None, str | None]:
    """``(previous, next)`` entry hashes in the entry's journal (``None`` at either end)."""
    rows = dict(
        Entry.objects.filter(
            journal_id=entry.journal_id, seq__in=[entry.seq - 1, entry.seq + 1]
        ).values_list("seq", "entry_hash")
    )
    return rows.get(entry.seq - 1), rows.get(entry.seq + 1)


@dataclass(frozen=True)
class _Row:
    seq: int
    kind: str
    role: str
    tool_call_id: str


#: how far the timeline looks before and after a page to find its rounds' edges (entries)
ROUND_WINDOW = 500


def page_rounds(journal: Journal, first_seq: int, last_seq: int) -> list[Round]:
    """The API rounds holding entries ``first_seq``..``last_seq``, grouped from a window.

    Grouping the whole journal costs a read of every row (100,000 rows for a long run); a
    page needs only its neighbourhood. The window starts at the last authoritative message
    at or before the page (it always opens a round, DESIGN.md 4), at most
    :data:`ROUND_WINDOW` entries back, and ends :data:`ROUND_WINDOW` entries after the page
    (or at the head), so a call whose result sits on the next page is not "interrupted".
    Two queries, at most ``100 + 2 * ROUND_WINDOW`` small rows, whatever the journal's size.
    ``Round.index`` counts within the window; ``at_tail`` holds only when the window
    reaches the head. A round longer than the window may be split at its edge.
    """
    anchor = (
        Entry.objects.filter(
            journal=journal,
            kind="message",
            role__in=("system", "developer", "user"),
            seq__lte=first_seq,
            seq__gte=max(1, first_seq - ROUND_WINDOW),
        )
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    start = anchor or max(1, first_seq - ROUND_WINDOW)
    end = last_seq + ROUND_WINDOW
    rows = (
        Entry.objects.filter(journal=journal, seq__gte=start, seq__lte=end)
        .order_by("seq")
        .values_list("seq", "kind", "role", "tool_call_id")
    )
    rounds = group_rounds(_Row(*r) for r in rows)
    if rounds and rounds[-1].last_seq < journal.head_seq:
        rounds[-1].at_tail = False
    return rounds_for_seqs(rounds, range(first_seq, last_seq + 1))


class JournalEntries:
    """A journal's entries as a sequence for :class:`django.core.paginator.Paginator`.

    seq is gapless from 1 (DESIGN.md 4), so the count is the head and a page is a seq range
    read through the ``(journal, seq)`` index: page 500 of a 100,000-entry journal costs the
    same as page 1 (no ``COUNT(*)``, no ``OFFSET`` scan).
    """

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def count(self) -> int:
        return self.journal.head_seq

    def __len__(self) -> int:
        return self.journal.head_seq

    def __getitem__(self, index: slice) -> list[Entry]:
        if not isinstance(index, slice):
            raise TypeError("JournalEntries supports slices only")
        start, stop = index.start or 0, index.stop or self.journal.head_seq
        return list(
            Entry.objects.filter(journal=self.journal, seq__gt=start, seq__lte=stop)
            .select_related("artifact__tenant")
            .order_by("seq")
        )


def unanswered_calls(journal: Journal, call_ids: Sequence[str]) -> set[str]:
    """The tool call ids among ``call_ids`` that have no result in the journal (one query)."""
    if not call_ids:
        return set()
    answered = set(
        Entry.objects.filter(
            journal=journal, kind="tool_result", tool_call_id__in=set(call_ids)
        ).values_list("tool_call_id", flat=True)
    )
    return set(call_ids) - answered


def rounds_for_seqs(rounds: Sequence[Round], seqs: Sequence[int]) -> list[Round]:
    """The rounds holding at least one of ``seqs``, in round order."""
    wanted = set(seqs)
    return [r for r in rounds if wanted.intersection(r.seqs)]


def entries_by_hash(journal: Journal, hashes: Sequence[str]) -> dict[str, Entry]:
    """Entries of ``journal`` among ``hashes`` (hex), keyed by hash; one query, no bodies.

    The query names only the hashes (each a unique-index lookup) and the journal is checked
    on the rows: ``entry_hash`` is unique across journals, so that is the same answer, and
    the planner cannot pick the ``journal_id`` index instead (with stale statistics after a
    bulk load it did: a heap scan of the journal's every entry, 100 ms at 100,000 entries,
    for the 100 support links of a facts page).
    """
    if not hashes:
        return {}
    rows = Entry.objects.filter(entry_hash__in=set(hashes)).only(
        "entry_hash", "seq", "kind", "role", "derived", "journal_id"
    )
    return {e.entry_hash: e for e in rows if e.journal_id == journal.pk}


AUDIT_LOG_PERMISSION = "audit_app.view_audit_log"


def may_read_audit_log(user: User, tenant: Tenant) -> bool:
    """True when ``user`` may read the tenant's audit log: an admin membership and the
    ``audit_app.view_audit_log`` permission (a superuser always), the audit log view's rule,
    so the link is shown only to those it would not refuse. One query for a non-admin."""
    if getattr(user, "is_superuser", False):
        return True
    return _is_admin(user, tenant) and user.has_perm(AUDIT_LOG_PERMISSION)


def _is_admin(user: User, tenant: Tenant) -> bool:
    """Whether ``user`` is an admin member of ``tenant``: one query per user object and
    tenant (remembered on the user, which lives for one request)."""
    memo = user.__dict__.setdefault("_ledgerkeep_admin_of", {})
    if tenant.pk not in memo:
        memo[tenant.pk] = Membership.objects.filter(
            user=user, tenant=tenant, role=Membership.Role.ADMIN
        ).exists()
    return memo[tenant.pk]


def may_export(user: User, tenant: Tenant) -> bool:
    """True when ``user`` may export the tenant's sessions: the ``audit_app.export_session``
    permission and an admin membership (the raw-read role: the export holds stored bytes), a
    superuser always; the export view's rule, so its button is shown only to those it
    would not refuse (fresh-eyes finding)."""
    if getattr(user, "is_superuser", False):
        return True
    return _is_admin(user, tenant) and user.has_perm("audit_app.export_session")


# Cost ----------------------------------------------------------------------------------------


def model_prices() -> dict[str, Price]:
    """The price table of ``settings.LEDGER_MODEL_PRICES`` (parsed at start-up by
    :func:`journal_app.pricing.parse_price_table`); ``{}``: no cost is shown."""
    return parse_price_table(getattr(settings, "LEDGER_MODEL_PRICES", None) or {})


def journal_costs(journal_ids: Sequence[int], prices: Mapping[str, Price]) -> dict[int, CostTotal]:
    """The computed cost of each journal's calls: :func:`journal_app.pricing.cost_add` over
    its entries with provider usage, a :class:`~journal_app.pricing.CostTotal` (USD over the
    priced calls, and the count of calls whose model has no price or no name).

    Journals are append-only, so a journal's cost is cached under its head seq (the default
    cache): a later call reads only the journals that grew. Journals without a call are absent
    from the answer. One query over the entries whose metadata names ``usage``.
    """
    if not prices or not journal_ids:
        return {}
    heads = dict(Journal.objects.filter(pk__in=journal_ids).values_list("pk", "head_seq"))
    table_key = repr(sorted(prices.items()))
    keys = {
        jid: f"journal-cost-total:{jid}:{head}:{hash(table_key)}" for jid, head in heads.items()
    }
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
    """The computed cost per tenant over the (filtered) sessions of :func:`sessions_for_user`:
    ``[(tenant slug, CostTotal)]``, costliest first; tenants without a call are left out."""
    listed = list(sessions.order_by().select_related("tenant"))
    by_tenant: dict[str, list[CostTotal]] = {}
    costs = session_costs(listed)
    for s in listed:
        if s.pk in costs:
            by_tenant.setdefault(s.tenant.slug, []).append(costs[s.pk])
    totals = [(slug, cost_sum(t)) for slug, t in by_tenant.items()]
    return sorted(totals, key=lambda kv: -kv[1].usd)


#: entries a waterfall page reads (its spans start among them)
WATERFALL_ENTRIES = 300
#: entries read past a waterfall page to find the results of its last tool calls
WATERFALL_MARGIN = 60


def _usage_int(usage: Any, *keys: str) -> int:
    if not isinstance(usage, dict):
        return 0
    for k in keys:
        v = usage.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return 0


def journal_waterfall(journal: Journal, page: int = 1) -> tuple[Waterfall, int, int]:
    """Page ``page`` (from 1) of the journal's waterfall (:mod:`journal_app.waterfall`): the
    spans starting among :data:`WATERFALL_ENTRIES` entries, with their durations, provider
    tokens and computed cost (:func:`model_prices`).

    Returns:
        ``(waterfall, page, pages)``: the page number clamped to ``1..pages``. Two queries
        (the page's entries with a margin; no count: a journal's head is its entry count).
    """
    pages = max(1, -(-journal.head_seq // WATERFALL_ENTRIES))
    page = min(max(1, page), pages)
    first = (page - 1) * WATERFALL_ENTRIES + 1
    last = first + WATERFALL_ENTRIES - 1
    prices = model_prices()
    rows = (
        Entry.objects.filter(journal=journal, seq__gte=first, seq__lte=last + WATERFALL_MARGIN)
        .order_by("seq")
        .values_list("seq", "kind", "role", "tool_call_id", "tool_name", "meta", "is_error")
    )
    steps = []
    for seq, kind, role, call_id, tool_name, meta_text, is_error in rows:
        meta = json.loads(meta_text or "{}")
        usage = meta.get("usage")
        try:
            cost = entry_cost(prices, meta) if prices else None
        except ValueError:
            cost = None
        at = entry_time(meta)
        started = entry_started(meta)  # the turn_context's time when it is earlier
        steps.append(
            Step(
                seq=seq,
                kind=kind,
                role=role,
                tool_call_id=call_id,
                tool_name=tool_name,
                at=at,
                started=started if started != at else None,
                input_tokens=_usage_int(usage, "input_tokens", "prompt_tokens"),
                output_tokens=_usage_int(usage, "output_tokens", "completion_tokens"),
                cost=cost,
                is_error=is_error,
                model=source_model(meta),
            )
        )
    built = waterfall(steps)
    kept = [s for s in built.spans if s.first_seq <= last]
    if len(kept) != len(built.spans):
        built = waterfall(
            [s for s in steps if s.seq <= max((k.last_seq for k in kept), default=last)]
        )
        built.spans = [s for s in built.spans if s.first_seq <= last]
    return built, page, pages


#: roles that may fold from the page and decide P0 retirements (the review rule's roles)
FOLDING_ROLES = (Membership.Role.REVIEWER, Membership.Role.ADMIN)


def get_journal_with_role(
    user: User, tenant_slug: str, key: str, lane: str, branch: str
) -> tuple[Journal, str | None]:
    """:func:`get_journal_for_user` and the user's role in the journal's tenant (``"admin"``
    for a superuser, ``None`` without a membership), read in the same query.

    Raises:
        Http404: no such journal, or not one of the user's tenants.
    """
    if not user.is_authenticated:
        raise Http404("no such journal")
    role = Membership.objects.filter(user=user, tenant=OuterRef("session__tenant")).values("role")[
        :1
    ]
    journal = (
        Journal.objects.filter(
            session__tenant__in=tenants_for_user(user),
            session__tenant__slug=tenant_slug,
            session__key=key,
            lane=lane,
            branch=branch,
        )
        .select_related("session__tenant")
        .annotate(user_role=Subquery(role))
        .first()
    )
    if journal is None:
        raise Http404("no such journal")
    return journal, (str(Membership.Role.ADMIN) if user.is_superuser else journal.user_role)
