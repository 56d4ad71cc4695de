"""``manage.py recover SCOPE [--query ...]`` prints the receipt."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from recovery_app.models import Receipt
from tests.recovery_app.conftest import build_migration_case

pytestmark = pytest.mark.django_db


def _run(*args, **kwargs):
    out = io.StringIO()
    call_command("recover", *args, stdout=out, **kwargs)
    return out.getvalue()


def test_it_prints_the_receipt_of_a_triggered_attempt(settings):
    settings.OPENAI_BASE_URL = ""
    case = build_migration_case()
    text = _run("acme/mig")
    assert "outcome    recovered" in text
    assert "snapshot   acme/mig/main/main at revision" in text
    assert f"read       seq {case.call.seq} sha256:{case.call.entry_hash[:16]}… verified" in text
    assert "0042_add_refund_index --fake" in text
    assert Receipt.objects.get().kind == Receipt.Kind.FOLD


def test_a_query_runs_a_manual_attempt_and_json_has_every_field(settings):
    settings.OPENAI_BASE_URL = ""
    build_migration_case()
    data = json.loads(_run("acme/mig/main/main", "--query=--fake", "--json"))
    assert data["kind"] == "manual" and data["outcome"] == "recovered"
    assert data["snapshot"]["frozen"] is True and data["queries"][0]["query"] == "fake"
    assert {"trigger", "reads", "sources", "claims", "usage", "budget"} <= set(data)


def test_bad_arguments_are_refused_with_a_clear_error():
    build_migration_case()
    with pytest.raises(CommandError, match="no journal matches scope"):
        _run("acme/nope")
    with pytest.raises(CommandError, match="at least tenant/session"):
        _run("acme")
    with pytest.raises(CommandError, match="nothing searchable"):
        _run("acme/mig", query="--")
    assert Receipt.objects.count() == 0
