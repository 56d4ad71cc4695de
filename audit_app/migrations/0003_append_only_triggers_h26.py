"""PostgreSQL triggers refusing UPDATE and DELETE on the log, comments, annotations and
audit events (the journal's rule and function, journal_app 0002). On SQLite the model layer's
refusal is the guard, as for the journal; TRUNCATE stays the table owner's reset."""

from django.db import migrations

TABLES = [
    "audit_app_logrecord",
    "audit_app_comment",
    "audit_app_annotation",
    "audit_app_auditevent",
]


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
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


class Migration(migrations.Migration):
    dependencies = [
        ("audit_app", "0002_logrecord_h26"),
        ("journal_app", "0002_append_only_triggers"),
    ]
    operations = [migrations.RunPython(forwards, backwards)]
