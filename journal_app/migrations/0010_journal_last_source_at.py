"""``Journal.last_source_at``: the source's time of the newest timed entry (issue 17).

Nullable, so one schema step; then a data step fills it for existing journals from the
newest of their last 50 entries that carries a source time (the rule the append keeps,
:func:`journal_app.services.append._newest_time`). Reversible: the backward step is a no-op
before the column is dropped.
"""

import json

from django.db import migrations, models


def fill(apps, schema_editor):
    from journal_app.times import entry_time

    Journal = apps.get_model("journal_app", "Journal")
    Entry = apps.get_model("journal_app", "Entry")
    for journal in Journal.objects.filter(head_seq__gt=0).iterator():
        metas = (
            Entry.objects.filter(journal=journal, seq__gt=journal.head_seq - 50)
            .order_by("-seq")
            .values_list("meta", flat=True)
        )
        for meta in metas:
            at = entry_time(json.loads(meta or "{}"))
            if at is not None:
                Journal.objects.filter(pk=journal.pk).update(last_source_at=at)
                break


class Migration(migrations.Migration):
    dependencies = [("journal_app", "0009_journal_unfolded_tokens")]

    operations = [
        migrations.AddField(
            model_name="journal",
            name="last_source_at",
            field=models.DateTimeField(
                blank=True,
                null=True,
                help_text="the source's time of the newest timed entry appended "
                "(journal_app.times.entry_time); null: the source gives no times. The "
                "sessions list's last activity sorts and filters on it (issue 17)",
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
