"""Step 3 of 3 (issue 18): ``Fold.state_acc`` is required (every fold has one after 0008)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ledger_app", "0008_fill_fact_rows")]

    operations = [
        migrations.AlterField(
            model_name="fold",
            name="state_acc",
            field=models.TextField(
                help_text="the state's fact accumulator (ledger_app.reducer.acc_hex) after this "
                "fold"
            ),
        ),
    ]
