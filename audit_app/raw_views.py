"""The operator UI's audited page of an entry's stored bytes (tenant admins only).

The entry page (``journal:entry``) shows bodies filtered by :mod:`journal_app.privacy` and
links here; this page shows the stored canonical JSON unfiltered, after
:func:`audit_app.reads.entry_read_raw` checked the role and logged the read. Another tenant's
entry answers 404, a member of another role 403 (the refusal is logged too).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from audit_app.reads import RawReadDenied, entry_read_raw
from journal_app import selectors
from journal_app.hashing import display
from journal_app.services import entry_check


@login_required
def entry_raw(request: HttpRequest, entry_hash: str) -> HttpResponse:
    """The stored bytes of one entry, unfiltered, with the hash badge recomputed now."""
    entry = selectors.entry_for_user(request.user, entry_hash)
    try:
        data = entry_read_raw(entry=entry, actor=request.user, via="ui")
    except RawReadDenied as exc:
        raise PermissionDenied(str(exc)) from exc
    problems = entry_check(entry, chain=True)
    journal = entry.journal
    return render(
        request,
        "audit_app/entry_raw.html",
        {
            "entry": entry,
            "journal": journal,
            "session": journal.session,
            "tenant": journal.session.tenant,
            "body": data.decode("utf-8", errors="surrogatepass"),
            "byte_length": len(data),
            "problems": problems,
            "verified": not problems,
            "checked_at": timezone.now(),
            "entry_url": reverse("journal:entry", args=[display(entry.entry_hash)]),
        },
    )
