"""Auto-scheduling of folds: the journal's ``entries_appended`` signal (DESIGN.md section 5.2).

The decision reads ``Journal.unfolded_tokens``, a running counter (issue 13, item 3): the
append adds its new entries' ``token_count`` in its transaction, and each fold of kind
``fold`` resets it to the tokens after its ``seq_end`` in the fold's transaction
(:func:`unfolded_reset`, a ``post_save`` receiver on :class:`~ledger_app.models.Fold`).
So an append costs no aggregate query unless a fold is due.

:func:`schedule_fold` is connected in :meth:`ledger_app.apps.LedgerAppConfig.ready`;
:func:`unfolded_reset` with ``@receiver`` when that method imports this module.
"""

from __future__ import annotations

from typing import Any

import structlog
from django.conf import settings
from django.db import transaction
from django.db.models import BigIntegerField, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.db.models.signals import post_save
from django.dispatch import receiver
from kombu.exceptions import OperationalError as BrokerError

from journal_app.models import Entry, Journal
from ledger_app.background import run_in_background
from ledger_app.models import Fold
from ledger_app.runs import task_run_enqueue
from ledger_app.services.checks import check_not_queued
from ledger_app.services.full_check import check_wanted
from ledger_app.tasks import check_ledger, fold_journal

log = structlog.get_logger(__name__)


def unfolded_count(journal_id: int) -> int:
    """The tokens of the entries after the last fold's ``seq_end`` (one aggregate query).

    Folds of kind ``fold``, as :func:`ledger_app.services.ledger_fold` counts them; the
    latest by number. What ``Journal.unfolded_tokens`` must equal.
    """
    folded_to = (
        Fold.objects.filter(journal_id=journal_id, kind=Fold.Kind.FOLD)
        .order_by("-number")
        .values("seq_end")[:1]
    )
    return (
        Entry.objects.filter(journal_id=journal_id)
        .filter(seq__gt=Coalesce(Subquery(folded_to), Value(0), output_field=BigIntegerField()))
        .aggregate(tokens=Sum("token_count", default=0))["tokens"]
    )


def schedule_fold(sender: type[Journal], *, journal: Journal, head_seq: int, **kwargs: Any) -> None:
    """Enqueue :func:`~ledger_app.tasks.fold_journal` when the unfolded part is big enough.

    When ``journal.unfolded_tokens`` (the running counter the append just updated) reaches
    ``settings.LEDGER_FOLD_THRESHOLD_TOKENS`` a fold up to ``head_seq`` is queued after
    commit. A journal not counted yet (``None``, from before the counter) is counted once
    here (:func:`unfolded_count`) and the figure stored. Eager in the embedded default, so
    the fold runs in-process. Appends that arrive before the fold has run may queue it
    again; the task is idempotent, so the extra run folds nothing.
    """
    unfolded = journal.unfolded_tokens
    if unfolded is None:
        unfolded = unfolded_count(journal.pk)
        Journal.objects.filter(pk=journal.pk, unfolded_tokens__isnull=True).update(
            unfolded_tokens=unfolded
        )
        journal.unfolded_tokens = unfolded
    if unfolded >= settings.LEDGER_FOLD_THRESHOLD_TOKENS:
        task_run_enqueue(task=fold_journal, journal=journal, journal_id=journal.pk, upto=head_seq)


@receiver(post_save, sender=Fold, dispatch_uid="ledger_app.unfolded_reset")
def unfolded_reset(sender: type[Fold], *, instance: Fold, created: bool, **kwargs: Any) -> None:
    """A new fold of kind ``fold`` sets ``Journal.unfolded_tokens`` to what is after it.

    Runs inside the fold's transaction (the fold service holds the journal row lock, so no
    append interleaves): one ``UPDATE ... SET unfolded_tokens = (SELECT SUM ...)``.
    Consolidations and other kinds leave the counter alone.
    """
    if not created or instance.kind != Fold.Kind.FOLD:
        return
    tokens = (
        Entry.objects.filter(journal_id=instance.journal_id, seq__gt=instance.seq_end or 0)
        .values("journal_id")
        .annotate(tokens=Sum("token_count"))
        .values("tokens")
    )
    Journal.objects.filter(pk=instance.journal_id).update(
        unfolded_tokens=Coalesce(Subquery(tokens), Value(0), output_field=BigIntegerField())
    )


@receiver(check_wanted, sender=Journal, dispatch_uid="ledger_app.queue_check")
def queue_check(sender: type[Journal], *, journal_id: int, **kwargs: Any) -> None:
    """Queue the ``check_ledger`` task after commit: a page found no stored check (issue 16).

    With eager tasks (the embedded default, no worker) it runs on the web process's
    background thread (:func:`ledger_app.background.run_in_background`), so the page that
    asked never waits for it; with a broker, a worker runs it. The message is sent from that
    thread too, so a page never waits on a broker that is down; one that cannot be reached
    is recorded on the claim (:func:`~ledger_app.services.checks.check_not_queued`) and the
    pages say the check was not queued."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        transaction.on_commit(
            lambda: run_in_background(lambda: check_ledger.run(journal_id)), robust=True
        )
        return

    def send() -> None:
        try:
            check_ledger.apply_async(kwargs={"journal_id": journal_id}, retry=False)
        except (BrokerError, ConnectionError) as exc:
            check_not_queued(journal_id=journal_id, why=str(exc))
            log.warning("check_not_queued", journal_id=journal_id, error=str(exc))

    transaction.on_commit(lambda: run_in_background(send), robust=True)
