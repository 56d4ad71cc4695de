"""The MCP server's scope: a session key, a pattern or ``latest``, and the live branch."""

from __future__ import annotations

import pytest
from django.http import Http404

from journal_app.auth import ApiCaller, api_key_create
from journal_app.formats.base import message
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from proxy_app.mcp_server import live_journal

pytestmark = pytest.mark.django_db


def _write(tenant, session: str, branch: str, text: str) -> None:
    journal = journal_ensure(
        session=session_ensure(tenant=tenant, key=session), lane="main", branch=branch
    )
    journal_append(journal=journal, items=[message("user", text)])


def test_a_pattern_or_latest_follows_the_newest_journal_of_the_key():
    acme, globex = tenant_ensure(slug="acme"), tenant_ensure(slug="globex")
    caller = ApiCaller(api_key_create(tenant=acme, name="mcp")[0])
    _write(acme, "px-older", "main", "first")
    _write(acme, "px-live", "main", "second")
    _write(acme, "px-live", "b2", "a resampled answer's branch")
    _write(acme, "named", "main", "not a px session")
    _write(globex, "px-other-tenant", "main", "newest of all, another tenant")

    def scope(session, branch="latest"):
        j = live_journal(caller, session, "main", branch)
        return j.session.key, j.branch

    assert scope("px-*") == ("px-live", "b2")
    assert scope("latest") == ("named", "main")
    assert scope("px-older") == ("px-older", "main")
    assert scope("px-live", "main") == ("px-live", "main")
    assert scope("px-*", "main") == ("px-live", "main")
    with pytest.raises(Http404):
        scope("px-other-*")
    with pytest.raises(Http404):
        scope("px-other-tenant", "main")
