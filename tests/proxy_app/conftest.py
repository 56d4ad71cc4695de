"""Fixtures of the proxy tests: a scripted upstream, a tenant key, the live server's URLs."""

from __future__ import annotations

import pytest

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
