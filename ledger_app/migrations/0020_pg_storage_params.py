"""PostgreSQL storage parameters of two ledger tables (bench/README.md, ``storage``).

* ``ledger_app_ledgerterm``, ``fillfactor`` 50: every fold upserts the counts of the terms
  its facts change, and an ``UPDATE`` writes a new row version; with full pages (rows are
  bulk-inserted) it lands on another page with new index entries, and the old versions stay
  until a vacuum (at 4,000 entries: 730 live rows, 8,500 dead ones). With room on the page
  an update stays there (``facts`` is in no index: a HOT update, no new index entry) and the
  page's dead versions are pruned when it fills, without a vacuum.
* ``ledger_app_ledgerfact``, ``toast_tuple_target`` 128: a fact row wider than the TOAST
  threshold (2 kB) has its wide values (``data``, ``text``) moved out of line down to 128
  bytes instead of 2 kB, so the ``until`` update of a replaced version copies the narrow
  columns and the TOAST pointers, not the fact again.

Values are unchanged; nothing to do on SQLite.
"""

from django.db import migrations

SETTINGS = (
    ("ledger_app_ledgerterm", "fillfactor", "50"),
    ("ledger_app_ledgerfact", "toast_tuple_target", "128"),
)


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table, name, value in SETTINGS:
            schema_editor.execute(f"ALTER TABLE {table} SET ({name} = {value})")


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table, name, _ in SETTINGS:
            schema_editor.execute(f"ALTER TABLE {table} RESET ({name})")


class Migration(migrations.Migration):
    dependencies = [("ledger_app", "0019_proposal_ops_by_reference")]

    operations = [migrations.RunPython(forwards, backwards)]
