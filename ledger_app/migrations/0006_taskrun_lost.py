# TaskRun: the "lost" status and the worker (Celery node name) that ran it (issue 16).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ledger_app", "0005_fold_kind_refold"),
    ]

    operations = [
        migrations.AddField(
            model_name="taskrun",
            name="worker",
            field=models.CharField(
                blank=True, default="", help_text="Celery node name", max_length=255
            ),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="taskrun",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("retrying", "Retrying"),
                    ("lost", "Lost"),
                ],
                default="queued",
                max_length=16,
            ),
        ),
    ]
