"""The writer state's command-key index over every version (issue 18).

``ledgerfact_command`` replaces ``ledgerfact_now_command``: the same key (journal, first 600
characters of the command key) over every version instead of the current ones only. A
fold's lookups by key no longer say ``until IS NULL`` in SQL (they read the few versions of
the keys and keep the current one: :func:`ledger_app.services.state._current_of`), because
with that condition PostgreSQL without planner statistics read every current row of the
journal through ``ledgerfact_now`` (100-200 ms at 100,000 facts). Reversible.
"""

import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ledger_app", "0011_fold_invariants"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="ledgerfact",
            name="ledgerfact_now_command",
        ),
        migrations.AddIndex(
            model_name="ledgerfact",
            index=models.Index(
                models.F("journal"),
                django.db.models.functions.text.Substr("command_key", 1, 600),
                name="ledgerfact_command",
            ),
        ),
    ]
