"""``Journal.unfolded_tokens``: the one module that writes it.

The counter holds the tokens (``Entry.token_count``, as counted at append) of the entries
after the last fold's ``seq_end``, so deciding whether a fold is due costs no aggregate
query (docs/architecture.md, "One owner for each value"). Three moments change it, each a
function here:

* an append adds its new entries' tokens (:func:`unfolded_add`, from
  :func:`journal_app.services.append.journal_append`, which saves the row it holds locked);
* a fold of kind ``fold`` sets it to the tokens after its range (:func:`unfolded_after`,
  called by :func:`ledger_app.services.store.fold_store` in the fold's transaction);
* a journal from before the counter (``NULL``) is counted once, after an append commits and
  asks whether a fold is due (:func:`unfolded_fill`, from
  :func:`ledger_app.receivers.schedule_fold`; stored only where still ``NULL``).

The journal knows nothing of folds: the ledger passes the ``seq`` its last fold ends at.
"""

from __future__ import annotations

from django.db.models import BigIntegerField, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from journal_app.models import Entry, Journal


def unfolded_add(journal: Journal, tokens: int) -> None:
    """Add ``tokens`` (tokens of the entries an append just wrote) to the counter of
    ``journal`` in memory; the caller saves the row (``update_fields`` names
    ``unfolded_tokens``). A counter not counted yet (``None``) stays ``None``."""
    if journal.unfolded_tokens is not None:
        journal.unfolded_tokens += tokens


def tokens_after(journal_id: int, seq: int) -> int:
    """Tokens of the entries of the journal ``journal_id`` after ``seq`` (one aggregate query;
    ``seq`` 0: all of them)."""
    return Entry.objects.filter(journal_id=journal_id, seq__gt=seq).aggregate(
        tokens=Sum("token_count", default=0)
    )["tokens"]


def unfolded_after(journal_id: int, seq: int) -> None:
    """Set the counter of the journal ``journal_id`` to the tokens after ``seq`` (the end of
    the fold just stored) in one ``UPDATE ... SET unfolded_tokens = (SELECT SUM ...)``."""
    tokens = (
        Entry.objects.filter(journal_id=journal_id, seq__gt=seq)
        .values("journal_id")
        .annotate(tokens=Sum("token_count"))
        .values("tokens")
    )
    Journal.objects.filter(pk=journal_id).update(
        unfolded_tokens=Coalesce(Subquery(tokens), Value(0), output_field=BigIntegerField())
    )


def unfolded_fill(journal: Journal, folded_to: int) -> int:
    """The counter of ``journal``, counted and stored when it is ``None`` (a journal from
    before the counter): the tokens after ``folded_to`` (the last fold's ``seq_end``, 0 when
    none). Stored only where still ``NULL``, so a concurrent writer's figure is kept.

    Returns:
        the counter, tokens; ``journal.unfolded_tokens`` is set to it.
    """
    if journal.unfolded_tokens is None:
        counted = tokens_after(journal.pk, folded_to)
        Journal.objects.filter(pk=journal.pk, unfolded_tokens__isnull=True).update(
            unfolded_tokens=counted
        )
        journal.unfolded_tokens = counted
    return journal.unfolded_tokens
