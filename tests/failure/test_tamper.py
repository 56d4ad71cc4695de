"""Any single byte changed in a stored entry, chunk or artifact is reported by verify_journal.

Issue 8 and docs/design.md section 4 (content addressing). Each case changes one stored value
behind the model layer (raw SQL; on PostgreSQL with the append-only trigger switched off for
the statement) by one byte: a character of a string at its first, middle or last position,
one bit of an integer, a boolean flipped, a byte of an artifact's stored file. Then
``journal_verify`` (what ``manage.py verify_journal`` runs) must report the entry it is in.

Runs on SQLite and PostgreSQL alike: no service is needed to tamper with a row.

``tool_name`` is in the entry header and ``is_error`` is checked against the body; an
artifact's byte size, media type and preview are recomputed from its bytes. The figures
derived at append (token counts, the token source label, ``source_ref``, the artifact's
token count) are outside the entry header; the entry's ``figures_hash`` binds them
, so a change there is reported at the entry too, without recounting.
"""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Artifact, Chunk, Entry, Journal
from journal_app.services import journal_verify
from tests.factories import TenantFactory, journal_build

pytestmark = pytest.mark.django_db

TARGET = 4  # the tool result in the middle: several chunks, an artifact, metadata
HEAD = 7
POSITIONS = ("first", "middle", "last")


def _items():
    log = "\n".join(f"test_refunds.py::test_case_{i} PASSED [{i}%]" for i in range(40))
    return [
        message("system", "Never touch the payments tables without asking first."),
        message("user", "Fix the refund rounding."),
        tool_call("c1", "exec", {"command": "pytest -v tests/test_refunds.py"}),
        tool_result(
            "c1",
            log + "\n1 failed, 39 passed",
            is_error=True,
            exit_code=1,
            name="exec",
            source_ref="line 4",
            metadata={"cwd": "/srv/app", "duration_ms": 2300},
        ),  # fmt: skip
        message("assistant", "One test fails; reading it."),
        tool_call("c2", "read_file", {"path": "tests/test_refunds.py"}),
        tool_result("c2", "def test_case_1():\n    assert refund(1.005) == 1.01\n"),
    ]


@pytest.fixture
def journal(settings, tmp_path) -> Journal:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.JOURNAL_CHUNK_BYTES = 256
    settings.ARTIFACT_THRESHOLD_TOKENS = 100
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    journal = journal_build(tenant=TenantFactory(slug="acme"), items=_items())
    target = Entry.objects.get(journal=journal, seq=TARGET)
    assert target.artifact_id is not None and target.chunks.count() >= 3
    assert journal_verify(journals=[journal]).ok
    return journal


def _raw(sql: str, params: list) -> None:
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = replica")
        try:
            cur.execute(sql, params)
        finally:
            if connection.vendor == "postgresql":
                cur.execute("SET session_replication_role = DEFAULT")


