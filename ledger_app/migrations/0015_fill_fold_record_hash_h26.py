"""Seal every existing fold: its record hash, chained per journal in fold order
(ledger_app.services.records, run on the historical models)."""

from django.db import migrations


def forwards(apps, schema_editor):
    from ledger_app.services.records import folds_seal

    models = tuple(
        apps.get_model("ledger_app", name)
        for name in ("Fold", "FoldAttempt", "Proposal", "Verdict")
    )
    journals = models[0].objects.values_list("journal_id", flat=True).distinct()
    for journal_id in list(journals):
        folds_seal(journal_id, models)


class Migration(migrations.Migration):
    dependencies = [("ledger_app", "0014_fold_record_hash_h26")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
