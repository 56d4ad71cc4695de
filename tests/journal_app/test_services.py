import json

import pytest
from django.db import connection, transaction
from django.db.utils import DatabaseError

from journal_app.entry_validation import EntryInvalid
from journal_app.formats import FormatError
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import AppendOnlyError, Artifact, Chunk, Entry, Journal, Session, Tenant
from journal_app.services import (
    ConflictError,
    GapError,
    artifact_store,
    journal_append,
    journal_ensure,
    journal_import,
    journal_verify,
    session_ensure,
    tenant_ensure,
)

pytestmark = pytest.mark.django_db


def _journal(key="s1"):
    t = tenant_ensure(slug="acme")
    return journal_ensure(session=session_ensure(tenant=t, key=key))


def _items():
    return [
        message("system", "Never touch the payments tables."),
        message("user", "Fix the refund rounding."),
        tool_call("c1", "exec", {"command": "pytest"}),
        tool_result("c1", "1 failed, 13 passed", is_error=True, exit_code=1),
    ]


def _raw_update(sql, params):
    """Change a stored row behind the model layer (and, on PostgreSQL, the trigger)."""
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = replica")
        cur.execute(sql, params)
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = DEFAULT")


def test_it_chains_entries_and_keeps_text_verbatim():
    j = _journal()
    res = journal_append(journal=j, items=_items())
    entries = list(Entry.objects.filter(journal=j).order_by("seq"))
    assert [e.seq for e in entries] == [1, 2, 3, 4]
    assert entries[0].parent_hash == ""
    for prev, cur in zip(entries, entries[1:], strict=False):
        assert cur.parent_hash == prev.entry_hash
    assert json.loads(entries[0].body)["text"] == "Never touch the payments tables."
    assert res.head_seq == 4
    j.refresh_from_db()
    assert j.head_hash == entries[-1].entry_hash
    assert entries[3].is_error and entries[3].content["exit_code"] == 1
    assert entries[0].token_source == "tiktoken:o200k_base" and entries[0].token_count > 3


def test_the_same_append_twice_is_a_no_op():
    j = _journal()
    journal_append(journal=j, items=_items())
    again = journal_append(journal=j, items=_items(), start_seq=1)
    assert (again.appended, again.unchanged) == (0, 4)
    assert Entry.objects.filter(journal=j).count() == 4


def test_a_different_entry_at_an_existing_seq_conflicts_and_writes_nothing():
    j = _journal()
    journal_append(journal=j, items=_items())
    changed = _items()
    changed[1] = message("user", "Fix the refund rounding!")
    changed.append(message("user", "new tail entry"))
    with pytest.raises(ConflictError) as exc:
        journal_append(journal=j, items=changed, start_seq=1)
    assert exc.value.seq == 2
    assert Entry.objects.filter(journal=j).count() == 4
    assert Journal.objects.get(pk=j.pk).head_seq == 4


def test_a_gap_is_refused():
    j = _journal()
    with pytest.raises(GapError):
        journal_append(journal=j, items=_items(), start_seq=3)
    assert not Entry.objects.exists()


def test_model_layer_refuses_update_and_delete():
    j = _journal()
    journal_append(journal=j, items=_items())
    e = Entry.objects.filter(journal=j).first()
    e.body = "{}"
    with pytest.raises(AppendOnlyError):
        e.save()
    with pytest.raises(AppendOnlyError):
        e.delete()
    with pytest.raises(AppendOnlyError):
        Entry.objects.filter(journal=j).update(body="{}")
    with pytest.raises(AppendOnlyError):
        Chunk.objects.all().delete()
    assert Entry.objects.get(pk=e.pk).body != "{}"


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the trigger exists on PostgreSQL only"
)
def test_postgres_trigger_refuses_update_and_delete_behind_the_orm():
    j = _journal()
    journal_append(journal=j, items=_items())
    e = Entry.objects.filter(journal=j).first()
    for sql in (
        "UPDATE journal_app_entry SET body = '{}' WHERE id = %s",
        "DELETE FROM journal_app_chunk WHERE entry_id = %s",
        "DELETE FROM journal_app_entry WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="append-only"):
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute(sql, [e.pk])
    assert Entry.objects.get(pk=e.pk).body == e.body


def test_verify_finds_one_changed_byte_in_a_stored_body():
    j = _journal()
    journal_append(journal=j, items=_items())
    assert journal_verify(journals=[j]).ok
    e = Entry.objects.get(journal=j, seq=2)
    tampered = e.body.replace("refund", "refunD")
    _raw_update("UPDATE journal_app_entry SET body = %s WHERE id = %s", [tampered, e.pk])
    report = journal_verify(journals=[j])
    assert not report.ok
    assert report.first_failure["seq"] == 2
    assert any(p.startswith("body_hash") for p in report.first_failure["problems"])


def test_verify_finds_a_changed_chunk_hash_and_a_broken_parent_link():
    j = _journal()
    journal_append(journal=j, items=_items())
    c = Chunk.objects.filter(entry__journal=j, entry__seq=3).first()
    _raw_update("UPDATE journal_app_chunk SET hash = %s WHERE id = %s", ["0" * 64, c.pk])
    report = journal_verify(journals=[j])
    assert report.first_failure["seq"] == 3
    assert any(p.startswith("chunk 0") for p in report.first_failure["problems"])


def test_oversized_tool_results_become_one_artifact(settings):
    settings.ARTIFACT_THRESHOLD_TOKENS = 50
    j = _journal()
    big = "\n".join(f"line {i}: ERROR something failed" for i in range(200))
    items = [
        tool_call("a", "exec", {"command": "cat log"}),
        tool_result("a", big),
        tool_call("b", "exec", {"command": "cat log"}),
        tool_result("b", big),
    ]
    journal_append(journal=j, items=items)
    assert Artifact.objects.count() == 1
    art = Artifact.objects.get()
    assert art.reference == f"artifact://acme/{art.content_hash}"
    assert art.receipt()["original_size"]["bytes"] == len(big.encode())
    assert "errors:" in art.preview or "head:" in art.preview
    again, created = artifact_store(tenant=Tenant.objects.get(slug="acme"), content=big)
    assert (again.pk, created) == (art.pk, False)


def _write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


BAD_INPUTS = [
    ("empty.json", b"", "file is empty"),
    ("truncated.json", b'[{"role": "user", "content": "hi"}', "truncated JSON"),
    ("notjson.jsonl", b'{"type": "user"}\nnot json\n', "line 2"),
    (
        "latin1.json",
        '[{"role": "user", "content": "caf\xe9"}]'.encode("latin-1"),
        "not valid UTF-8",
    ),
    ("unknown.json", b'{"hello": "world"}', "unknown transcript format"),
    (
        "orphan.json",
        json.dumps(
            [
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "x", "content": "out"},
            ]
        ).encode(),
        "no matching tool call",
    ),
    ("null.json", json.dumps([{"role": "user", "content": None}]).encode(), "content"),
]


