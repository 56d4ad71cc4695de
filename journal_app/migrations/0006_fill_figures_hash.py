"""Step 2 of 3: fill ``Entry.figures_hash`` of the existing entries (data migration).

The figures are hashed as they are stored: this records them, it does not vouch for them
(an entry changed before this migration keeps its change, now bound by the hash). On
PostgreSQL the append-only trigger of migration 0002 is switched off for this table while
the column is filled, inside the migration's transaction, and on again before it commits.
"""

from django.db import migrations

from journal_app.chain import ArtifactFigures, figures_hash

BATCH = 1000
TRIGGER = "journal_app_entry_append_only"


def _trigger(schema_editor, state: str) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE journal_app_entry {state} TRIGGER {TRIGGER}")


def forwards(apps, schema_editor):
    Entry = apps.get_model("journal_app", "Entry")
    _trigger(schema_editor, "DISABLE")
    last = 0
    while True:
        rows = list(
            Entry.objects.filter(pk__gt=last, figures_hash__isnull=True)
            .select_related("artifact")
            .order_by("pk")[:BATCH]
        )
        if not rows:
            break
        for e in rows:
            a = e.artifact
            e.figures_hash = figures_hash(
                entry_hash=e.entry_hash,
                token_count=e.token_count,
                token_source=e.token_source,
                source_ref=e.source_ref,
                artifact=None
                if a is None
                else ArtifactFigures(a.content_hash, a.byte_size, a.token_count, a.token_source),
            )
        Entry.objects.bulk_update(rows, ["figures_hash"])
        last = rows[-1].pk
    _trigger(schema_editor, "ENABLE")


class Migration(migrations.Migration):
    dependencies = [("journal_app", "0005_entry_figures_hash")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
