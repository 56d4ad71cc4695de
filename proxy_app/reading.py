"""A resent history read by its new messages only. Pure (a per-process memo, no database).

A runtime resends its whole history on every call. Reading it whole (the importer, then a
prefix digest of its JSON) costs in proportion to the history; this module remembers the
recent requests' readings (:data:`READINGS` of them, per process) so that a request whose
first ``n`` messages are exactly a remembered request's messages reads only the messages
after them:

* **exactly**: the remembered request's messages and system prompt are compared in their
  ``marshal`` form (version 2: no back-references, types kept, so ``1``, ``1.0`` and
  ``true`` differ, keys in the order they were sent; the form of a list is a header and
  its elements' self-delimiting forms one after the other, so the new request's form
  starting with the remembered elements' means its first ``n`` messages are those), so the
  reused items are what a whole reading of the new request gives for those messages;
* **the suffix alone**: ``read(messages[n:])`` gives the items a whole reading gives for
  them only when no tool call id of the suffix was used before it (an importer numbers a
  reused id ``id#2``) and its tool results answer calls of the suffix itself (else the
  reading raises and the whole request is read, as is any refusal: the importer's own error
  then names the field);
* **the prefix digest** (:func:`proxy_app.prefix.prefix_digest`) is kept as a sha256 state
  after each remembered request's messages, so the digest of the new request extends it by
  the new messages' JSON.

A miss (another process, an edited history, a new session) reads the request whole, as
before: the memo changes what is computed, never its value. It is one per process, across
tenants: a reading is a function of the messages alone, and another tenant's is reused
only for messages exactly equal to its own.
"""

from __future__ import annotations

import marshal
import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from journal_app.formats.base import ParsedEntry
from proxy_app.prefix import digest_extend, digest_start, digest_value

#: readings a process remembers (newest first); a longer gap between two calls of one
#: session than this many other calls reads that session's next request whole
READINGS = 64
#: bytes of ``marshal`` forms the remembered readings hold at most (the oldest go first)
READING_BYTES = 64 * 2**20
#: sha256 states a reading keeps at earlier requests' message counts (newest first)
CHECKPOINTS = 4

#: ``read(messages, at)``: the items of ``messages`` as the ``at``-th and later messages of a
#: request (``at`` only shifts their ``source_ref``); raises on anything it cannot read
SuffixReader = Callable[[Sequence[Any], int], list[ParsedEntry]]


@dataclass(frozen=True)
class Reading:
    """One request's reading, as remembered.

    Attributes:
        surface: ``"openai"`` or ``"anthropic"``.
        count: how many messages.
        head: the ``marshal`` form of ``(surface, head)``.
        form: the ``marshal`` form of the messages' list less its header: the elements'.
        last: the last message (a cheap first check before the fingerprint).
        items: the request's items, as the importer reads them (shared: never mutated).
        call_ids: every tool call id of the items, journal and source ids alike.
        states: message count -> sha256 state of the prefix digest's text up to there
            (:func:`proxy_app.prefix.digest_start`), at ``count`` and a few earlier counts.
    """

    surface: str
    count: int
    head: bytes
    form: bytes
    last: Any
    items: tuple[ParsedEntry, ...]
    call_ids: frozenset[str]
    states: dict[int, Any] = field(default_factory=dict)


@dataclass
class ReadCounts:
    """What the readings of this process did, for tests and the benchmark.

    Attributes:
        whole: requests read whole.
        suffix: requests read by their new messages.
        messages_read: messages given to the importer, over all requests.
        messages_digested: messages whose JSON fed a prefix digest state.
    """

    whole: int = 0
    suffix: int = 0
    messages_read: int = 0
    messages_digested: int = 0


_lock = threading.Lock()
_readings: list[Reading] = []
_current = threading.local()
#: counters since the process started (:func:`read_counts`)
COUNTS = ReadCounts()


#: the header of a list's ``marshal`` form (type and length), before its elements'
_LIST_HEADER = len(marshal.dumps([], 2))


def _forms(surface: str, head: Any, messages: Sequence[Any]) -> tuple[bytes, bytes]:
    """``(head form, list form)``: ``marshal`` version 2 of ``(surface, head)`` and of the
    messages' list (header included)."""
    return marshal.dumps((surface, head), 2), marshal.dumps(list(messages), 2)


def _call_ids(items: Sequence[ParsedEntry]) -> set[str]:
    ids: set[str] = set()
    for item in items:
        if item.kind == "tool_call":
            ids.add(item.tool_call_id)
            ids.add(str(item.metadata.get("source_tool_call_id", item.tool_call_id)))
    return ids


