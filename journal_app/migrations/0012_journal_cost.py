"""A journal's computed cost stored per price table (:class:`journal_app.models.JournalCost`).

The cost of a 20,000-entry journal (every entry's usage parsed) was kept only in the default
cache: per process without ``CACHE_URL``, so every start computed it again on the first view
of the timeline. The row is read by every process and outlives a restart; it is derived
(recomputed when the journal's head moves) and goes with its journal.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("journal_app", "0011_entry_kind_error_index"),
    ]

    operations = [
        migrations.CreateModel(
            name="JournalCost",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "table_key",
                    models.CharField(
                        help_text="digest of the price table (journal_app.selectors.costs)",
                        max_length=64,
                    ),
                ),
                (
                    "head_seq",
                    models.PositiveBigIntegerField(help_text="the journal's head the cost covers"),
                ),
                ("head_hash", models.CharField(blank=True, max_length=64)),
                (
                    "usd",
                    models.CharField(
                        help_text="USD of the priced calls, Decimal as text", max_length=64
                    ),
                ),
                ("priced", models.PositiveBigIntegerField(default=0)),
                ("unpriced", models.PositiveBigIntegerField(default=0)),
                ("computed_at", models.DateTimeField(auto_now=True)),
                (
                    "journal",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="cost_figures",
                        to="journal_app.journal",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("journal", "table_key"), name="journalcost_unique_journal_table"
                    )
                ],
            },
        ),
    ]
