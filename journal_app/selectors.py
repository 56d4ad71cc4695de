"""Tenant-filtered reads for the operator UI (DESIGN.md sections 8 and 9: tenant isolation).

Every read a view makes of a tenant's data goes through here, so the membership filter is
written once. A user sees the tenants they hold a :class:`Membership` of; superusers see
all. Anything outside that answers ``Http404`` (never 403: another tenant's objects do not
exist for this user).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, IntegerField, Max, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import Http404

from journal_app.hashing import strip_prefix
from journal_app.models import Artifact, Entry, Journal, Session, Tenant
from journal_app.rounds import Round, group_rounds

User = AbstractBaseUser | AnonymousUser

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def tenants_for_user(user: User) -> QuerySet[Tenant]:
    """The tenants ``user`` may read: all for a superuser, else those of their memberships."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    if user.is_superuser:
        return Tenant.objects.all()
    return Tenant.objects.filter(membership__user=user)


def _count_subquery(qs: QuerySet[Any], group: str) -> Coalesce:
    counted = qs.order_by().values(group).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def sessions_for_user(user: User, q: str = "") -> QuerySet[Session]:
    """Sessions of the user's tenants, newest first, each annotated for the sessions list.

    Annotations: ``entry_count`` (a correlated subquery, so entries and folds do not multiply
    each other in one join), ``fold_count``, ``head_seq`` (highest head of its journals),
    ``journal_count``. Three queries at most for a page: count, rows, nothing per row.
    ``q`` matches key or title, case-insensitively.
    """
    qs = Session.objects.filter(tenant__in=tenants_for_user(user)).select_related("tenant")
    q = q.strip()
    if q:
        qs = qs.filter(Q(key__icontains=q) | Q(title__icontains=q))
    return qs.annotate(
        entry_count=_count_subquery(
            Entry.objects.filter(journal__session=OuterRef("pk")), "journal__session"
        ),
        # "folds" is ledger_app's reverse relation; a lookup string, so no import of
        # ledger_app here (imports flow journal_app <- ledger_app).
        fold_count=Count("journals__folds", distinct=True),
        head_seq=Coalesce(Max("journals__head_seq"), Value(0)),
        journal_count=Count("journals", distinct=True),
    ).order_by("-created_at", "pk")


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


def default_journal(session: Session) -> Journal | None:
    """The session's ``main/main`` journal, else its first journal, else ``None``."""
    journals = list(session.journals.order_by("lane", "branch"))
    for j in journals:
        if j.lane == "main" and j.branch == "main":
            return j
    return journals[0] if journals else None


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


def journal_rounds(journal: Journal) -> list[Round]:
    """API rounds of the whole journal, from its four grouping columns only (one query).

    Grouping the whole journal (not one page of it) keeps round indexes global and never
    flags a call as interrupted because its result happens to sit on the next page.
    """
    rows = (
        Entry.objects.filter(journal=journal)
        .order_by("seq")
        .values_list("seq", "kind", "role", "tool_call_id")
    )
    return group_rounds(_Row(*r) for r in rows)


def rounds_for_seqs(rounds: Sequence[Round], seqs: Sequence[int]) -> list[Round]:
    """The rounds holding at least one of ``seqs``, in round order."""
    wanted = set(seqs)
    return [r for r in rounds if wanted.intersection(r.seqs)]


def entries_by_hash(journal: Journal, hashes: Sequence[str]) -> dict[str, Entry]:
    """Entries of ``journal`` among ``hashes`` (hex), keyed by hash; one query, no bodies."""
    if not hashes:
        return {}
    rows = Entry.objects.filter(journal=journal, entry_hash__in=set(hashes)).only(
        "entry_hash", "seq", "kind", "role", "derived", "journal_id"
    )
    return {e.entry_hash: e for e in rows}
