"""Which surface asked for the work being done: the UI, the API, the proxy, a task or a command.

A state change deep in a service (a fold started by an append, by the context builder's
fold-more or by ``compact``) does not see the request that caused it. Its audit event still
names the surface and, where there is one, the person: :class:`OriginMiddleware` sets the
origin for every HTTP request (``/api/`` -> ``api``, ``/proxy/`` -> ``proxy``, any other
path -> ``ui``), and a service reads it with :func:`origin_current`. Outside a request the
origin is ``task`` inside a Celery task and ``command`` otherwise (a management command, the
shell). README "Audit log" lists the actions recorded.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

#: the surfaces an audit event may name
SURFACES = ("ui", "api", "proxy", "task", "command")


@dataclass(frozen=True)
class Origin:
    """The surface that asked (one of :data:`SURFACES`) and the request, when there is one."""

    surface: str
    request: HttpRequest | None = None
    user: Any = None

    @property
    def actor(self) -> Any:
        """The person behind the work: the explicit user, an API key's user (``request.auth``
        of django-ninja, read when the event is written, after the key was checked), or the
        signed-in user; ``None`` when nobody is known (a client key, a worker, a command)."""
        if self.user is not None:
            return self.user
        if self.request is None:
            return None
        key = getattr(getattr(self.request, "auth", None), "key", None)
        if key is not None:
            return getattr(key, "user", None)
        user = getattr(self.request, "user", None)
        return user if getattr(user, "is_authenticated", False) else None


_current: contextvars.ContextVar[Origin | None] = contextvars.ContextVar(
    "ledgerkeep_origin", default=None
)


def current_task_id() -> str:
    """The id of the Celery task running now (eager or on a worker), or ``""``."""
    from celery import current_task

    return str(getattr(getattr(current_task, "request", None), "id", None) or "")


def origin_current() -> Origin:
    """The origin of the work now running (never ``None``: ``task`` or ``command`` outside
    a request)."""
    found = _current.get()
    if found is not None:
        return found
    return Origin("task" if current_task_id() else "command")


def surface_of_path(path: str) -> str:
    """``api`` for ``/api/...``, ``proxy`` for ``/proxy/...``, else ``ui``."""
    if path.startswith("/api/"):
        return "api"
    if path.startswith("/proxy/"):
        return "proxy"
    return "ui"


@contextmanager
def origin_scope(
    *, surface: str, user: Any = None, request: HttpRequest | None = None
) -> Iterator[Origin]:
    """Run the block with ``surface`` (one of :data:`SURFACES`) as the origin.

    Raises:
        ValueError: an unknown surface.
    """
    if surface not in SURFACES:
        raise ValueError(f"unknown surface {surface!r}; one of {', '.join(SURFACES)}")
    origin = Origin(surface, request, user)
    token = _current.set(origin)
    try:
        yield origin
    finally:
        _current.reset(token)


class OriginMiddleware:
    """Set the request's origin for the services it calls (sync and async requests)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._acall(request)
        with origin_scope(surface=surface_of_path(request.path), request=request):
            return self.get_response(request)

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        with origin_scope(surface=surface_of_path(request.path), request=request):
            return await self.get_response(request)
