"""Work a web process runs after the response, off the request (the embedded default: eager
Celery, no worker). One daemon thread, so background checks queue behind each other and
never take more than one core from the pages (README, "Settings":
``LEDGER_CHECK_MAX_AGE_SECONDS``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import close_old_connections, connections

log = logging.getLogger(__name__)

_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledgerkeep-background")

#: the work :func:`defer_to_background` collected inside the current :func:`after_block`
_DEFERRED: ContextVar[list[Callable[[], object]] | None] = ContextVar(
    "ledgerkeep_deferred", default=None
)


def _run(fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception:  # logged: a failed background check is queued again by the next page
        log.exception("background work failed")
    finally:
        close_old_connections()
        connections.close_all()


def run_in_background(fn: Callable[[], object]) -> Future[None]:
    """Run ``fn()`` on the background thread; returns its future (exceptions are logged,
    not raised)."""
    return _EXECUTOR.submit(_run, fn)


def wait_for_background(timeout: float = 300.0) -> None:
    """Block until every piece of work queued before this call has finished (the one worker
    takes the queue in order, so a no-op queued now ends after them all). ``timeout`` in
    seconds; raises :class:`concurrent.futures.TimeoutError` when it passes. Used before
    a process or a test run drops the database under the thread."""
    _EXECUTOR.submit(lambda: None).result(timeout=timeout)


@contextmanager
def after_block() -> Iterator[None]:
    """Collect the work that :func:`defer_to_background` is given inside the block and hand
    it to the background thread when the block ends (raised or not), in order.

    A proxied call journals and compacts inside one such block, so a fold that its append
    makes due runs after the call's own work, never inside its request (README, "The
    compacting proxy": folds in the background). Blocks nest: an inner block's work is
    handed over when the inner block ends.
    """
    token = _DEFERRED.set([])
    try:
        yield
    finally:
        work = _DEFERRED.get() or []
        _DEFERRED.reset(token)
        for fn in work:
            run_in_background(fn)


def defer_to_background(fn: Callable[[], object]) -> bool:
    """Queue ``fn`` for the end of the enclosing :func:`after_block`.

    Returns:
        ``True`` when a block collects it; ``False`` outside any block (nothing queued: the
        caller runs ``fn`` its usual way).
    """
    work = _DEFERRED.get()
    if work is None:
        return False
    work.append(fn)
    return True
