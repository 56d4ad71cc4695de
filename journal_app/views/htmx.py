"""What every htmx view of the apps shares: the typed request and the fragment rule.

An htmx request that swaps a fragment gets the page's named partial (``page.html#region``);
a boosted request, or a Back/Forward history restore, gets the whole page (STYLE.md 4).
"""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """A request that went through ``django_htmx``'s middleware (``request.htmx``)."""

    htmx: HtmxDetails


def is_fragment_request(request: HttpRequest) -> bool:
    """True for an htmx request that swaps a fragment: not boosted, and not a history restore
    (Back/Forward on a page htmx has not cached asks for the whole page with ``HX-Request``)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx and not htmx.boosted and not htmx.history_restore_request)


def partial(request: HttpRequest, template: str, region: str) -> str:
    """``template#region`` for a fragment request (:func:`is_fragment_request`), else ``template``."""
    return f"{template}#{region}" if is_fragment_request(request) else template
