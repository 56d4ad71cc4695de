"""README "Use it with your agent": the SDK snippets run as written against the live server."""

from __future__ import annotations

import pytest

from journal_app.models import Entry
from tests.proxy_app.readme import mcp_database_urls, python_snippet, section


@pytest.fixture
def env(live_server, key, upstream, monkeypatch):
    monkeypatch.setenv("LEDGERKEEP_URL", live_server.url)
    monkeypatch.setenv("LEDGERKEEP_KEY", key)
    return upstream


@pytest.mark.parametrize(
    ("module", "session"),
    [
        ("openai", "readme-openai"),
        ("anthropic", "readme-anthropic"),
        ("langchain_openai", "readme-langchain"),
    ],
)
def test_the_snippet_runs_as_written_and_journals_its_session(env, capsys, module, session):
    pytest.importorskip(module)
    env.push(text="Hello from upstream.")
    exec(compile(python_snippet(module), f"README[{module}]", "exec"), {})
    assert capsys.readouterr().out.strip() == "Hello from upstream."
    rows = Entry.objects.filter(journal__session__key=session).order_by("seq")
    assert [e.text for e in rows][-2:] == ["Say hello.", "Hello from upstream."]


def test_the_mcp_lines_pass_the_database_url():
    urls = mcp_database_urls()
    assert urls["claude"] and urls["claude"] == urls["codex"]
    assert urls["claude"].startswith("postgres://")


def test_the_section_documents_what_a_new_user_asked_about():
    text = section()
    for header in (
        "X-Ledgerkeep-Lane",
        "X-Ledgerkeep-Branch",
        "X-Ledgerkeep-Working-Budget",
        "X-Ledgerkeep-Branched-From",
        "X-Ledgerkeep-Revision",
        "X-Ledgerkeep-Answer-Journaled",
        "X-Ledgerkeep-Compacted",
        "-Tokens-Before",
        "-Tokens-After",
        "X-Ledgerkeep-Fold",
    ):
        assert header in text, header
    assert "| 400 | `malformed_json` |" in text
    assert "pip install langchain-openai" not in text
    assert "unreadable_record" in text and "interrupted" in text