@pytest.mark.parametrize("name,data,needle", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_names_the_file_and_writes_nothing(tmp_path, name, data, needle):
    path = _write(tmp_path, name, data)
    with pytest.raises(FormatError) as exc:
        journal_import(path=path, tenant="acme")
    assert name in str(exc.value)
    assert needle in str(exc.value)
    assert Tenant.objects.count() == 0
    assert Session.objects.count() == Journal.objects.count() == Entry.objects.count() == 0


def test_an_entry_that_cannot_be_canonical_fails_the_whole_import(tmp_path):
    msgs = [
        {"role": "user", "content": "fine"},
        {"role": "user", "content": "bad \ud800 surrogate"},
    ]
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps(msgs))  # json escapes the lone surrogate as \ud800
    with pytest.raises(FormatError) as exc:
        journal_import(path=path, tenant="acme")
    assert "surrogate.json" in str(exc.value) and "content" in str(exc.value)
    assert Entry.objects.count() == 0 and Session.objects.count() == 0


def test_reimporting_the_same_file_changes_nothing(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    )
    first = journal_import(path=path, tenant="acme")
    second = journal_import(path=path, tenant="acme")
    assert (first.append.appended, second.append.appended, second.append.unchanged) == (2, 0, 2)


def test_an_appended_result_needs_its_call_earlier_in_the_journal():
    j = _journal()
    journal_append(journal=j, items=[tool_call("a", "exec", {"command": "ls"})])
    journal_append(journal=j, items=[tool_result("a", "ok")])  # the call is in the journal
    with pytest.raises(EntryInvalid, match="no matching tool call"):
        journal_append(journal=j, items=[message("user", "x"), tool_result("zz", "orphan")])
    with pytest.raises(EntryInvalid, match="second tool result"):
        journal_append(journal=j, items=[tool_result("a", "again")])
    assert Entry.objects.filter(journal=j).count() == 2


def test_wrong_types_and_kind_role_pairs_are_refused_naming_the_field():
    j = _journal()
    bad = [
        (tool_result("a", "x"), "content.is_error", {"is_error": "no"}),
        (tool_result("a", "x"), "content.exit_code", {"exit_code": "1"}),
    ]
    journal_append(journal=j, items=[tool_call("a", "exec", {})])
    for item, field, patch in bad:
        item.content.update(patch)
        with pytest.raises(EntryInvalid) as exc:
            journal_append(journal=j, items=[item])
        assert exc.value.field == field
    wrong_role = message("user", "hi")
    wrong_role.kind = "tool_call"
    wrong_role.tool_call_id = "b"
    wrong_role.content = {"name": "x", "arguments": {}}
    with pytest.raises(EntryInvalid) as exc:
        journal_append(journal=j, items=[wrong_role])
    assert exc.value.field == "role"
    assert Entry.objects.filter(journal=j).count() == 1


def test_verify_with_no_scope_reports_every_journal_when_one_mismatches():
    from django.core.management import CommandError, call_command

    first, second, third = _journal("s1"), _journal("s2"), _journal("s3")
    for j in (first, second, third):
        journal_append(journal=j, items=_items())
    for j in (first, third):
        e = Entry.objects.get(journal=j, seq=2)
        _raw_update(
            "UPDATE journal_app_entry SET body = %s WHERE id = %s",
            [e.body.replace("refund", "refunD"), e.pk],
        )
    report = journal_verify(journals=[first, second, third])
    assert report.journals == 3
    assert [f["scope"] for f in report.failures] == [first.scope_label, third.scope_label]
    assert report.first_failure == report.failures[0]
    with pytest.raises(CommandError) as caught:
        call_command("verify_journal", "--no-progress")
    message = str(caught.value)
    assert f"MISMATCH in {first.scope_label} at seq 2" in message
    assert f"MISMATCH in {third.scope_label} at seq 2" in message
    assert "2 of 3 journals do not match; the other 1 matched" in message
