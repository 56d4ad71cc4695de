"""The search index keeps its text once (PostgreSQL), and no index twice.

PostgreSQL stored each segment's tokens twice: as the ``tokens`` text and as the ``tsv``
generated from it (the text alone was 0.4 of the search table's bytes, 1.3x the ledger's
deltas). ``tsv`` becomes a plain column computed by a ``BEFORE INSERT`` trigger from the
tokens (the same expression as migration 0002's), which then stores ``''`` in ``tokens``:
every path that writes segments (``COPY``, ``bulk_create``, a raw insert) is covered, and
searches read only ``tsv``. Existing rows keep their ``tsv`` and lose their text. Backwards,
the text is rebuilt from ``tsv``'s positions (the tokens are letters and digits, so the
``simple`` configuration keeps each one as written, at its position) and the generated
column comes back.

The GIN index's pending list is capped at 256 kB (``gin_pending_list_limit``; PostgreSQL's
default is 4 MB): rows appended in batches sit in that unsorted list until it is full, and
the pages it grew to stay with the index after each flush. With the default, the index of a
4,000-entry journal was 4.6 MB; built from the same rows with the 256 kB cap it is 0.63 MB,
at the same insert time (searches also scan less unsorted list). The index is rebuilt once
here.

The ``entry`` and ``journal`` foreign keys lose their own indexes, which the unique
``(entry, segment)`` and the ``(journal, seq)`` indexes already lead with (PostgreSQL: on
SQLite, dropping them would rebuild the table and lose the FTS5 triggers; they are small
there). SQLite's FTS5 table reads ``tokens`` and is unchanged.
"""

import django.db.models.deletion
from django.db import migrations, models

TSV = "to_tsvector('simple'::regconfig, {t}.tokens) || array_to_tsvector(ARRAY['journal:' || {t}.journal_id::text])"

PG_FORWARD = [
    "DROP INDEX recovery_app_searchsegment_entry_id_4beebadc",
    "DROP INDEX recovery_app_searchsegment_journal_id_917c8762",
    "ALTER TABLE recovery_app_searchsegment ALTER COLUMN tsv DROP EXPRESSION",
    "CREATE FUNCTION recovery_searchsegment_tsv() RETURNS trigger LANGUAGE plpgsql AS $$ "
    f"BEGIN NEW.tsv := {TSV.format(t='NEW')}; NEW.tokens := ''; RETURN NEW; END $$",
    "CREATE TRIGGER recovery_searchsegment_tsv BEFORE INSERT ON recovery_app_searchsegment "
    "FOR EACH ROW EXECUTE FUNCTION recovery_searchsegment_tsv()",
    "UPDATE recovery_app_searchsegment SET tokens = '' WHERE tokens <> ''",
    "ALTER INDEX recovery_searchsegment_tsv SET (gin_pending_list_limit = 256)",
    "REINDEX INDEX recovery_searchsegment_tsv",
]
PG_BACKWARD = [
    "ALTER INDEX recovery_searchsegment_tsv RESET (gin_pending_list_limit)",
    "DROP TRIGGER recovery_searchsegment_tsv ON recovery_app_searchsegment",
    "DROP FUNCTION recovery_searchsegment_tsv()",
    "UPDATE recovery_app_searchsegment s SET tokens = coalesce(("
    " SELECT string_agg(u.lexeme, ' ' ORDER BY p.pos) FROM unnest(s.tsv) u,"
    " unnest(u.positions) p(pos)), '') WHERE s.tokens = ''",
    "DROP INDEX recovery_searchsegment_tsv",
    "ALTER TABLE recovery_app_searchsegment DROP COLUMN tsv",
    "ALTER TABLE recovery_app_searchsegment ADD COLUMN tsv tsvector "
    f"GENERATED ALWAYS AS ({TSV.format(t='recovery_app_searchsegment')}) STORED",
    "CREATE INDEX recovery_searchsegment_tsv ON recovery_app_searchsegment USING gin (tsv)",
    "CREATE INDEX recovery_app_searchsegment_entry_id_4beebadc "
    "ON recovery_app_searchsegment (entry_id)",
    "CREATE INDEX recovery_app_searchsegment_journal_id_917c8762 "
    "ON recovery_app_searchsegment (journal_id)",
]


def _run(schema_editor, statements):
    if schema_editor.connection.vendor == "postgresql":
        for sql in statements:
            schema_editor.execute(sql, params=None)


def forwards(apps, schema_editor):
    _run(schema_editor, PG_FORWARD)


def backwards(apps, schema_editor):
    _run(schema_editor, PG_BACKWARD)


class Migration(migrations.Migration):
    dependencies = [
        ("journal_app", "0011_entry_kind_error_index"),
        ("recovery_app", "0003_fill_search_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="searchsegment",
                    name=name,
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=f"journal_app.{name}",
                    ),
                )
                for name in ("entry", "journal")
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        )
    ]
