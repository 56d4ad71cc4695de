"""The side panel: a fact, a fold or an entry opened beside the page that links it.

The panel's page renders its ``#panel`` region (:func:`render_panel`) for an htmx request
that targets ``#side-panel``; the URL keeps ``?panel=<path>`` so Back closes it and a
reload reopens it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from journal_app.views.htmx import HtmxHttpRequest, is_fragment_request

PANEL_ID = "side-panel"


def is_panel(request: HttpRequest) -> bool:
    """True when an htmx request targets the side panel (``hx-target="#side-panel"``): the view
    renders its page's ``#panel`` region (:func:`render_panel`) instead of the page."""
    return is_fragment_request(request) and request.htmx.target == PANEL_ID  # type: ignore[attr-defined]


def _local_path(url: str, request: HttpRequest) -> str:
    """Path and query of ``url`` when it is on this site, without ``panel``; else ``/``."""
    if not url or not url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return "/"
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "panel"]
    return (parts.path or "/") + ("?" + urlencode(query) if query else "")


def render_panel(request: HttpRequest, template: str, context: dict[str, Any]) -> HttpResponse:
    """The ``template#panel`` region for the side panel, with the URL state.

    The page hosting the panel (``HX-Current-URL``) gets ``?panel=<this request's path>``
    pushed (``HX-Push-Url``), so Back closes the panel and the URL reopens it; a panel loaded
    by the page itself (``?panel=`` already in the URL, trigger ``#side-panel``) pushes nothing.
    ``panel_close_url`` closes it (:func:`panel_close`); ``full_url`` is the page's permalink.
    """
    host = _local_path(request.htmx.current_url or "", request)  # type: ignore[attr-defined]
    context = {
        **context,
        "in_panel": True,
        "panel_close_url": reverse("journal:panel_close") + "?" + urlencode({"next": host}),
    }
    response = render(request, f"{template}#panel", context)
    if request.htmx.trigger != PANEL_ID:  # type: ignore[attr-defined]
        sep = "&" if "?" in host else "?"
        response["HX-Push-Url"] = host + sep + urlencode({"panel": request.get_full_path()})
    return response


@login_required
def panel_close(request: HtmxHttpRequest) -> HttpResponse:
    """Close the side panel: htmx gets the empty panel and ``HX-Push-Url`` of the page without
    ``panel``; a normal request is redirected there (``?next=``, a path on this site)."""
    target = _local_path(request.GET.get("next", ""), request)
    if not is_fragment_request(request):
        return redirect(target)
    response = HttpResponse(
        f'<aside id="{PANEL_ID}" class="side-panel" aria-label="Side panel"></aside>'
    )
    response["HX-Push-Url"] = target
    return response