def _remembered(surface: str, head: bytes, form: bytes, messages: Sequence[Any]) -> Reading | None:
    """The newest remembered reading whose messages start ``messages`` exactly (``head``,
    ``form``: :func:`_forms` of the request)."""
    with _lock:
        readings = list(_readings)
    for reading in readings:
        n = reading.count
        if reading.head != head or not n or n > len(messages):
            continue
        if messages[n - 1] != reading.last:
            continue
        if form.startswith(reading.form, _LIST_HEADER):
            return reading
    return None


def _remember(reading: Reading) -> None:
    with _lock:
        _readings.insert(0, reading)
        held = 0
        for n, kept in enumerate(_readings):
            held += len(kept.form)
            if n >= READINGS or held > READING_BYTES:
                del _readings[n:]
                break


def _suffix_items(
    known: Reading, messages: Sequence[Any], read: SuffixReader
) -> list[ParsedEntry] | None:
    """The items of ``messages[known.count:]`` read alone, or ``None`` when reading them
    alone could differ from reading them after the known messages."""
    try:
        fresh = read(messages[known.count :], known.count)
    except Exception:
        return None  # a refusal, or a result answering an earlier call: read whole
    if _call_ids(fresh) & known.call_ids:
        return None  # a reused id: the importer numbers it after the earlier one
    return fresh


def history_items(
    surface: str,
    head: Any,
    messages: Sequence[Any],
    read_whole: Callable[[], list[ParsedEntry]],
    read_suffix: SuffixReader,
) -> list[ParsedEntry]:
    """A request's items, reading only the messages after a remembered request's.

    Args:
        surface: ``"openai"`` or ``"anthropic"`` (a Responses request is read whole by the
            caller: its ``input`` items are not read one message at a time).
        head: the system prompt read with the messages (``None`` when there is none).
        messages: the request's messages as sent.
        read_whole: the importer over the whole request (its errors propagate).
        read_suffix: the importer over some of the messages alone (:data:`SuffixReader`).

    Returns:
        The items, equal to ``read_whole()``'s; the prefix's item objects are shared with
        earlier calls (callers copy before changing one, as ``dataclasses.replace`` does).
        The reading is remembered for the next call and for :func:`request_digest`.
    """
    head_form, form = _forms(surface, head, messages)
    known = _remembered(surface, head_form, form, messages)
    fresh = _suffix_items(known, messages, read_suffix) if known is not None else None
    if known is not None and fresh is not None:
        items = [*known.items, *fresh]
        call_ids = known.call_ids | _call_ids(fresh)
        states = {n: s for n, s in list(known.states.items())[:CHECKPOINTS]}
        state = states[known.count].copy()
        COUNTS.suffix += 1
        COUNTS.messages_read += len(messages) - known.count
        start = known.count
    else:
        items = read_whole()
        call_ids = frozenset(_call_ids(items))
        states, state, start = {}, digest_start(head), 0
        COUNTS.whole += 1
        COUNTS.messages_read += len(messages)
    digest_extend(state, messages, start)
    COUNTS.messages_digested += len(messages) - start
    reading = Reading(
        surface,
        len(messages),
        head_form,
        form[_LIST_HEADER:],
        messages[-1] if messages else None,
        tuple(items),
        frozenset(call_ids),
        {len(messages): state, **states},
    )
    if messages:
        _remember(reading)
    _current.last = (head, messages, reading)
    _current.items = (items, reading.call_ids)
    return items


def request_digest(head: Any, messages: Sequence[Any], m: int) -> str | None:
    """:func:`proxy_app.prefix.prefix_digest` of ``messages[:m]`` from the reading this
    thread made last (:func:`history_items`), when those are its messages (the same
    objects) and a kept state is at or before ``m``; ``None`` otherwise (compute it whole).
    """
    last = getattr(_current, "last", None)
    if last is None:
        return None
    known_head, known, reading = last
    if head is not known_head and head != known_head:
        return None
    if len(known) != len(messages) or not all(map(operator.is_, known, messages)):
        return None
    at = max((n for n in reading.states if n <= m), default=None)
    if at is None:
        return None
    state = reading.states[at].copy()
    if at < m:
        digest_extend(state, messages[:m], at)
        COUNTS.messages_digested += m - at
    return digest_value(state)


def known_call_ids(items: Sequence[ParsedEntry]) -> frozenset[str] | None:
    """Every tool call id (journal and source ids) of ``items`` when they are the list this
    thread's last :func:`history_items` returned (the same object), else ``None``."""
    last = getattr(_current, "items", None)
    if last is None or last[0] is not items:
        return None
    ids: frozenset[str] = last[1]
    return ids


def read_counts() -> ReadCounts:
    """A copy of the counters (:class:`ReadCounts`) since the process started."""
    return ReadCounts(**vars(COUNTS))


def forget_readings() -> None:
    """Forget every remembered reading (tests)."""
    with _lock:
        _readings.clear()
    _current.last = None
    _current.items = None
