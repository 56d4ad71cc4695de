"""Step 1 of 3 (issue 18): folds keep deltas and checkpoints; fact rows and the term index.

``Fold.state`` becomes nullable (only checkpoints keep it), ``Fold.state_acc`` is added
nullable (0008 fills it, 0009 makes it required), and the fact-row tables are created.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("journal_app", "0008_entry_identifiers"),
        ("ledger_app", "0006_taskrun_lost"),
    ]

    operations = [
        migrations.AddField(
            model_name="fold",
            name="state_acc",
            field=models.TextField(
                help_text="the state's fact accumulator (ledger_app.reducer.acc_hex) after this fold",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="fold",
            name="state",
            field=models.TextField(
                blank=True,
                help_text="canonical JSON of the ledger state after this fold: checkpoints only",
                null=True,
            ),
        ),
        migrations.CreateModel(
            name="LedgerFact",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("fact_id", models.TextField()),
                (
                    "since",
                    models.PositiveIntegerField(help_text="fold number this version starts at"),
                ),
                (
                    "until",
                    models.PositiveIntegerField(
                        blank=True, help_text="fold number that replaced or evicted it", null=True
                    ),
                ),
                (
                    "change",
                    models.CharField(
                        help_text="born, or the new lifecycle, or 'changed' (review, pending)",
                        max_length=16,
                    ),
                ),
                ("category", models.CharField(max_length=24)),
                ("priority", models.CharField(max_length=4)),
                ("lifecycle", models.CharField(max_length=16)),
                ("confidence", models.CharField(max_length=16)),
                ("pin", models.BooleanField(default=False)),
                (
                    "pin_entry",
                    models.CharField(blank=True, help_text="the pin's entry (hex)", max_length=64),
                ),
                ("origin_fold", models.PositiveIntegerField(blank=True, null=True)),
                (
                    "command_key",
                    models.TextField(blank=True, help_text="the offline writer's command key"),
                ),
                ("text", models.TextField()),
                ("data", models.TextField(help_text="canonical JSON of the fact")),
                (
                    "tokens",
                    models.PositiveIntegerField(default=0, help_text="tokens of the fact's text"),
                ),
                (
                    "journal",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="ledger_facts",
                        to="journal_app.journal",
                    ),
                ),
            ],
            options={
                "ordering": ["journal_id", "fact_id", "since"],
                "indexes": [
                    models.Index(
                        fields=["journal", "until", "priority", "fact_id"], name="ledgerfact_now"
                    ),
                    models.Index(fields=["journal", "since"], name="ledgerfact_since"),
                    models.Index(fields=["journal", "pin_entry"], name="ledgerfact_pin_entry"),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("journal", "fact_id", "since"), name="ledgerfact_unique_version"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="LedgerTerm",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("term", models.CharField(max_length=64)),
                ("facts", models.IntegerField(default=0)),
                (
                    "journal",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="ledger_terms",
                        to="journal_app.journal",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("journal", "term"), name="ledgerterm_unique")
                ],
            },
        ),
    ]
