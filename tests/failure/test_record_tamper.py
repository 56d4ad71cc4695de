"""Every stored column of every ledger and audit model is covered by ``verify_ledger``.

The test enumerates the concrete fields of each model of ``ledger_app`` and ``audit_app``
(``apps.get_app_config(...).get_models()``), changes each one in one stored row behind the
services (as a database user could), and asserts ``verify_ledger`` exits non-zero. A
column added to a model is tampered like the others, so a column that no check covers fails
the suite. :data:`EXEMPT` lists the models that are not records, with the reason.
"""

from __future__ import annotations

import datetime
import json

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, models, transaction

from audit_app.services import annotation_add, comment_add, comment_on_entry
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry, Journal
from journal_app.services import journal_append
from ledger_app.services import ledger_fold
from tests.factories import TenantFactory, journal_build
from tests.failure.test_ledger_tamper import ledger  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db

#: models that hold no record of what happened, and why
EXEMPT = {
    "ledger_app.TaskRun": "the task queue's operational state (status changes as it runs)",
    "ledger_app.FoldInvariants": "a cache of a fold's invariants panel, recomputed on read",
    "ledger_app.StoredCheck": "a cache of the last ledger check, rerun when the ledger moves",
}


def _fields() -> list[tuple[str, str]]:
    out = []
    for app in ("ledger_app", "audit_app"):
        for model in apps.get_app_config(app).get_models():
            label = model._meta.label
            if label in EXEMPT:
                continue
            for f in model._meta.concrete_fields:
                if not f.primary_key:
                    out.append((label, f.attname))
    return out


FIELDS = _fields()


def _changed(field: models.Field, value):
    """A different value of the column's type (a wrong one a tamperer could write)."""
    kind = field.get_internal_type()
    if field.is_relation:  # another existing row (for a one-to-one: one not pointed at yet)
        used = field.model._base_manager.exclude(**{f"{field.attname}__isnull": True})
        taken = list(used.values_list(field.attname, flat=True)) if field.unique else [value]
        other = field.related_model._base_manager.exclude(pk__in=taken)
        assert other.exists(), f"no other {field.related_model._meta.label} to point at"
        return other.order_by("pk").values_list("pk", flat=True).first()
    if kind == "BooleanField":
        return not value
    if kind == "JSONField":
        if isinstance(value, dict):
            return json.dumps({**value, "tampered": 1})
        if isinstance(value, list):
            return json.dumps([*value, "tampered"])
        return json.dumps({"tampered": 1})
    if kind == "DateTimeField":
        return (value or datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)) + datetime.timedelta(
            seconds=1
        )
    if "Integer" in kind:  # far off: a neighbour's number is taken (unique per journal)
        return (value or 0) + 1000
    text = value or ""
    return text[:-1] + ("0" if text[-1:] != "0" else "1") if text else "x"


def _tamper(label: str, attname: str) -> str:
    """Change column ``attname`` of the first ``label`` row below the application; what
    changed, or ``""`` when a unique or check constraint of the database refuses it."""
    model = apps.get_model(label)
    field = next(f for f in model._meta.concrete_fields if f.attname == attname)
    rows = model._base_manager.order_by("pk").values_list("pk", attname)
    assert rows.exists(), f"the ledger under test has no {label} row"
    pk, value = rows.first()
    if field.get_internal_type() == "JSONField":
        value = json.loads(value) if isinstance(value, str) else value
    new = _changed(field, value)
    kind = field.get_internal_type()
    table = model._meta.db_table
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = replica")
        try:
            cast = "::jsonb" if connection.vendor == "postgresql" and "JSON" in kind else ""
            with transaction.atomic():
                cur.execute(
                    f'UPDATE {table} SET "{field.column}" = %s{cast} WHERE id = %s', [new, pk]
                )
        except IntegrityError:
            return ""  # the database's own constraints refuse this change
        finally:
            if connection.vendor == "postgresql":
                cur.execute("SET session_replication_role = DEFAULT")
    return f"{label} {pk} {attname}: {value!r} -> {new!r}"


@pytest.fixture
def records(ledger):  # noqa: F811
    """The tamper ledger plus one of everything else: comments, an annotation, a model fold."""
    rita = get_user_model().objects.get(username="rita")
    journal = ledger
    comment_add(journal=journal, author=rita, text="checked the pin", fact_id="pin:x")
    comment_on_entry(entry=Entry.objects.get(journal=journal, seq=1), author=rita, text="ok")
    annotation_add(session=journal.session, author=rita, verdict="good", note="clean")
    # a second tenant's ledger and user: other rows a foreign key can be pointed at
    other = journal_build(
        tenant=TenantFactory(slug="globex"),
        items=[
            message("user", "Fix the build."),
            tool_call("c1", "exec", {"command": "make"}),
            tool_result("c1", "ok", exit_code=0),
        ],
    )
    ledger_fold(journal=other)
    journal_append(journal=other, items=[message("user", "And the docs.")])
    ledger_fold(journal=other)
    hugo = get_user_model().objects.create_user("hugo", password="pw-hugo")
    comment_add(journal=other, author=hugo, text="seen", fact_id="pin:y")
    annotation_add(session=other.session, author=hugo, verdict="bad", note="noisy")
    return Journal.objects.get(pk=journal.pk)


def test_the_ledger_with_every_record_verifies(records, capsys):
    call_command("verify_ledger")
    assert "every fold record and log record hash matched" in capsys.readouterr().out
    for label, _ in FIELDS:
        assert apps.get_model(label)._base_manager.exists(), f"no {label} row to tamper"


@pytest.mark.parametrize(("label", "attname"), FIELDS, ids=[f"{m}.{a}" for m, a in FIELDS])
def test_a_change_of_any_stored_column_fails_verify_ledger(records, label, attname):
    what = _tamper(label, attname)
    if not what:
        return
    with pytest.raises(CommandError, match="MISMATCH") as caught:
        call_command("verify_ledger")
    assert caught.value, what


@pytest.mark.parametrize("label", ["audit_app.AuditEvent", "audit_app.Comment"])
def test_a_deleted_log_row_is_named(records, label):
    model = apps.get_model(label)
    pk = model._base_manager.order_by("-pk").values_list("pk", flat=True).first()
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = replica")
        try:
            cur.execute(f"DELETE FROM {model._meta.db_table} WHERE id = %s", [pk])
        finally:
            if connection.vendor == "postgresql":
                cur.execute("SET session_replication_role = DEFAULT")
    with pytest.raises(CommandError) as caught:
        call_command("verify_ledger")
    assert f"{label} {pk}: deleted" in str(caught.value)


def test_an_edited_fold_note_names_the_fold(records):
    from ledger_app.models import Fold

    fold = Fold.objects.get(journal=records, number=2)
    Fold.objects.filter(pk=fold.pk).update(manifest={**fold.manifest, "note": "all fine"})
    with pytest.raises(CommandError) as caught:
        call_command("verify_ledger", "acme")
    assert "fold 2 (record_hash)" in str(caught.value)
