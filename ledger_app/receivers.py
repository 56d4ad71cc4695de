"""Auto-scheduling of folds: the journal's ``entries_appended`` signal (DESIGN.md section 5.2).

Connected in :meth:`ledger_app.apps.LedgerAppConfig.ready`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import BigIntegerField, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from journal_app.models import Entry, Journal
from ledger_app.models import Fold
from ledger_app.runs import task_run_enqueue
from ledger_app.tasks import fold_journal


def schedule_fold(sender: type[Journal], *, journal: Journal, head_seq: int, **kwargs: Any) -> None:
    """Enqueue :func:`~ledger_app.tasks.fold_journal` when the unfolded part is big enough.

    The unfolded part is the entries after the last fold's ``seq_end`` (folds of kind
    ``fold``, as :func:`ledger_app.services.ledger_fold` counts them); when the sum of their
    ``token_count`` reaches ``settings.LEDGER_FOLD_THRESHOLD_TOKENS`` a fold up to
    ``head_seq`` is queued after commit (one aggregate query). Eager in the embedded
    default, so the fold runs in-process. Appends that arrive before the fold has run may
    queue it again; the task is idempotent, so the extra run folds nothing.
    """
    folded_to = (
        Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD)
        .order_by("-number")
        .values("seq_end")[:1]
    )
    unfolded = (
        Entry.objects.filter(journal=journal)
        .filter(seq__gt=Coalesce(Subquery(folded_to), Value(0), output_field=BigIntegerField()))
        .aggregate(tokens=Sum("token_count", default=0))["tokens"]
    )
    if unfolded >= settings.LEDGER_FOLD_THRESHOLD_TOKENS:
        task_run_enqueue(task=fold_journal, journal=journal, journal_id=journal.pk, upto=head_seq)
