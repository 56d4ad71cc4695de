"""Entry index ``(journal, kind)`` widened to ``(journal, kind, is_error, seq)``.

The timeline filter ``kind:tool_result error:true`` counted its matches through a heap scan of
every entry of the kind (33,000 rows of a 100,000-entry journal); the wider index answers the
count and the page from the index. It is added before the old one is dropped, so reads by
kind always have an index.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("journal_app", "0010_journal_last_source_at"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="entry",
            index=models.Index(
                fields=["journal", "kind", "is_error", "seq"], name="entry_journal_kind_error"
            ),
        ),
        migrations.RemoveIndex(
            model_name="entry",
            name="entry_journal_kind",
        ),
    ]
