"""Step 1 of 3 (STYLE.md, migrations): ``Entry.figures_hash`` as a nullable column."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("journal_app", "0004_journal_ended")]

    operations = [
        migrations.AddField(
            model_name="entry",
            name="figures_hash",
            field=models.CharField(max_length=64, null=True),
        ),
    ]
