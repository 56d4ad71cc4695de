"""Every field the entry hash covers is stored whole or refused with one error, whatever the
surface: each importer here; the API in ``tests/api``, the proxy in ``tests/proxy_app``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from journal_app.entry_validation import MAX_TOOL_FIELD_CHARS
from journal_app.formats import FormatError
from journal_app.models import Entry, Journal
from journal_app.services import journal_import, journal_verify
from tests.journal_app.formats.test_anthropic import CONVERSATION as ANTHROPIC
from tests.journal_app.formats.test_openai_responses import EXCHANGE as RESPONSES

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
LONG = "t" * (MAX_TOOL_FIELD_CHARS + 50)
REASON = f"is {len(LONG)} characters; at most {MAX_TOOL_FIELD_CHARS} are stored"


def _from_corpus(rel: str, old: str, new: str, tmp_path: Path) -> Path:
    """A copy of corpus file (or folder) ``rel`` with every ``old`` replaced by ``new``."""
    src = CORPUS / rel
    dst = tmp_path / src.name
    if src.is_dir():
        shutil.copytree(src, dst)
        files = list(dst.iterdir())
    else:
        shutil.copy(src, dst)
        files = [dst]
    hits = 0
    for f in files:
        text = f.read_text()
        hits += text.count(old)
        f.write_text(text.replace(old, new))
    assert hits, f"{old!r} not in {rel}"
    return dst


def _inline(data: dict, old: str, new: str, tmp_path: Path) -> Path:
    text = json.dumps(data)
    assert old in text
    dst = tmp_path / "transcript.json"
    dst.write_text(text.replace(old, new))
    return dst


def _q(name: str) -> str:
    return json.dumps(name)


def _qq(name: str) -> str:  # a name inside a JSON string inside JSON (OpenCode's parts)
    return json.dumps(json.dumps(name))[1:-1]


# one transcript per importer, its tool name made LONG
SOURCES = {
    "claude-code-jsonl": lambda t: _from_corpus(
        "claude-code-jsonl/claude-code-session-with-summary-records.jsonl",
        _q("WebSearch"),
        _q(LONG),
        t,
    ),
    "codex-rollout-jsonl": lambda t: _from_corpus(
        "codex-rollout-jsonl/codex-vscode-long-monorepo-session.jsonl", _q("shell"), _q(LONG), t
    ),
    "openhands-events": lambda t: _from_corpus(
        "openhands-events/openhands-ponyc-4588-max-iterations.json",
        _q("execute_bash"),
        _q(LONG),
        t,
    ),
    "swe-agent-traj": lambda t: _from_corpus(
        "swe-agent-traj/sweagent-function-calling-marshmallow-1867.traj", _q("bash"), _q(LONG), t
    ),
    "openai-chat": lambda t: _from_corpus(
        "openai-chat-tool-calls/taubench-gpt4o-airline-task3.json",
        _q("get_user_details"),
        _q(LONG),
        t,
    ),
    "atif-trajectory": lambda t: _from_corpus(
        "atif-trajectory/atif-claude-code-regex-log.json", _q("Write"), _q(LONG), t
    ),
    "opencode-export": lambda t: _from_corpus(
        "opencode-export/khala-sessions", _qq("glob"), _qq(LONG), t
    ),
    "anthropic-messages": lambda t: _inline(ANTHROPIC, _q("read"), _q(LONG), t),
    "openai-responses": lambda t: _inline(RESPONSES, _q("shell"), _q(LONG), t),
}


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", sorted(SOURCES))
def test_each_importer_refuses_a_tool_name_longer_than_is_stored(fmt, tmp_path):
    path = SOURCES[fmt](tmp_path)
    with pytest.raises(FormatError) as caught:
        journal_import(path=path, tenant="acme", session="long-name")
    assert caught.value.field == "tool_name"
    assert REASON in str(caught.value)
    assert not Journal.objects.exists() and not Entry.objects.exists()


@pytest.mark.django_db
def test_mini_swe_agent_names_every_call_bash_so_no_name_is_too_long(tmp_path):
    # its importer writes the fixed name "bash" (the format has no tool names): stored whole
    path = CORPUS / "mini-swe-agent-traj"
    path = next(path.iterdir())
    journal_import(path=path, tenant="acme", session="mini")
    names = set(Entry.objects.filter(kind="tool_call").values_list("tool_name", flat=True))
    assert names == {"bash"}


@pytest.mark.django_db
def test_a_name_at_the_limit_is_stored_whole_and_verifies(tmp_path):
    at_limit = "n" * MAX_TOOL_FIELD_CHARS
    path = _inline(ANTHROPIC, _q("read"), _q(at_limit), tmp_path)
    journal_import(path=path, tenant="acme", session="at-limit")
    stored = set(Entry.objects.filter(kind="tool_call").values_list("tool_name", flat=True))
    assert stored == {at_limit}
    report = journal_verify(journals=list(Journal.objects.all()))
    assert report.ok, report.first_failure
