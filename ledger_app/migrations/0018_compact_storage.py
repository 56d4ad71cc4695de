"""Storage without second copies (bench/README.md, ``storage``; docs/design.md 5.2).

* ``LedgerTerm.term``: the first 8 bytes of the identifier key's sha256 as a signed 64-bit
  integer instead of its 64-character hex (``ledger_app.services.store.term_id``); existing
  rows are converted (the hex's first 16 digits are those 8 bytes).
* ``ledgerfact_pin_entry``: partial, on pins only (the only rows its lookups ask for).
* no index of ``LedgerTerm.journal``: ``ledgerterm_unique`` leads with it and serves the
  same lookups (and the ``PROTECT`` check of a journal delete). (``LedgerFact``'s is kept:
  altering it remakes the table on SQLite, which loses the SQL-made ``ledgerfact_order``.)
"""

import django.db.models.deletion
from django.db import migrations, models


def _signed(hex_text):
    value = int(hex_text[:16], 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def terms_forwards(apps, schema_editor):
    LedgerTerm = apps.get_model("ledger_app", "LedgerTerm")
    rows = []
    for pk, term in LedgerTerm.objects.values_list("pk", "term").iterator(chunk_size=2000):
        rows.append(LedgerTerm(pk=pk, term_id=_signed(term)))
        if len(rows) >= 2000:
            LedgerTerm.objects.bulk_update(rows, ["term_id"])
            rows = []
    LedgerTerm.objects.bulk_update(rows, ["term_id"])


def terms_backwards(apps, schema_editor):
    """The hex cannot be rebuilt from 8 of its bytes: recount the index from the current
    facts with the former form (the same counts the store keeps)."""
    import hashlib
    from collections import Counter

    from ledger_app.budget import render_fact
    from ledger_app.loss import ledger_terms

    LedgerTerm = apps.get_model("ledger_app", "LedgerTerm")
    LedgerFact = apps.get_model("ledger_app", "LedgerFact")
    LedgerTerm.objects.all().delete()
    import json

    counts = Counter()
    for journal_id, data in (
        LedgerFact.objects.filter(until__isnull=True, lifecycle="active")
        .values_list("journal_id", "data")
        .iterator(chunk_size=2000)
    ):
        for key in ledger_terms(render_fact(json.loads(data))):
            counts[(journal_id, hashlib.sha256(key.encode("utf-8")).hexdigest())] += 1
    LedgerTerm.objects.bulk_create(
        [LedgerTerm(journal_id=j, term=t, facts=n) for (j, t), n in counts.items()],
        batch_size=2000,
    )


class Migration(migrations.Migration):
    dependencies = [("ledger_app", "0017_merge_h26_h28")]

    operations = [
        migrations.AddField(
            model_name="ledgerterm", name="term_id", field=models.BigIntegerField(null=True)
        ),
        migrations.RunPython(terms_forwards, migrations.RunPython.noop),
        migrations.RemoveConstraint(model_name="ledgerterm", name="ledgerterm_unique"),
        # backwards: once ``term`` is a hex column again, before its unique constraint
        migrations.RunPython(migrations.RunPython.noop, terms_backwards),
        migrations.RemoveField(model_name="ledgerterm", name="term"),
        migrations.RenameField(model_name="ledgerterm", old_name="term_id", new_name="term"),
        migrations.AlterField(model_name="ledgerterm", name="term", field=models.BigIntegerField()),
        migrations.AddConstraint(
            model_name="ledgerterm",
            constraint=models.UniqueConstraint(
                fields=("journal", "term"), name="ledgerterm_unique"
            ),
        ),
        migrations.AlterField(
            model_name="ledgerterm",
            name="journal",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="ledger_terms",
                to="journal_app.journal",
            ),
        ),
        migrations.RemoveIndex(model_name="ledgerfact", name="ledgerfact_pin_entry"),
        migrations.AddIndex(
            model_name="ledgerfact",
            index=models.Index(
                condition=models.Q(("pin", True)),
                fields=["journal", "pin_entry"],
                name="ledgerfact_pin_entry",
            ),
        ),
    ]
