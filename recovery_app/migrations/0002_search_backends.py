"""The search index per database (DESIGN.md section 7, "Search backends").

PostgreSQL: a stored ``tsvector`` column generated from ``tokens`` with the ``simple``
configuration (no stemming, so both backends match the same tokens), plus one lexeme
``journal:<id>`` that no query token can spell (tokens are letters and digits only), and a
GIN index on it. A search ANDs the journal's lexeme with the query, so the GIN index finds
only that journal's matches: a term common elsewhere in the tenant (or the installation)
costs nothing, as a composite ``(journal_id, tsv)`` index would, without ``btree_gin``.

SQLite: an FTS5 virtual table ``recovery_fts`` with external content
(``recovery_app_searchsegment``), kept in step by triggers on insert and delete, so the index
follows every path that writes segments (and the test runner's flush). Diacritics are kept:
the tokens are already case-folded by :mod:`recovery_app.lexical`.
"""

from django.db import migrations

PG_FORWARD = [
    "ALTER TABLE recovery_app_searchsegment ADD COLUMN tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, tokens) || "
    "array_to_tsvector(ARRAY['journal:' || journal_id::text])) STORED",
    "CREATE INDEX recovery_searchsegment_tsv ON recovery_app_searchsegment USING gin (tsv)",
]
PG_BACKWARD = [
    "DROP INDEX IF EXISTS recovery_searchsegment_tsv",
    "ALTER TABLE recovery_app_searchsegment DROP COLUMN IF EXISTS tsv",
]
SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE recovery_fts USING fts5(tokens, content='recovery_app_searchsegment', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 0')",
    "CREATE TRIGGER recovery_fts_insert AFTER INSERT ON recovery_app_searchsegment BEGIN "
    "INSERT INTO recovery_fts(rowid, tokens) VALUES (new.id, new.tokens); END",
    "CREATE TRIGGER recovery_fts_delete AFTER DELETE ON recovery_app_searchsegment BEGIN "
    "INSERT INTO recovery_fts(recovery_fts, rowid, tokens) VALUES ('delete', old.id, old.tokens); END",
    "INSERT INTO recovery_fts(recovery_fts) VALUES ('rebuild')",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS recovery_fts_insert",
    "DROP TRIGGER IF EXISTS recovery_fts_delete",
    "DROP TABLE IF EXISTS recovery_fts",
]


def _run(schema_editor, statements):
    for sql in statements:
        schema_editor.execute(sql, params=None)


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, PG_FORWARD)
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_FORWARD)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, PG_BACKWARD)
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_BACKWARD)


class Migration(migrations.Migration):
    dependencies = [("recovery_app", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
