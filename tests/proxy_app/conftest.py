"""Fixtures of the proxy tests: a scripted upstream, a tenant key, the live server's URLs."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from django.test.utils import modify_settings

from journal_app.auth import api_key_create
from journal_app.models import Entry, Journal
from journal_app.services import tenant_ensure
from tests.proxy_app.upstream import ScriptedUpstream


@pytest.fixture
def upstream(settings):
    with ScriptedUpstream() as up:
        settings.UPSTREAM_OPENAI_BASE_URL = up.openai_base
        settings.UPSTREAM_ANTHROPIC_BASE_URL = up.anthropic_base
        settings.UPSTREAM_OPENAI_API_KEY = ""
        settings.UPSTREAM_ANTHROPIC_API_KEY = ""
        settings.UPSTREAM_TIMEOUT_SECONDS = 5.0
        yield up


@pytest.fixture
def tenant(transactional_db):
    return tenant_ensure(slug="acme")


@pytest.fixture
def key(tenant) -> str:
    return api_key_create(tenant=tenant, name="runtime")[1]


@pytest.fixture
def other_key(transactional_db) -> str:
    return api_key_create(tenant=tenant_ensure(slug="globex"), name="other")[1]


def entries(session: str, branch: str = "main", lane: str = "main") -> list[Entry]:
    """The entries of one branch, in seq order."""
    journal = Journal.objects.get(session__key=session, lane=lane, branch=branch)
    return list(Entry.objects.filter(journal=journal).order_by("seq"))


def shape(rows: list[Entry]) -> list[tuple[str, str, str]]:
    """``(kind, role, text or call id)`` of each entry: what a reader checks."""
    return [(e.kind, e.role, e.tool_call_id or e.text) for e in rows]


class AsgiServer:
    """``config.asgi`` served by uvicorn in a thread of the test process (the production
    server's event loop: async views, streamed answers, clients that leave)."""

    def __init__(self) -> None:
        from config.asgi import application

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            application, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        # what pytest-django's autouse live-server helper enables for the test's duration
        self._live_server_modified_settings = modify_settings(ALLOWED_HOSTS={"append": "127.0.0.1"})

    def __enter__(self) -> AsgiServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            assert self._thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


@pytest.fixture
def live_server(transactional_db) -> Iterator[AsgiServer]:
    """The proxy tests' server: the ASGI application under uvicorn, not Django's WSGI one."""
    with AsgiServer() as server:
        yield server
