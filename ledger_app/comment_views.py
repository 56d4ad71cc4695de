"""Operator UI action: comment on a ledger fact (docs/design.md section 8).

Routed by ``config/urls.py`` as ``journal:fact_comment`` (its historical name and path). It
lives in the ledger app because only the ledger knows its facts
(:func:`ledger_app.comments.comment_on_fact`); the comment itself is the audit app's.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from audit_app.models import Comment
from audit_app.services import CommentInvalid
from audit_app.views import back_url
from journal_app import selectors
from journal_app.views.htmx import is_fragment_request
from ledger_app.comments import comment_on_fact
from ledger_app.views import fact_dom_id


@login_required
@require_POST
def fact_comment(
    request: HttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """Add a comment (POST ``fact_id``, ``text``) to a ledger fact of this scope.

    htmx gets the fact's comment fragment; a normal request goes back to ``next`` (a
    same-site URL, e.g. the facts page it came from) or to the facts page.
    """
    journal = selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    fact_id = request.POST.get("fact_id", "")
    error = ""
    try:
        comment_on_fact(
            journal=journal, fact_id=fact_id, author=request.user, text=request.POST.get("text", "")
        )
    except CommentInvalid as exc:
        error = str(exc)
    facts_url = reverse(
        "ledger:facts",
        kwargs={"tenant": tenant, "session": session, "lane": lane, "branch": branch},
    )
    if is_fragment_request(request):
        comments = list(
            Comment.objects.filter(journal=journal, fact_id=fact_id).select_related("author")
        )
        context = {
            "fact_id": fact_id,
            "dom_id": fact_dom_id(fact_id),
            "comments": comments,
            "comment_url": request.path,
            "here": back_url(request, facts_url),
            "comment_error": error,
            "open": True,
        }
        return render(request, "ledger_app/_fact_comments.html", context)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, "Comment added.")
    return redirect(back_url(request, facts_url) + f"#{fact_dom_id(fact_id)}")
