"""Auto-scheduling of folds: the journal's ``entries_appended`` signal (docs/design.md section 5.2).

The decision reads ``Journal.unfolded_tokens``, a running counter written only by
:mod:`journal_app.services.unfolded`: the append adds its new entries' ``token_count`` in its
transaction, and :func:`ledger_app.services.store.fold_store` sets it to the tokens after the
new fold's ``seq_end`` in the fold's transaction. So an append costs no aggregate query unless
a fold is due.

:func:`schedule_fold` is connected in :meth:`ledger_app.apps.LedgerAppConfig.ready`.
"""

from __future__ import annotations

from typing import Any

import structlog
from django.conf import settings
from django.db import transaction
from django.dispatch import receiver
from kombu.exceptions import OperationalError as BrokerError

from journal_app.models import Journal
from journal_app.services.unfolded import tokens_after, unfolded_fill
from ledger_app.background import defer_to_background, run_in_background
from ledger_app.models import Fold
from ledger_app.runs import task_run_enqueue
from ledger_app.services.checks import check_not_queued
from ledger_app.services.full_check import check_wanted
from ledger_app.tasks import check_ledger, fold_journal

log = structlog.get_logger(__name__)


def folded_to(journal_id: int) -> int:
    """The ``seq_end`` of the latest fold of kind ``fold`` (by number) of the journal
    ``journal_id``, 0 when none: where the unfolded part starts."""
    end = (
        Fold.objects.filter(journal_id=journal_id, kind=Fold.Kind.FOLD)
        .order_by("-number")
        .values_list("seq_end", flat=True)
        .first()
    )
    return int(end or 0)


def unfolded_count(journal_id: int) -> int:
    """The tokens of the entries after the last fold's ``seq_end`` (two small queries).

    Folds of kind ``fold``, as :func:`ledger_app.services.ledger_fold` counts them; the
    latest by number. What ``Journal.unfolded_tokens`` must equal.
    """
    return tokens_after(journal_id, folded_to(journal_id))


def schedule_fold(sender: type[Journal], *, journal: Journal, head_seq: int, **kwargs: Any) -> None:
    """Enqueue :func:`~ledger_app.tasks.fold_journal` when the unfolded part is big enough.

    When ``journal.unfolded_tokens`` (the running counter the append just updated) reaches
    ``settings.LEDGER_FOLD_THRESHOLD_TOKENS`` a fold up to ``head_seq`` is queued after
    commit. A journal not counted yet (``None``, from before the counter) is counted once
    here (:func:`journal_app.services.unfolded.unfolded_fill`) and the figure stored. Eager in
    the embedded default, so the fold runs in-process: at once, or, inside a proxied call's
    :func:`ledger_app.background.after_block`, on the background thread after the call (a
    proxied request never waits on the folds its append made due). Appends that arrive before the fold has run may queue it
    again; the task is idempotent, so the extra run folds nothing.
    """
    unfolded = journal.unfolded_tokens
    if unfolded is None:  # a journal from before the counter: counted once, here
        unfolded = unfolded_fill(journal, folded_to(journal.pk))
    if unfolded >= settings.LEDGER_FOLD_THRESHOLD_TOKENS:
        fold_soon(journal, head_seq)


def fold_soon(journal: Journal, upto: int) -> None:
    """Queue :func:`~ledger_app.tasks.fold_journal` of ``journal`` up to seq ``upto``.

    With a broker, a worker runs it. Eager (the embedded default) it runs in-process: at
    once, or, inside a :func:`ledger_app.background.after_block` (a proxied call), on the
    background thread once the block ends, so the call never waits on it.
    """

    def enqueue() -> None:
        task_run_enqueue(task=fold_journal, journal=journal, journal_id=journal.pk, upto=upto)

    if not (settings.CELERY_TASK_ALWAYS_EAGER and defer_to_background(enqueue)):
        enqueue()


@receiver(check_wanted, sender=Journal, dispatch_uid="ledger_app.queue_check")
def queue_check(sender: type[Journal], *, journal_id: int, **kwargs: Any) -> None:
    """Queue the ``check_ledger`` task after commit: a page found no stored check.

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
