"""A proposal's ops stored once (bench/README.md, ``storage``): where they are a run of their
fold's delta ops, ``ops_from``/``ops_count`` name it and the ``ops`` column holds ``[]``
(``Proposal.ops`` reads the same list either way: ``ledger_app.ops_refs``).

The field is ``stored_ops`` in the model, still the ``ops`` column. Existing proposals of
stored folds are converted; the record hashes do not change (``fold_record`` hashes the
ops as written, resolved). Backwards, the referred ops are copied back.
"""

import json

from django.db import migrations, models

from ledger_app.ops_refs import ops_refer, ops_resolve


def _folds(apps):
    Fold = apps.get_model("ledger_app", "Fold")
    Proposal = apps.get_model("ledger_app", "Proposal")
    fold_ids = (
        Proposal.objects.filter(attempt__fold__isnull=False)
        .values_list("attempt__fold_id", flat=True)
        .distinct()
        .order_by("attempt__fold_id")
    )
    for fold_id in list(fold_ids):
        delta = Fold.objects.filter(pk=fold_id).values_list("delta", flat=True).first()
        yield fold_id, (json.loads(delta).get("ops", []) if delta else [])


def forwards(apps, schema_editor):
    Proposal = apps.get_model("ledger_app", "Proposal")
    for fold_id, delta_ops in _folds(apps):
        rows = []
        for p in Proposal.objects.filter(attempt__fold_id=fold_id, ops_from__isnull=True):
            refer = ops_refer(p.stored_ops, delta_ops)
            if refer is not None:
                p.stored_ops, (p.ops_from, p.ops_count) = [], refer
                rows.append(p)
        Proposal.objects.bulk_update(rows, ["stored_ops", "ops_from", "ops_count"])


def backwards(apps, schema_editor):
    Proposal = apps.get_model("ledger_app", "Proposal")
    for fold_id, delta_ops in _folds(apps):
        rows = []
        for p in Proposal.objects.filter(attempt__fold_id=fold_id, ops_from__isnull=False):
            p.stored_ops = ops_resolve(p.stored_ops, p.ops_from, p.ops_count, delta_ops)
            p.ops_from, p.ops_count = None, 0
            rows.append(p)
        Proposal.objects.bulk_update(rows, ["stored_ops", "ops_from", "ops_count"])


class Migration(migrations.Migration):
    dependencies = [("ledger_app", "0018_compact_storage")]

    operations = [
        migrations.RenameField(model_name="proposal", old_name="ops", new_name="stored_ops"),
        migrations.AlterField(
            model_name="proposal",
            name="stored_ops",
            field=models.JSONField(
                db_column="ops",
                default=list,
                help_text="the ops, unless ops_from refers to the delta's",
            ),
        ),
        migrations.AddField(
            model_name="proposal",
            name="ops_from",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="index of the first of these ops in the fold's delta",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="proposal",
            name="ops_count",
            field=models.PositiveIntegerField(default=0, help_text="ops referred to (ops_from)"),
        ),
        migrations.RunPython(forwards, backwards),
    ]
