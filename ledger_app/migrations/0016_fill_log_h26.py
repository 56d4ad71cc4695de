"""Start the hash-chained log with every existing retirement request, comment, annotation
and audit event (audit_app.chained_log.log_fill on the historical models)."""

from django.db import migrations


def forwards(apps, schema_editor):
    from audit_app.chained_log import log_fill

    log = apps.get_model("audit_app", "LogRecord")
    logged = [
        (apps.get_model("audit_app", "AuditEvent"), "tenant_id"),
        (apps.get_model("audit_app", "Comment"), "tenant_id"),
        (apps.get_model("audit_app", "Annotation"), "tenant_id"),
        (apps.get_model("ledger_app", "RetirementRequest"), "journal__session__tenant_id"),
    ]
    log_fill(log, logged)


class Migration(migrations.Migration):
    dependencies = [
        ("ledger_app", "0015_fill_fold_record_hash_h26"),
        ("audit_app", "0003_append_only_triggers_h26"),
    ]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
