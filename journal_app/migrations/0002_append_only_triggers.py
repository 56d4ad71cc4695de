"""PostgreSQL triggers refusing UPDATE and DELETE on entries, chunks and artifacts.

DESIGN.md section 4: append-only through any code path. On SQLite the model layer's refusal
is the guard (this migration does nothing there). TRUNCATE is left to the table owner: it is
an administrative reset (and how the test runner flushes tables), not a code path.
"""

from django.db import migrations

TABLES = ["journal_app_entry", "journal_app_chunk", "journal_app_artifact"]

FUNCTION = """
CREATE OR REPLACE FUNCTION journal_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'append-only: % on % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(FUNCTION, params=None)
    for table in TABLES:
        schema_editor.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION journal_refuse_change();"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};")
    schema_editor.execute("DROP FUNCTION IF EXISTS journal_refuse_change();")


class Migration(migrations.Migration):
    dependencies = [("journal_app", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
