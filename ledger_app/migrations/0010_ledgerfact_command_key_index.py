"""Indexes for the writer state's lookups of current facts (issue 18).

A fold loads only the active facts whose command keys its writer declares, and the active
pins (:func:`ledger_app.services.state.writer_state`); these partial indexes over the
current rows keep both lookups a few index reads whatever the ledger's size. A command key
can be a long command, so its index holds the first 600 characters (a PostgreSQL btree row
must stay under 2,704 bytes); the lookup compares that prefix, then the whole key.
Reversible (drops them).
"""

import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ledger_app", "0009_fold_state_acc_not_null"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="ledgerfact",
            index=models.Index(
                models.F("journal"),
                django.db.models.functions.text.Substr("command_key", 1, 600),
                condition=models.Q(("until__isnull", True)),
                name="ledgerfact_now_command",
            ),
        ),
        migrations.AddIndex(
            model_name="ledgerfact",
            index=models.Index(
                condition=models.Q(("pin", True), ("until__isnull", True)),
                fields=["journal", "lifecycle"],
                name="ledgerfact_now_pins",
            ),
        ),
    ]
