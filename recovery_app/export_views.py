"""The session export download (JSON Lines), logged with its digest.

Here, not in ledger_app, because a whole session's export carries the recovery receipts
(:mod:`recovery_app.session_transfer`); served as ``ledger:export`` at its historical path
by ``config/urls.py`` (docs/architecture.md, "Layers")."""

from __future__ import annotations

import tempfile

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, HttpRequest

from audit_app.reads import RawReadDenied
from audit_app.roles import EXPORT_PERMISSION
from audit_app.services import export_record
from journal_app import selectors as journal_selectors
from recovery_app.session_transfer import session_export


@login_required
def export(request: HttpRequest, tenant: str, session: str) -> FileResponse:
    """Download the session as JSON Lines (``?lane=``, ``?branch=`` narrow it); logged.

    Needs ``audit_app.export_session`` and, because the bodies are the stored (unfiltered)
    bytes, the raw-read role (a tenant admin, :mod:`audit_app.reads`); a refusal is 403 and
    logged. The file is written to a temporary file first, so the audit event records its
    sha256 before it is sent.
    """
    s = journal_selectors.get_session_for_user(request.user, tenant, session)
    if not request.user.has_perm(EXPORT_PERMISSION):
        raise PermissionDenied("your role may not export sessions")
    lane = request.GET.get("lane", "")
    branch = request.GET.get("branch", "")
    out = tempfile.TemporaryFile()
    try:
        summary = session_export(
            session=s, out=out, lane=lane, branch=branch, actor=request.user, via="ui"
        )
    except RawReadDenied as exc:  # bodies are the stored bytes: the raw-read role only
        out.close()
        raise PermissionDenied(str(exc)) from None
    export_record(
        user=request.user, session=s, details={**summary.to_dict(), "lane": lane, "branch": branch}
    )
    out.seek(0)
    name = s.key + (f"-{lane}" if lane else "") + (f"-{branch}" if branch else "") + ".jsonl"
    return FileResponse(out, as_attachment=True, filename=name, content_type="application/x-ndjson")
