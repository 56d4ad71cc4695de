"""Index the entries that existed before the search index (data migration).

Uses ``apps.get_model`` and pure code only (:mod:`recovery_app.lexical`,
:mod:`journal_app.content`). Raw entries are indexed; derived entries (summaries,
compaction markers) and reasoning blocks never are. Later appends are indexed by the
``entries_appended`` receiver (and caught up before any search).
"""

import json

from django.db import migrations

from journal_app.content import content_text
from recovery_app.lexical import segments, tokenize

BATCH = 1000


def forwards(apps, schema_editor):
    Journal = apps.get_model("journal_app", "Journal")
    Entry = apps.get_model("journal_app", "Entry")
    SearchSegment = apps.get_model("recovery_app", "SearchSegment")
    SearchIndexState = apps.get_model("recovery_app", "SearchIndexState")
    for journal in Journal.objects.all().iterator():
        last = 0
        while True:
            rows = list(
                Entry.objects.filter(journal_id=journal.pk, seq__gt=last)
                .order_by("seq")
                .values_list("id", "seq", "kind", "derived", "body")[:BATCH]
            )
            if not rows:
                break
            segs = []
            for entry_id, seq, kind, derived, body in rows:
                if derived or kind == "reasoning":
                    continue
                text = content_text(kind, json.loads(body))
                for n, tokens in enumerate(segments(tokenize(text))):
                    segs.append(
                        SearchSegment(
                            entry_id=entry_id, journal_id=journal.pk, seq=seq, segment=n, tokens=tokens
                        )
                    )
            SearchSegment.objects.bulk_create(segs)
            last = rows[-1][1]
        SearchIndexState.objects.create(journal_id=journal.pk, indexed_seq=last)


class Migration(migrations.Migration):
    dependencies = [("recovery_app", "0002_search_backends"), ("journal_app", "0002_append_only_triggers")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
