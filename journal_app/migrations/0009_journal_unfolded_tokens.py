"""``Journal.unfolded_tokens``: the running unfolded-token counter (issue 13, item 3).

Schema only. Existing journals get NULL ("not counted yet": the fold scheduler counts them
once, :func:`ledger_app.receivers.schedule_fold`); journals made afterwards start at 0.
Two steps so that the default applies to new rows only, never to existing ones.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("journal_app", "0008_entry_identifiers")]

    operations = [
        migrations.AddField(
            model_name="journal",
            name="unfolded_tokens",
            field=models.PositiveBigIntegerField(null=True),
        ),
        migrations.AlterField(
            model_name="journal",
            name="unfolded_tokens",
            field=models.PositiveBigIntegerField(
                null=True,
                default=0,
                help_text="sum of token_count of the entries after the last fold's seq_end, "
                "kept by the append and by each fold (issue 13); null: not counted yet (a "
                "journal from before the column), counted once by the fold scheduler",
            ),
        ),
    ]
