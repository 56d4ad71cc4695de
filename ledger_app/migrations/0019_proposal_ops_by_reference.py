"""A proposal's ops stored once (bench/README.md, ``storage``): where they are a run of their
fold's delta ops, ``ops_from``/``ops_count`` name it and the ``ops`` column holds ``[]``
(``Proposal.ops`` reads the same list either way: ``ledger_app.ops_refs``).

The field is ``stored_ops`` in the model, still the ``ops`` column. Existing proposals stay
copies: a row that refers is recorded with its reference (``fold_record``'s ``ops_ref``),
so converting a sealed fold's rows would change its record hash. New folds refer.
Backwards, the referred ops are copied back and those journals' folds sealed again.
"""

import json

from django.db import migrations, models

from ledger_app.ops_refs import ops_resolve


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


def reseal(apps, journal_ids):
    """Seal again every fold of these journals (their records lost a reference)."""
    from ledger_app.services.records import folds_seal

    models_ = tuple(
        apps.get_model("ledger_app", name)
        for name in ("Fold", "FoldAttempt", "Proposal", "Verdict")
    )
    for journal_id in sorted(journal_ids):
        folds_seal(journal_id, models_)


def backwards(apps, schema_editor):
    Fold = apps.get_model("ledger_app", "Fold")
    Proposal = apps.get_model("ledger_app", "Proposal")
    journals = set()
    for fold_id, delta_ops in _folds(apps):
        rows = []
        for p in Proposal.objects.filter(attempt__fold_id=fold_id, ops_from__isnull=False):
            p.stored_ops = ops_resolve(p.stored_ops, p.ops_from, p.ops_count, delta_ops)
            p.ops_from, p.ops_count = None, 0
            rows.append(p)
        Proposal.objects.bulk_update(rows, ["stored_ops", "ops_from", "ops_count"])
        if rows:
            journals.add(Fold.objects.filter(pk=fold_id).values_list("journal_id", flat=True)[0])
    reseal(apps, journals)


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
        migrations.RunPython(migrations.RunPython.noop, backwards),
    ]
