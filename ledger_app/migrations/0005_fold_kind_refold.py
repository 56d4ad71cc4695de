from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ledger_app", "0004_model_writer"),
    ]

    operations = [
        migrations.AlterField(
            model_name="fold",
            name="kind",
            field=models.CharField(
                choices=[
                    ("fold", "Fold"),
                    ("review", "Review"),
                    ("consolidation", "Consolidation"),
                    ("refold", "Refold"),
                ],
                default="fold",
                max_length=16,
            ),
        ),
    ]
