"""A verdict's claim and support stored once (bench/README.md, ``storage``): where they are
exactly the text and cited entries of one of its proposal's ops (an item that stood),
``op_at`` names that op and the ``claim``/``support`` columns hold ``""``/``[]``
(``Verdict.claim``/``Verdict.support`` read the same values either way:
``ledger_app.ops_refs.ItemRefs``). The fields are ``stored_claim``/``stored_support`` in the
model, the same columns. Existing verdicts stay copies: a row that refers is recorded with
its reference (``fold_record``'s ``item_ref``), so converting a sealed fold's rows would
change its record hash. New folds refer. Backwards, the values are copied back and those
journals' folds sealed again.
"""

import json

import importlib

from django.db import migrations, models

from ledger_app.ops_refs import op_item, ops_resolve

MIGRATION_0019 = importlib.import_module("ledger_app.migrations.0019_proposal_ops_by_reference")


def _proposals(apps):
    """Each proposal with verdicts and its ops as written (resolved from the delta)."""
    Fold = apps.get_model("ledger_app", "Fold")
    Proposal = apps.get_model("ledger_app", "Proposal")
    deltas = {}
    for p in Proposal.objects.filter(verdicts__isnull=False).distinct().order_by("pk"):
        ops = p.stored_ops
        if p.ops_from is not None:
            fold_id = p.attempt.fold_id
            if fold_id not in deltas:
                delta = Fold.objects.filter(pk=fold_id).values_list("delta", flat=True).first()
                deltas = {fold_id: json.loads(delta).get("ops", []) if delta else []}
            ops = ops_resolve(ops, p.ops_from, p.ops_count, deltas[fold_id])
        yield p, ops


def backwards(apps, schema_editor):
    Verdict = apps.get_model("ledger_app", "Verdict")
    journals = set()
    for proposal, ops in _proposals(apps):
        rows = []
        for v in Verdict.objects.filter(proposal=proposal, op_at__isnull=False):
            v.stored_claim, v.stored_support = op_item(ops[v.op_at] if v.op_at < len(ops) else None)
            v.op_at = None
            rows.append(v)
        Verdict.objects.bulk_update(rows, ["stored_claim", "stored_support", "op_at"])
        if rows:
            journals.add(proposal.attempt.journal_id)
    MIGRATION_0019.reseal(apps, journals)


class Migration(migrations.Migration):
    dependencies = [("ledger_app", "0020_pg_storage_params")]

    operations = [
        migrations.RenameField(model_name="verdict", old_name="claim", new_name="stored_claim"),
        migrations.AlterField(
            model_name="verdict",
            name="stored_claim",
            field=models.TextField(blank=True, db_column="claim"),
        ),
        migrations.RenameField(model_name="verdict", old_name="support", new_name="stored_support"),
        migrations.AlterField(
            model_name="verdict",
            name="stored_support",
            field=models.JSONField(
                db_column="support",
                default=list,
                help_text="cited entry hashes (hex), unless op_at",
            ),
        ),
        migrations.AddField(
            model_name="verdict",
            name="op_at",
            field=models.PositiveSmallIntegerField(
                blank=True,
                help_text="the index in the proposal's ops of the op whose text and support "
                "these are",
                null=True,
            ),
        ),
        migrations.RunPython(migrations.RunPython.noop, backwards),
    ]