def _one_byte(value, position: str):
    """``value`` with one byte changed (a string character, an integer bit, a boolean)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value ^ 64  # one bit; never onto a neighbour (position 1 -> 65, not 0)
    if not value:
        return "x"
    i = {"first": 0, "middle": len(value) // 2, "last": len(value) - 1}[position]
    while i < len(value) - 1 and not value[i].isascii():
        i += 1
    old = value[i]
    if old in "0123456789abcdef" and len(value) == 64:
        new = "0123456789abcdef"[("0123456789abcdef".index(old) + 1) % 16]  # still hex
    else:
        new = "b" if old != "b" else "c"
    return value[:i] + new + value[i + 1 :]


def _change_column(model, pk: int, column: str, position: str) -> None:
    table = model._meta.db_table
    with connection.cursor() as cur:
        cur.execute(f'SELECT "{column}" FROM {table} WHERE id = %s', [pk])
        (value,) = cur.fetchone()
    if column in ("derived", "is_error"):
        value = bool(value)  # SQLite hands booleans back as integers
    _raw(f'UPDATE {table} SET "{column}" = %s WHERE id = %s', [_one_byte(value, position), pk])


def _failure(journal: Journal) -> dict:
    report = journal_verify(journals=[Journal.objects.get(pk=journal.pk)])
    assert report.first_failure is not None, "the change went unnoticed"
    return report.first_failure


ENTRY_COLUMNS = [
    "body",
    "meta",
    "kind",
    "role",
    "tool_call_id",
    "body_hash",
    "meta_hash",
    "parent_hash",
    "entry_hash",
    "byte_length",
    "derived",
    "tool_name",
    "is_error",
    "token_count",
    "token_source",
    "source_ref",
    "figures_hash",
]


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("column", ENTRY_COLUMNS)
def test_a_changed_byte_in_an_entry_is_reported_at_that_entry(journal, column, position):
    target = Entry.objects.get(journal=journal, seq=TARGET)
    _change_column(Entry, target.pk, column, position)
    failure = _failure(journal)
    assert failure["seq"] == TARGET
    assert failure["scope"] == "acme/s1/main/main"


@pytest.mark.parametrize("column", ["position", "offset", "length", "hash"])
@pytest.mark.parametrize("position", POSITIONS)
def test_a_changed_byte_in_a_chunk_is_reported_at_its_entry(journal, column, position):
    chunk = Chunk.objects.filter(entry__journal=journal, entry__seq=TARGET).order_by("position")[1]
    _change_column(Chunk, chunk.pk, column, position)
    failure = _failure(journal)
    assert failure["seq"] == TARGET
    assert any("chunk" in p for p in failure["problems"]), failure["problems"]


@pytest.mark.parametrize("position", POSITIONS)
def test_a_changed_byte_in_an_artifacts_stored_file_is_reported(journal, settings, position):
    artifact = Entry.objects.get(journal=journal, seq=TARGET).artifact
    path = settings.MEDIA_ROOT / artifact.storage_name
    data = bytearray(path.read_bytes())
    i = {"first": 0, "middle": len(data) // 2, "last": len(data) - 1}[position]
    data[i] = ord("b") if data[i] != ord("b") else ord("c")
    path.write_bytes(bytes(data))
    failure = _failure(journal)
    assert failure["seq"] == TARGET
    assert any(artifact.reference in p for p in failure["problems"]), failure["problems"]


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize(
    "column", ["content_hash", "byte_size", "preview", "media_type", "token_count", "token_source"]
)
def test_a_changed_byte_in_an_artifact_row_is_reported(journal, column, position):
    artifact = Entry.objects.get(journal=journal, seq=TARGET).artifact
    _change_column(Artifact, artifact.pk, column, position)
    assert _failure(journal)["seq"] == TARGET


def test_a_changed_seq_leaves_a_gap_that_is_reported(journal):
    target = Entry.objects.get(journal=journal, seq=TARGET)
    _raw(f"UPDATE {Entry._meta.db_table} SET seq = %s WHERE id = %s", [TARGET + 100, target.pk])
    failure = _failure(journal)
    assert failure["seq"] == TARGET + 1
    assert any(p.startswith("seq: expected 4") for p in failure["problems"]), failure["problems"]


@pytest.mark.parametrize("column", ["head_seq", "head_hash"])
def test_a_changed_journal_head_is_reported(journal, column):
    _change_column(Journal, journal.pk, column, "middle")
    failure = _failure(journal)
    assert any(p.startswith("head:") for p in failure["problems"]), failure["problems"]


def test_the_command_exits_non_zero_naming_the_changed_entry(journal):
    target = Entry.objects.get(journal=journal, seq=TARGET)
    _change_column(Entry, target.pk, "body", "middle")
    with pytest.raises(CommandError, match=rf"MISMATCH in acme/s1/main/main at seq {TARGET} "):
        call_command("verify_journal", "acme", "--no-progress")
    assert HEAD == Journal.objects.get(pk=journal.pk).head_seq
