"""An artifact's page: receipt, preview and content, the hash recomputed over the stored
bytes (:func:`journal_app.services.artifact_read`) at render time."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from journal_app import privacy, selectors
from journal_app.services import artifact_read
from journal_app.views.query_params import page_number

ARTIFACT_PAGE_CHARS = 20_000


@login_required
def artifact_detail(request: HttpRequest, tenant: str, content_hash: str) -> HttpResponse:
    """An artifact: receipt, preview, content 20,000 characters per page, hash recomputed
    over the stored bytes; preview and content shown filtered (:mod:`journal_app.privacy`)."""
    artifact = selectors.artifact_for_user(request.user, tenant, content_hash)
    try:
        content, matched = artifact_read(artifact=artifact)
        missing = False
    except OSError:
        content, matched, missing = "", False, True
    # the hash was checked over the stored bytes above; what is shown is filtered
    shown = privacy.filter_text(content, kind="tool_result")
    receipt = artifact.receipt()
    preview = privacy.filter_text(str(receipt.get("preview", "")), kind="tool_result")
    content = shown.text
    labels = shown.labels + [x for x in preview.labels if x not in shown.labels]
    pages = [
        content[i : i + ARTIFACT_PAGE_CHARS] for i in range(0, len(content), ARTIFACT_PAGE_CHARS)
    ]
    page = Paginator(pages or [""], 1).get_page(page_number(request))
    page_text = page.object_list[0]
    start = (page.number - 1) * ARTIFACT_PAGE_CHARS
    context: dict[str, Any] = {
        "artifact": artifact,
        "tenant": artifact.tenant,
        "receipt": receipt,
        "preview": preview.text,
        "filtered": bool(labels),
        "filter_labels": labels,
        "matched": matched,
        "missing": missing,
        "checked_at": timezone.now(),
        "page": page,
        "page_text": page_text,
        "page_start": start + 1 if page_text else 0,
        "page_end": start + len(page_text),
        "content_chars": len(content),
        "entries": list(
            artifact.entries.select_related("journal__session__tenant").order_by("pk")[:50]
        ),
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(request, "journal_app/artifact.html", context)
