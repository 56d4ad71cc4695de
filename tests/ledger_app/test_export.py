"""Session export as JSON Lines and its re-import, hash for hash."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from django.db import transaction

from journal_app.formats import FormatError, parse_path
from journal_app.formats.base import message
from journal_app.models import Entry, Journal
from journal_app.services import journal_import
from ledger_app.models import Fold
from recovery_app.session_transfer import session_export
from tests.factories import TenantFactory, fold_build, journal_build

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def _export(session, **kw):
    out = io.BytesIO()
    summary = session_export(session=session, out=out, **kw)
    return out.getvalue(), summary


def _records(data: bytes):
    return [json.loads(line) for line in data.decode().splitlines()]


def _rewrite(tmp_path, records, name="s.jsonl"):
    """Write records back, with a fresh end digest (so only the record checks can fail)."""
    body = "".join(
        json.dumps(r, ensure_ascii=True, sort_keys=True) + "\n" for r in records[:-1]
    ).encode()
    end = {**records[-1], "sha256": hashlib.sha256(body).hexdigest()}
    path = tmp_path / name
    path.write_bytes(body + (json.dumps(end, sort_keys=True) + "\n").encode())
    return path


def test_it_exports_journal_folds_and_verdicts_with_hashes():
    journal = journal_build(tenant=TenantFactory(slug="acme"), key="refunds", title="Refunds")
    fold = fold_build(journal)
    data, summary = _export(journal.session)
    records = _records(data)
    types = [r["type"] for r in records]
    assert types[0] == "header" and types[1] == "journal" and types[-1] == "end"
    assert types.count("entry") == 11 and types.count("fold") == 1
    header = records[0]
    assert header["format"] == "ledgerkeep-export" and header["version"] == 1
    assert header["scope"] == {"tenant": "acme", "session": "refunds"}
    assert header["journals"][0]["head_hash"] == journal.head_hash
    entry = next(r for r in records if r["type"] == "entry" and r["seq"] == 2)
    stored = Entry.objects.get(journal=journal, seq=2)
    assert entry["entry_hash"] == stored.entry_hash and entry["body"] == stored.body
    assert entry["chunks"] == [
        [c.position, c.offset, c.length, c.hash] for c in stored.chunks.all()
    ]
    fold_record = next(r for r in records if r["type"] == "fold")
    assert fold_record["state_hash"] == fold.state_hash
    assert fold_record["delta_hash"] == hashlib.sha256(fold.delta.encode()).hexdigest()
    assert "verdicts" in json.loads(fold_record["delta"])
    assert (
        fold_record["manifest"]["covered"]["entry_hashes"][0]
        == Entry.objects.get(journal=journal, seq=1).entry_hash
    )
    end = records[-1]
    assert end["sha256"] == hashlib.sha256(data[: data.rstrip(b"\n").rfind(b"\n") + 1]).hexdigest()
    assert end["sha256"] == summary.sha256
    assert (end["records"], end["entries"]) == (len(records) - 1, 11)
    assert data.isascii()


def test_it_reimports_into_a_fresh_database_hash_for_hash(tmp_path):
    path = tmp_path / "refunds.jsonl"
    with transaction.atomic():
        journal = journal_build(tenant=TenantFactory(slug="acme"), key="refunds")
        fold_build(journal)
        data, _ = _export(journal.session)
        hashes = list(journal.entries.order_by("seq").values_list("entry_hash", flat=True))
        head = journal.head_hash
        transaction.set_rollback(True)
    assert not Journal.objects.exists() and not Entry.objects.exists()
    path.write_bytes(data)
    result = journal_import(path=path, tenant="acme", session="refunds")
    assert result.parsed.format == "ledgerkeep-export"
    copy = result.journal
    assert list(copy.entries.order_by("seq").values_list("entry_hash", flat=True)) == hashes
    assert copy.head_hash == head
    assert not Fold.objects.exists()  # the ledger is derived again, not imported
    fold_build(copy)  # and it folds like the original


def test_reimporting_into_the_original_scope_changes_nothing(tmp_path):
    journal = journal_build(tenant=TenantFactory(slug="acme"), key="refunds")
    data, _ = _export(journal.session)
    path = tmp_path / "refunds.jsonl"
    path.write_bytes(data)
    result = journal_import(path=path, tenant="acme")  # session key from the file name
    assert result.journal.pk == journal.pk
    assert (result.append.appended, result.append.unchanged) == (0, 11)


def test_another_scope_gets_its_own_hashes(tmp_path):
    journal = journal_build(tenant=TenantFactory(slug="acme"), key="refunds")
    data, _ = _export(journal.session)
    path = tmp_path / "refunds.jsonl"
    path.write_bytes(data)
    copy = journal_import(path=path, tenant="acme", session="refunds-copy").journal
    assert copy.head_seq == 11
    assert copy.head_hash != journal.head_hash  # the scope is part of the hash header
    first = copy.entries.get(seq=1)
    assert first.body == journal.entries.get(seq=1).body


def test_it_refuses_a_file_changed_after_export(tmp_path):
    journal = journal_build(tenant=TenantFactory(slug="acme"), key="refunds")
    data, _ = _export(journal.session)
    path = tmp_path / "x.jsonl"
    path.write_bytes(data.replace(b"refund rounding", b"refund ROUNDING"))
    with pytest.raises(FormatError) as err:
        parse_path(path)
    assert err.value.field == "sha256" and "changed after export" in str(err.value)
    path.write_bytes(b"".join(data.splitlines(keepends=True)[:-1]))
    with pytest.raises(FormatError, match="truncated"):
        parse_path(path)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r.update(body=r["body"].replace("refund", "REFUND")), "body_hash"),
        (lambda r: r.update(role="system"), "entry_hash"),
        (lambda r: r.update(parent_hash="0" * 64), "parent_hash"),
        (lambda r: r.update(meta='{"a":1}'), "meta_hash"),
        (lambda r: r.update(body='{"text": "x"}'), "body"),
        (lambda r: r.update(seq=5), "seq"),
        (lambda r: r["chunks"][0].__setitem__(3, "0" * 64), "chunks"),
    ],
)
def test_it_names_the_line_and_field_of_a_bad_entry(tmp_path, change, field):
    journal = journal_build(tenant=TenantFactory(slug="acme"), key="refunds")
    records = _records(_export(journal.session)[0])
    target = next(i for i, r in enumerate(records) if r["type"] == "entry" and r["seq"] == 2)
    change(records[target])
    path = _rewrite(tmp_path, records)
    with pytest.raises(FormatError) as err:
        journal_import(path=path, tenant="acme", session="other")
    assert err.value.field == field
    assert err.value.location == f"line {target + 1}"
    assert not Journal.objects.filter(session__key="other").exists()


def test_lanes_come_back_and_several_branches_are_refused(tmp_path):
    acme = TenantFactory(slug="acme")
    journal_build(tenant=acme, key="multi", items=[message("user", "main lane")])
    journal_build(tenant=acme, key="multi", lane="alpha", items=[message("user", "alpha lane")])
    session = Journal.objects.filter(session__key="multi").first().session
    data, _ = _export(session)
    path = tmp_path / "multi.jsonl"
    path.write_bytes(data)
    parsed = parse_path(path)
    assert sorted(e.lane for e in parsed.entries) == ["alpha", "main"]
    result = journal_import(path=path, tenant="acme")
    assert (result.append.appended, result.append.unchanged) == (0, 2)
    journal_build(tenant=acme, key="multi", branch="fork", items=[message("user", "fork")])
    data, _ = _export(session)
    path.write_bytes(data)
    with pytest.raises(FormatError, match="holds branches fork, main"):
        parse_path(path)
    data, _ = _export(session, branch="fork")
    path.write_bytes(data)
    assert [e.lane for e in parse_path(path).entries] == ["main"]


def test_recovery_receipts_are_exported_when_recovery_has_them():
    from django.apps import apps

    try:
        Receipt = apps.get_model("recovery_app", "Receipt")
    except LookupError:
        pytest.skip("recovery_app has no Receipt model yet")
    journal = journal_build(tenant=TenantFactory(slug="acme"), key="refunds")
    fold = fold_build(journal)
    Receipt.objects.all().delete()  # the fold's own recovery scan left one
    Receipt.objects.create(journal=journal, fold=fold, outcome="not_triggered", reason="no match")
    records = [r for r in _records(_export(journal.session)[0]) if r["type"] == "receipt"]
    assert len(records) == 1
    assert (records[0]["outcome"], records[0]["fold"], records[0]["lane"]) == (
        "not_triggered",
        1,
        "main",
    )


def test_comments_and_annotations_travel_with_the_export():
    from audit_app.services import annotation_add, comment_on_entry
    from tests.factories import UserFactory

    journal = journal_build(tenant=TenantFactory(slug="acme"), key="refunds")
    user = UserFactory(username="alice")
    entry = Entry.objects.get(journal=journal, seq=9)
    comment_on_entry(entry=entry, author=user, text="the real blocker")
    annotation_add(session=journal.session, author=user, verdict="bad", note="lost the goal")
    records = _records(_export(journal.session)[0])
    comment = next(r for r in records if r["type"] == "comment")
    assert (comment["target"], comment["entry_hash"], comment["author"], comment["text"]) == (
        "entry",
        entry.entry_hash,
        "alice",
        "the real blocker",
    )
    annotation = next(r for r in records if r["type"] == "annotation")
    assert (annotation["verdict"], annotation["note"]) == ("bad", "lost the goal")
