"""Step 3 of 3: ``Entry.figures_hash`` is required (every entry has one after 0006)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("journal_app", "0006_fill_figures_hash")]

    operations = [
        migrations.AlterField(
            model_name="entry",
            name="figures_hash",
            field=models.CharField(
                help_text="sha256 of the figures derived at append (token_count, token_source, "
                "source_ref, the artifact's figures), bound to entry_hash: "
                "journal_app.chain.figures_hash",
                max_length=64,
            ),
        ),
    ]
