"""Uploading a ledgerkeep export over the API re-imports what the command does.

The upload API and ``import_journal`` call one service,
:func:`ledger_app.services.transcript_import.transcript_import` (the API through
:mod:`journal_app.hooks`): journal, folds with manifests, deltas and verdicts, retirements
and decisions, comments, annotations and receipts, re-verified; nothing when it fails.
"""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from django.apps import apps
from django.core.management import call_command

from audit_app.models import Comment
from journal_app.hooks import transcript_import_service
from journal_app.models import Journal, Session
from ledger_app.models import Fold, FoldAttempt, RetirementRequest
from ledger_app.services.integrity import ledger_integrity
from ledger_app.services.verify import ledger_verify
from recovery_app.session_transfer import transcript_import
from tests.ledger_app.test_export_reimport import _exported, _original, _verdicts

pytestmark = pytest.mark.django_db

UPLOAD = "/sessions/copy/main/main/import"


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def _upload(api, path, **form):
    with path.open("rb") as fh:
        return api.upload(UPLOAD, {"file": fh, **form})


def test_the_api_and_the_command_import_through_one_service():
    assert transcript_import_service() is transcript_import


def test_an_uploaded_export_brings_back_its_whole_ledger(api, corpus, tmp_path):
    original, _ = _original(corpus)  # tenant acme, the api key's tenant; rita reviews there
    path = _exported(original, tmp_path)

    r = _upload(api, path)

    assert r.status_code == 200, r.content
    body = r.json()
    assert body["format"] == "ledgerkeep-export"
    assert body["ledger"] == [
        {
            "journal": "acme/copy/main/main",
            "folds": 3,
            "attempts": 2,
            "retirements": 2,
            "decisions": 1,
            "comments": 2,
            "annotations": 1,
            "receipts": body["ledger"][0]["receipts"],
            "unchanged": False,
            "skipped": [],
        }
    ]
    copy = Journal.objects.get(session__tenant__slug="acme", session__key="copy")
    fields = ("number", "kind", "outcome", "seq_start", "seq_end", "revision", "writer")
    assert list(Fold.objects.filter(journal=copy).values_list(*fields)) == list(
        Fold.objects.filter(journal=original).values_list(*fields)
    )
    assert _verdicts(copy) == _verdicts(original)
    assert FoldAttempt.objects.filter(journal=copy).count() == 2
    assert sorted(
        RetirementRequest.objects.filter(journal=copy).values_list("status", flat=True)
    ) == [
        "approved",
        "pending",
    ]
    assert sorted(Comment.objects.filter(journal=copy).values_list("text", flat=True)) == [
        "check with the user",
        "the booking lookup",
    ]
    Receipt = apps.get_model("recovery_app", "Receipt")
    receipts = Receipt.objects.filter(journal=copy).count()
    assert (
        receipts
        == Receipt.objects.filter(journal=original).count()
        == body["ledger"][0]["receipts"]
    )
    assert ledger_verify(journal=copy).ok and ledger_integrity(journal=copy) == []
    call_command("verify_journal", "acme/copy", stdout=io.StringIO())

    # the copy already holds this export's ledger (in its own hashes): a no-op, as in the
    # original scope; a copy holding another ledger is a 409 (test_export_reimport)
    again = _upload(api, path)
    assert again.status_code == 200, again.content
    assert again.json()["ledger"][0]["unchanged"] is True
    assert Fold.objects.filter(journal=copy).count() == 3


def test_an_export_whose_ledger_does_not_verify_writes_nothing_over_the_api(api, corpus, tmp_path):
    original, _ = _original(corpus)
    path = _exported(original, tmp_path)
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record.get("type") == "retirement" and record.get("decided_in") is None:
            record["decided_in"] = 3  # the review fold then decides two requests
            lines[i] = json.dumps(record)
    body = "\n".join(lines[:-1]) + "\n"  # the end record: re-seal the file's digest
    end = {**json.loads(lines[-1]), "sha256": hashlib.sha256(body.encode()).hexdigest()}
    path.write_text(body + json.dumps(end) + "\n")

    r = _upload(api, path)

    assert r.status_code == 422, r.content
    assert r.json()["code"] == "reimport_invalid"
    assert not Session.objects.filter(key="copy").exists()


def test_without_the_registered_import_service_the_lookup_says_why():
    from journal_app import hooks

    registered = hooks.transcript_import_service()
    hooks.transcript_import_register(None)
    try:
        with pytest.raises(LookupError, match="recovery_app registers it"):
            hooks.transcript_import_service()
    finally:
        hooks.transcript_import_register(registered)
    assert hooks.transcript_import_service() is registered
