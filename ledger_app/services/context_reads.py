"""What a context build reads: the entries as builder views, the fold valid at a revision,
the artifact store, the source's end status, and the pins a request must carry.

Read-only: every function here reads the journal, the ledger or the artifact store and
writes nothing (:func:`ledger_app.services.context.context_build` is the build that may
fold); :class:`SharedCounts` keeps token counts in the default cache, never in the database.
A bounded number of queries each, whatever the journal's length.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connections
from django.db.models import Q

from journal_app.content import AUTHORITATIVE_ROLES, content_text
from journal_app.models import Artifact, Entry, Journal
from journal_app.rounds import Round, group_rounds
from journal_app.services import artifact_read
from journal_app.tokens import count_tokens, source_label
from ledger_app import selectors
from ledger_app.context.prefix import PREFIX_WINDOW_TAILS, prefix_rounds
from ledger_app.context.task_state import TASK_LIST_WORDS
from ledger_app.entry_view import EntryView, MetadataView, RowView
from ledger_app.models import Fold
from ledger_app.pin_facts import is_pin_source, pin_fact
from ledger_app.pins import pin_shown_text
from ledger_app.services.context_records import ContextError
from ledger_app.services.entries import entry_view
from ledger_app.validation import (
    ArtifactInfo,
    Meter,
)

#: the columns of an entry row read as metadata (:func:`read_for_build`): all but the body
_META_COLUMNS = (
    "seq", "entry_hash", "kind", "role", "tool_call_id", "tool_name", "derived", "is_error",
    "meta", "token_count", "token_source", "artifact_id",
)  # fmt: skip
#: the columns of an entry row the builder reads (:func:`read_entries`)
_ENTRY_COLUMNS = (
    "seq", "entry_hash", "kind", "role", "body", "tool_call_id", "tool_name", "derived",
    "is_error", "meta", "token_count", "token_source", "artifact_id",
)  # fmt: skip


def read_entries(
    journal: Journal, revision: int
) -> tuple[list[EntryView], dict[str, int], dict[str, Mapping[str, Any]]]:
    """The journal's entries up to ``revision`` as builder views, in seq order, read as plain
    column tuples (no model instance per row; each body parsed once, each meta and each
    call's text when the build first reads it: :class:`ledger_app.entry_view.RowView`), with the
    stored token count of each entry counted by the configured encoding
    (``{entry hash: tokens}``) and the artifact receipt of each entry that references one
    (``{entry hash: Artifact.receipt()}``, one query for all of them).

    Views equal to those :func:`ledger_app.services.entry_view` makes from a row (the
    journal's own chunk size). Two queries however long the journal (tested:
    ``tests/ledger_app/test_context_reads.py``)."""
    label = source_label(settings.TOKEN_ENCODING)
    chunk_bytes = journal.chunk_bytes
    views: list[EntryView] = []
    stored: dict[str, int] = {}
    artifact_of: dict[int, list[str]] = {}
    loads = json.loads
    rows = (
        Entry.objects.filter(journal=journal, seq__lte=revision)
        .order_by("seq")
        .values_list(*_ENTRY_COLUMNS)
    )
    for (
        seq, entry_hash, kind, role, body, call_id, tool, derived, is_error, meta, tokens,
        source, artifact_id,
    ) in rows:  # fmt: skip
        views.append(
            _row_view(
                (seq, entry_hash, kind, role, call_id, tool, derived, is_error, meta),
                loads(body),
                chunk_bytes,
            )
        )
        if source == label:
            stored[entry_hash] = tokens
        if artifact_id is not None:
            artifact_of.setdefault(artifact_id, []).append(entry_hash)
    return views, stored, _receipts(artifact_of)


def _row_view(row: tuple[Any, ...], content: dict[str, Any], chunk_bytes: int) -> RowView:
    """The builder's view of a row read whole: ``row`` is ``(seq, entry hash, kind, role,
    call id, tool name, derived, is_error, meta)``, ``content`` its parsed body. Meta and a
    call's text are parsed when read (:class:`~ledger_app.entry_view.RowView`): most builds
    read few."""
    seq, entry_hash, kind, role, call_id, tool, derived, is_error, meta = row
    return RowView.of_row(
        seq=seq,
        entry_hash=entry_hash,
        kind=kind,
        role=role,
        text=None if kind == "tool_call" else content_text(kind, content),
        content=content,
        tool_call_id=call_id,
        tool_name=tool,
        derived=bool(derived),
        is_error=bool(is_error),
        meta=meta,
        chunk_bytes=chunk_bytes,
    )


def _receipts(artifact_of: Mapping[int, list[str]]) -> dict[str, Mapping[str, Any]]:
    """``{entry hash: Artifact.receipt()}`` of ``{artifact pk: [entry hash]}``: one query."""
    receipts: dict[str, Mapping[str, Any]] = {}
    if artifact_of:
        for artifact in Artifact.objects.filter(pk__in=artifact_of).select_related("tenant"):
            receipt = artifact.receipt()
            for entry_hash in artifact_of[artifact.pk]:
                receipts[entry_hash] = receipt
    return receipts


@dataclass
class BuildReads:
    """What :func:`read_for_build` read: the views (seq order), the stored token counts
    (``{entry hash: tokens}``), the artifact receipts (``{entry hash: receipt}``), and
    ``metadata_before``: 0, or the first seq read whole when the folded prefix was read as
    metadata only (:func:`ledger_app.context.build_context`'s argument). ``loaded`` lists the
    seqs of metadata views whose content a reader asked for after all (one query each)."""

    views: list[EntryView]
    stored: dict[str, int]
    receipts: dict[str, Mapping[str, Any]]
    metadata_before: int = 0
    loaded: list[int] = field(default_factory=list)
    #: ``views`` grouped into rounds (:func:`journal_app.rounds.group_rounds`) when the read
    #: grouped them (a folded prefix), else ``None``
    rounds: list[Round] | None = None


def read_for_build(
    journal: Journal, revision: int, *, covered_upto: int, tail_tokens: int, limit: int
) -> BuildReads:
    """The entries a build at ``revision`` reads, the folded prefix as metadata only
    (docs/design.md 6, "The folded prefix").

    The folded prefix: the oldest API rounds, every one covered by the last fold (up to
    ``covered_upto``) and ending before the entries that, back from ``covered_upto``, hold
    :data:`~ledger_app.context.prefix.PREFIX_WINDOW_TAILS` x ``tail_tokens`` (tokens) by their stored counts; it exists
    only when those rounds together hold more than ``limit`` tokens (the request could not
    show them whole). Its entries are :class:`~ledger_app.entry_view.MetadataView` s (no body
    read), except those a scan of the build reads, read whole: the system, developer and user
    messages, derived records, events, calls with no result in their round, and calls of a
    plan/todo tool (:data:`ledger_app.context.task_state.TASK_LIST_WORDS`). Every entry from
    the first seq after the prefix on is read whole. Without a prefix: :func:`read_entries`.

    Three queries (metadata, bodies, receipts) with a prefix, however long the journal; a
    view read whole equals :func:`read_entries`'s.
    """
    if covered_upto <= 0 or tail_tokens <= 0:
        return BuildReads(*read_entries(journal, revision))
    label = source_label(settings.TOKEN_ENCODING)
    query = (
        Entry.objects.filter(journal=journal, seq__lte=revision)
        .order_by("seq")
        .values_list(*_META_COLUMNS)
    )
    # the cursor's own rows: Django's per-value converters (booleans on SQLite) were a tenth
    # of the build at 100,000 entries; the two flags are made booleans below
    sql, params = query.query.sql_with_params()
    with connections[query.db].cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    edge = _window_edge(rows, covered_upto, PREFIX_WINDOW_TAILS * tail_tokens, label)
    # the prefix lies before the edge: when all of that holds no more than the limit, there
    # is none, and no view is made of these rows
    before = sum(row[9] for row in rows if row[0] < edge and row[10] == label)
    if not edge or before <= limit:
        return BuildReads(*read_entries(journal, revision))
    loaded: list[int] = []

    def load(seq: int) -> dict[str, Any]:
        loaded.append(seq)
        body = Entry.objects.filter(journal=journal, seq=seq).values_list("body", flat=True)
        return json.loads(body.get())

    chunk_bytes = journal.chunk_bytes
    make = MetadataView.of_row_meta
    metas = [make(row, chunk_bytes, load) for row in rows]
    stored = {row[1]: row[9] for row in rows if row[10] == label}
    rounds = group_rounds(metas)
    first_whole, prefix = prefix_rounds(rounds, edge, covered_upto)
    by_seq = {v.seq: v for v in metas}
    prefix_tokens = sum(stored.get(by_seq[s].entry_hash, 0) for r in prefix for s in r.seqs)
    if not prefix or prefix_tokens <= limit:
        return BuildReads(*read_entries(journal, revision))
    unanswered = [c for r in prefix for c in r.interrupted_call_ids]
    named = Q()
    for word in TASK_LIST_WORDS:
        named |= Q(tool_name__icontains=word)
    whole = Q(seq__gte=first_whole) | (
        Q(kind="message", role__in=AUTHORITATIVE_ROLES)
        | Q(derived=True)
        | Q(kind="event")
        | Q(kind="tool_call", tool_call_id__in=unanswered)
        | (Q(kind="tool_call") & named)
    )
    bodies = dict(
        Entry.objects.filter(whole, journal=journal, seq__lte=revision).values_list("seq", "body")
    )
    loads = json.loads
    views: list[EntryView] = []
    for view, row in zip(metas, rows, strict=True):
        body = bodies.get(view.seq)
        views.append(view if body is None else _row_view(row[:9], loads(body), chunk_bytes))
    artifact_of: dict[int, list[str]] = {}
    for row in rows:  # receipts are read for the rounds that may be shown only
        if row[11] is not None and row[0] >= first_whole:
            artifact_of.setdefault(row[11], []).append(row[1])
    return BuildReads(views, stored, _receipts(artifact_of), first_whole, loaded, rounds)


def _window_edge(rows: list[tuple[Any, ...]], covered_upto: int, window: int, label: str) -> int:
    """The seq at which the entries from it to ``covered_upto`` first hold ``window`` tokens
    by their stored counts, walking back; 0 when all of them together hold less."""
    held = 0
    for row in reversed(rows):
        if row[0] > covered_upto:
            continue
        held += row[9] if row[10] == label else 0
        if held >= window:
            return int(row[0])
    return 0


def fold_at(journal: Journal, revision: int) -> Fold | None:
    """The latest fold whose ledger holds only evidence at or before ``revision``.

    Walks the folds' numbers and ranges only (not their deltas, states and manifests), then
    reads the chosen fold whole: two queries."""
    chosen = None
    folds = Fold.objects.filter(journal=journal).order_by("number")
    for pk, kind, seq_end, fold_revision in folds.values_list("pk", "kind", "seq_end", "revision"):
        if kind == Fold.Kind.FOLD:
            if seq_end is None or seq_end > revision:
                break
        elif fold_revision > revision:
            break
        chosen = pk
    return None if chosen is None else Fold.objects.get(pk=chosen)


def covered_end(journal: Journal, fold: Fold | None) -> int:
    """The last seq the range folds up to ``fold`` cover (0 for no fold): one query."""
    if fold is None:
        return 0
    last = (
        Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD, number__lte=fold.number)
        .order_by("-number")
        .values_list("seq_end", flat=True)
        .first()
    )
    return last or 0


class ArtifactLookup:
    """``reference -> ArtifactInfo``: the store re-read and re-hashed, once per reference.

    Built for one journal; a reference of another tenant never resolves (``None``)."""

    def __init__(self, journal: Journal) -> None:
        self.tenant = journal.session.tenant
        self.seen: dict[str, ArtifactInfo | None] = {}

    def __call__(self, reference: str) -> ArtifactInfo | None:
        if reference not in self.seen:
            self.seen[reference] = self._lookup(reference)
        return self.seen[reference]

    def _lookup(self, reference: str) -> ArtifactInfo | None:
        prefix = f"artifact://{self.tenant.slug}/"
        if not reference.startswith(prefix):
            return None  # another tenant's reference never resolves here
        artifact = Artifact.objects.filter(
            tenant=self.tenant, content_hash=reference[len(prefix) :]
        ).first()
        if artifact is None:
            return None
        try:
            _, ok = artifact_read(artifact=artifact)
        except OSError:
            ok = False
        return ArtifactInfo(artifact.content_hash, ok)


#: Keys of a session's source-level fields that hold its own end status (SWE-agent and
#: mini-swe-agent ``info.exit_status``; others at the top level).
END_STATUS_KEYS = ("exit_status",)


def end_status(journal: Journal) -> str:
    """The source's own end status of the run (docs/design.md 6, end states): ``exit_status`` of
    ``info`` (SWE-agent, mini-swe-agent) or of the session's metadata, with the length of a
    ``submission`` when there is one; ``""`` when the source recorded none (or the metadata
    is not a JSON object)."""
    try:
        meta = json.loads(journal.session.meta or "{}")
    except ValueError:
        return ""
    if not isinstance(meta, dict):
        return ""
    for holder in (meta.get("info"), meta):
        if not isinstance(holder, dict):
            continue
        for key in END_STATUS_KEYS:
            value = holder.get(key)
            if isinstance(value, str) and value.strip():
                said = f"{key} {value.strip()[:80]}"
                submission = holder.get("submission")
                if isinstance(submission, str) and submission.strip():
                    said += f" (a submission of {len(submission)} characters)"
                return said
    return ""


def token_meter(counts: SharedCounts | None = None) -> Meter:
    """The token meter of ``TOKEN_ENCODING`` (its label names the encoding); with ``counts``,
    a text that meter counted before is not counted again (:class:`SharedCounts`)."""
    encoding = settings.TOKEN_ENCODING
    if counts is not None:
        return Meter(count=counts.count, label=source_label(encoding))
    return Meter(count=lambda text: count_tokens(text, encoding), label=source_label(encoding))


class SharedCounts:
    """Token counts a journal's context builds made, kept in the default cache (Redis when
    ``CACHE_URL`` is set: shared by every web process and kept over a restart).

    A build counts texts the journal stores no figure for (call ids, tool names, call
    arguments as the request carries them, receipts, checkpoint headers: several per call
    of a 20,000-entry session); the next build of the same journal, in any process, reads them
    here instead. Keyed by the text's digest and the encoding, so a figure is right for any
    build that meets the same text: a stale entry cannot exist, only a missing one (then the
    text is counted, as without the cache). One cache read per build and one write when the
    build counted a text the cache did not hold; the map is dropped and started again past
    :data:`SHARED_COUNTS_LIMIT` texts.

    Args:
        journal_id: the journal the builds are of (one map per journal and encoding).
        encoding: the tiktoken encoding (default ``settings.TOKEN_ENCODING``).
    """

    def __init__(self, journal_id: int, encoding: str | None = None) -> None:
        self.encoding = encoding or settings.TOKEN_ENCODING
        self.key = f"context-token-counts:v1:{self.encoding}:{journal_id}"
        known = cache.get(self.key)
        self.known: dict[bytes, int] = known if isinstance(known, dict) else {}
        self.added = 0

    def count(self, text: str) -> int:
        """Tokens of ``text`` (:func:`journal_app.tokens.count_tokens`), from the map when
        there. Raises ``UnicodeEncodeError`` for a lone surrogate, as the count does
        (:class:`ledger_app.validation.Meter` counts it with a replacement character)."""
        digest = hashlib.blake2b(text.encode("utf-8"), digest_size=12).digest()
        n = self.known.get(digest)
        if n is None:
            n = self.known[digest] = count_tokens(text, self.encoding)
            self.added += 1
        return n

    def save(self) -> bool:
        """Write the map back when this build added to it; returns whether it wrote."""
        if not self.added:
            return False
        if len(self.known) > SHARED_COUNTS_LIMIT:
            self.known = {}
        cache.set(self.key, self.known, timeout=SHARED_COUNTS_SECONDS)
        self.added = 0
        return True


#: texts a journal's :class:`SharedCounts` holds at most (about 5 per entry of a
#: 20,000-entry session; 40 bytes each pickled)
SHARED_COUNTS_LIMIT = 200_000
#: how long an unused map stays in the cache, seconds (a week)
SHARED_COUNTS_SECONDS = 7 * 24 * 3600


def session_pins(*, journal: Journal, revision: int | None = None) -> list[tuple[str, str, str]]:
    """The pins a request for this scope must carry byte for byte, as of ``revision``
    (default the head): every authoritative message of the journal (docs/design.md 5.2) as a
    context shows it (:func:`ledger_app.pins.pin_shown_text`: attachments as receipts), less
    the pins the ledger valid at that revision has retired, superseded or closed (a done
    request is one line).

    Returns:
        ``[(pin id, entry hex, text)]`` in journal order (:class:`Expectations` ``pins``).

    Raises:
        ContextError: ``revision`` beyond the head or below 0 (field ``revision``).
    """
    head = journal.head_seq
    rev = head if revision is None else revision
    if rev < 0 or rev > head:
        raise ContextError(f"revision {rev} is not between 0 and the head {head}", "revision")
    base = fold_at(journal, rev)
    ledger = selectors.context_ledger(journal, base) if base is not None else {"facts": {}}
    pins = {
        f["support"][0]["entry"]: f
        for f in ledger["facts"].values()
        if f.get("pin") and f.get("support")
    }
    rows = Entry.objects.filter(journal=journal, seq__lte=rev, kind="message").order_by("seq")
    out = []
    for row in rows:
        view = entry_view(row)
        if not is_pin_source(view):
            continue
        fact = pins.get(view.entry_hash) or pin_fact(view)
        if fact.get("lifecycle", "active") != "active":
            continue  # retired, superseded, or a done request (shown as one line)
        out.append((pin_fact(view)["id"], view.entry_hash, pin_shown_text(fact)))
    return out
