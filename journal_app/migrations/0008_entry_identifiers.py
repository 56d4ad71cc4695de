"""The identifiers of each entry, extracted once (issue 18): a new insert-only table.

A table rather than an ``Entry`` column: entries are append-only (migration 0002's trigger),
so the rows of entries appended before this migration are written lazily, once, by the
first fold that reads them (``ledger_app.services.entries.entry_identifiers``).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("journal_app", "0007_entry_figures_hash_not_null")]

    operations = [
        migrations.CreateModel(
            name="EntryIdentifiers",
            fields=[
                (
                    "entry",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.PROTECT,
                        primary_key=True,
                        related_name="identifier_row",
                        serialize=False,
                        to="journal_app.entry",
                    ),
                ),
                ("rules", models.PositiveSmallIntegerField()),
                (
                    "values",
                    models.JSONField(default=list, help_text="[[kind, value], ...] in text order"),
                ),
            ],
            options={"abstract": False},
        ),
    ]
