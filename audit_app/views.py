"""Operator UI of the audit app: comments, annotations, the audit log, and the two journal
pages that show comments (the timeline and one entry: the journal builds them, this app adds
the comment counts and comments it owns; docs/architecture.md, "Layers").

Routed from :mod:`audit_app.urls` (wired into the ``journal`` namespace by ``config/urls.py``);
the comment on a ledger fact is :mod:`ledger_app.comment_views`, since only the ledger knows
its facts. Thin views: resolve the object through the tenant
filter (``Http404``), call one service, then redirect a normal request back (PRG) or render
the fragment for an htmx one (STYLE.md 4). Forms carry CSRF tokens; htmx sends the token
from ``<body hx-headers>``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from audit_app.models import AuditEvent
from audit_app.reads import raw_read_allowed
from audit_app.roles import AUDIT_LOG_PERMISSION, tenant_role
from audit_app.selectors import (
    AuditFilterError,
    audit_events,
    audit_nav,
    audit_nav_remember,
    comment_counts,
    entry_comments,
)
from audit_app.services import CommentInvalid, annotation_add, audit_record, comment_on_entry
from journal_app import selectors
from journal_app.hashing import display
from journal_app.models import Membership
from journal_app.views.entry_page import entry_context
from journal_app.views.htmx import is_fragment_request
from journal_app.views.panel import is_panel, render_panel
from journal_app.views.timeline_page import (
    timeline_context,
    timeline_jump,
    timeline_render,
    timeline_rows,
)

EVENTS_PER_PAGE = 50


def back_url(request: HttpRequest, fallback: str) -> str:
    """POST ``next`` when it is a same-site URL, else ``fallback`` (no open redirect)."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


def _entry_context(request: HttpRequest, entry: Any) -> dict[str, Any]:
    """The journal's entry page context with the entry's comments, and whether the viewer
    may read the unfiltered bytes (the link is offered only to those the read would not
    refuse: :func:`audit_app.reads.raw_read_allowed`)."""
    return {
        **entry_context(request, entry),
        "comments": entry_comments(entry),
        "may_read_raw": raw_read_allowed(actor=request.user, tenant=entry.journal.session.tenant),
    }


@login_required
def timeline(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The timeline of one scope (:func:`journal_app.views.timeline_page.timeline_context`: entries 100 per
    page, grouped by API round, ``?q=`` filters, ``?seq=N`` jumps to the row of seq N) with
    each row's comment count (one query). An htmx request (filter, pagination) gets
    ``#entry-list``.
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    jump = timeline_jump(request, journal)
    if jump is not None:
        return jump
    context = timeline_context(request, journal)
    rows = timeline_rows(context)
    counts = comment_counts(entry_ids=[row.entry.pk for row in rows])
    for row in rows:
        row.comments = counts.get(row.entry.pk, 0)
    return timeline_render(request, context)


@login_required
def entry_detail(request: HttpRequest, entry_hash: str) -> HttpResponse:
    """One entry: fields, hashes, body, chunks, comments, and the hash badge recomputed now.

    Shown filtered (secrets, hidden reasoning) with a "filtered: why" note; the unfiltered
    bytes are one audited click away for tenant admins (``journal:entry_raw``).
    What a support link cites is highlighted and scrolled to: ``?chunk=N`` or
    ``?chunks=A-B`` (chunks of the body), ``?bytes=S-E`` (a byte range of the body, end
    inclusive), ``?quote=...`` (the first occurrence in the text or the raw body, or a note
    that it is absent), ``?cited=entry`` (the whole entry, when the item names nothing finer).
    An htmx request targeting ``#side-panel`` gets the ``#panel`` region
    (:func:`journal_app.views.panel.render_panel`).
    """
    entry = selectors.entry_for_user(request.user, entry_hash)
    if is_panel(request):
        return render_panel(request, "journal_app/entry.html", _entry_context(request, entry))
    return render(request, "journal_app/entry.html", _entry_context(request, entry))


@login_required
@require_POST
def entry_comment(request: HttpRequest, entry_hash: str) -> HttpResponse:
    """Add a comment (POST ``text``) to an entry; htmx gets the ``#comments`` region."""
    entry = selectors.entry_for_user(request.user, entry_hash)
    error = ""
    try:
        comment_on_entry(entry=entry, author=request.user, text=request.POST.get("text", ""))
    except CommentInvalid as exc:
        error = str(exc)
    if is_fragment_request(request):
        context = {**_entry_context(request, entry), "comment_error": error}
        return render(request, "journal_app/entry.html#comments", context)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, "Comment added.")
    return redirect(reverse("journal:entry", args=[display(entry.entry_hash)]) + "#comments")


@login_required
@require_POST
def annotate(request: HttpRequest, tenant: str, session: str) -> HttpResponse:
    """Label the session a good/bad compaction example (POST ``verdict``, ``note``)."""
    s = selectors.get_session_for_user(request.user, tenant, session)
    try:
        annotation_add(
            session=s,
            author=request.user,
            verdict=request.POST.get("verdict", ""),
            note=request.POST.get("note", ""),
        )
    except CommentInvalid as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Annotation recorded.")
    return redirect(reverse("journal:session", args=[s.tenant.slug, s.key]) + "#annotations")


@login_required
def audit_log(request: HttpRequest, tenant: str) -> HttpResponse:
    """The tenant's audit log, newest first, 50 per page; ``?action=``, ``?actor=``,
    ``?session=``, ``?since=`` and ``?until=`` narrow it (:func:`audit_app.selectors.audit_events`;
    a bad date answers 400 naming it); an htmx request gets ``#audit-events``.

    Admins of the tenant only (``audit_app.view_audit_log`` and an admin membership);
    another tenant answers 404, a member of another role 403.
    """
    t = selectors.tenants_for_user(request.user).filter(slug=tenant).first()
    if t is None:
        raise Http404("no such tenant")
    if not request.user.has_perm(AUDIT_LOG_PERMISSION) or tenant_role(request.user, t.pk) != str(
        Membership.Role.ADMIN
    ):
        raise PermissionDenied("only the tenant's admins read its audit log")
    filters = {
        name: request.GET.get(name, "").strip()
        for name in ("action", "actor", "session", "since", "until")
    }
    error = ""
    try:
        events = audit_events(tenant=t, **filters)
    except AuditFilterError as exc:
        error = str(exc)
        events = AuditEvent.objects.none()
    page = Paginator(events, EVENTS_PER_PAGE).get_page(request.GET.get("page") or "1")
    actions = list(
        AuditEvent.objects.filter(tenant=t)
        .order_by("action")
        .values_list("action", flat=True)
        .distinct()
    )
    context = {
        "tenant": t,
        "page": page,
        "events": list(page.object_list),
        "action": filters["action"],
        "filters": filters,
        "filtered": any(filters.values()),
        "error": error,
        "actions": actions,
        "tenants": audit_nav(request)["audit_tenants"],
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    template = "audit_app/audit_log.html"
    return render(
        request,
        f"{template}#audit-events" if is_fragment_request(request) else template,
        context,
        status=400 if error else 200,
    )


class AuditedLoginView(LoginView):
    """The login page; a successful sign-in is recorded (``account.login``) in the audit log
    of each tenant the user belongs to, so its admins see who signed in."""

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        user = form.get_user()
        audit_nav_remember(self.request, user)
        for m in Membership.objects.filter(user=user).select_related("tenant"):
            audit_record(
                actor=user,
                tenant=m.tenant,
                action="account.login",
                object_type="user",
                object_id=user.get_username(),
                details={"role": m.role, "via": "ui"},
            )
        return response
