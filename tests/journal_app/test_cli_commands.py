"""The operator's commands: ``sessions``, ``export`` and suggestions on a mistyped scope."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit_app.models import AuditEvent
from journal_app.formats.base import message
from tests.factories import TenantFactory, journal_build

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def demo():
    tenant = TenantFactory(slug="demo")
    items = [message("user", "Fix the refund rounding."), message("assistant", "Done.")]
    return journal_build(tenant=tenant, key="refunds", title="Refunds", items=items)


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_sessions_lists_journals_with_entries_tokens_folds_and_activity(demo):
    TenantFactory(slug="other")
    out = _run("sessions")
    line = next(x for x in out.splitlines() if x.startswith("demo/refunds/main/main"))
    cols = line.split()
    assert cols[1] == "2" and int(cols[2].replace(",", "")) > 0 and cols[3] == "0"
    assert "1 journal, 2 entries" in out
    assert "demo/refunds" in _run("sessions", "demo")
    with pytest.raises(CommandError, match="no tenant 'demmo' \\(tenants: demo, other\\)"):
        _run("sessions", "demmo")


def test_a_mistyped_scope_gets_a_suggestion(demo):
    with pytest.raises(CommandError, match="did you mean 'demo'\\?"):
        _run("verify_journal", "demmo")
    with pytest.raises(CommandError, match="did you mean 'demo/refunds'\\?"):
        _run("verify_journal", "demo/refund")
    with pytest.raises(CommandError) as nothing:
        _run("verify_journal", "zzzzzz")
    assert "did you mean" not in str(nothing.value)


def test_export_writes_the_session_to_a_file_and_logs_it(demo, tmp_path):
    target = tmp_path / "refunds.jsonl"
    call_command("export", "demo/refunds", "-o", str(target), stderr=io.StringIO())
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert records[0]["type"] == "header" and records[-1]["type"] == "end"
    assert sum(r["type"] == "entry" for r in records) == 2
    event = AuditEvent.objects.get(action="session.export")
    assert event.details["via"] == "cli" and event.details["entries"] == 2


def test_export_of_an_unknown_scope_writes_nothing(demo, tmp_path):
    with pytest.raises(CommandError, match="no journal matches scope"):
        call_command("export", "demo/nope", "-o", str(tmp_path / "x.jsonl"))
    with pytest.raises(CommandError, match="names no session"):
        call_command("export", "demo", "-o", str(tmp_path / "x.jsonl"))
    assert list(tmp_path.iterdir()) == [tmp_path / "media"] or list(tmp_path.iterdir()) == []


def test_export_into_a_missing_folder_is_a_clear_error_and_writes_nothing(demo, tmp_path):
    missing = tmp_path / "nowhere" / "x.jsonl"
    with pytest.raises(CommandError, match=r"cannot write .*x\.jsonl: the folder .*nowhere"):
        call_command("export", "demo/refunds", "-o", str(missing))
    assert not (tmp_path / "nowhere").exists()
    assert not AuditEvent.objects.filter(action="session.export").exists()


def test_export_to_a_file_it_cannot_replace_names_the_file(demo, tmp_path):
    target = tmp_path / "a-folder.jsonl"
    target.mkdir()  # os.replace of a file onto a folder fails
    with pytest.raises(CommandError, match=r"cannot write .*a-folder\.jsonl"):
        call_command("export", "demo/refunds", "-o", str(target))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".a-folder")] == []
    assert not AuditEvent.objects.filter(action="session.export").exists()
