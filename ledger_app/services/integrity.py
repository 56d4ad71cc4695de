"""The ledger checked against the journal and the reviews (issue 16, item 5; DESIGN.md 5.2, 9).

:func:`ledger_verify` replays the deltas and compares them with the stored states; it
cannot see a fold whose stored record is changed *consistently* (a manifest, a
``range_hash``, a ``seq_end``, a pin forged in delta and state alike) or a journal that
lost its last entries. :func:`ledger_integrity` re-derives from the primary source what
each fold stores, reading only what a fold stores (number, kind, previous, seq bounds,
revision, range hash, manifest, delta), never a full ledger state:

* **figures**: each entry's token count, token source and source position (and its
  artifact's figures) against the entry's ``figures_hash``, which binds them to its hash:
  the ledger's token figures are read from them;
* **journal head**: the journal's head against its last entry (seq and hash), and every
  fold's revision at or below it: a truncated journal is reported;
* **fold chain**: numbers 1, 2, 3 ... each naming its predecessor; delta and manifest agree
  with the fold's number and revision;
* **ranges**: a range fold starts right after the previous range fold and ends at or
  before its revision; a refold covers the range of the fold it names;
* **manifest**: the covered seq bounds, entry count, entry hashes, range hash, previous
  fold, outcome and covered token figure, re-derived from the journal;
* **pins**: the delta's required pins are every authoritative message of the range,
  verbatim (under the pin rules the delta names: :func:`journal_app.content.pin_text`);
  every pin op cites one of them with its exact text; under pin rules 3 each pin has a
  ``pin_kind`` and its attachments' ranges and hashes match the pin and the entry (a
  receipt's ``read`` restores them);
* **support**: every hash a delta's ops cite, and every key of its evidence index,
  resolves to an entry of this journal at or before the fold's revision, and the evidence
  describes that entry as the journal does (seq, kind, role, is_error, derived, fold);
* **retirements and reviews**: each retirement request was made by a pending retire op of
  its fold; a decided one points at a review fold whose op, decision and reviewer match,
  an undecided one at none; each review fold answers exactly one request; each decision
  has its audit event (``review.approve`` / ``review.refuse``).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.dispatch import Signal
from django.utils import timezone

from audit_app.models import AuditEvent
from journal_app.chain import ArtifactFigures, check_figures
from journal_app.content import content_text, is_authoritative, pin_text
from journal_app.hashing import display
from journal_app.models import Artifact, Entry, Journal
from ledger_app.models import Fold, RetirementRequest
from ledger_app.pins import GOVERNING, REQUEST, attachment_problems
from ledger_app.services.checks import (
    check_claim,
    check_lookup,
    check_store,
    claim_fresh,
    claim_not_queued,
)
from ledger_app.services.entries import range_hash

#: the checks :func:`ledger_integrity` runs, in the order they are reported
CHECKS = (
    "figures",
    "journal head",
    "fold chain",
    "ranges",
    "manifest",
    "pins",
    "support",
    "retirements",
    "reviews",
)

_FOLD_FIELDS = (
    "pk",
    "number",
    "kind",
    "previous_id",
    "seq_start",
    "seq_end",
    "revision",
    "range_hash",
    "outcome",
    "writer",
    "manifest",
    "delta",
)


@dataclass(frozen=True)
class Problem:
    """One integrity problem: which check, which fold (number), fact and entry, and why."""

    check: str
    detail: str
    fold: int | None = None
    fact: str | None = None
    entry: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = f"fold {self.fold}: " if self.fold is not None else ""
        return f"{self.check}: {where}{self.detail}"


@dataclass
class _Row:
    """What the checks need of one entry: no body unless it is a pin source."""

    seq: int
    entry_hash: str
    kind: str
    role: str
    is_error: bool
    derived: bool
    token_count: int
    pin_text: str | None = None
    #: the pin text under pin rules 3 (harness blocks inside the message left out)
    pin_text3: str | None = None
    #: the pin text under pin rules 1 (before harness records were told apart, issue 15):
    #: what a delta without ``pin_rules`` was written against
    legacy_pin_text: str | None = None


def _entries(journal: Journal) -> tuple[dict[int, _Row], dict[str, _Row], list[Problem]]:
    """The journal's entries as rows, by seq and by hash, and the figures problems.

    Each entry's figures (token count and source, source position, its artifact's figures)
    are checked against its ``figures_hash`` as they stream by: the ledger's token figures
    come from them (issue 16: a tampered figure warns on the pages too).
    """
    artifacts = {
        pk: ArtifactFigures(content_hash, size, tokens, source)
        for pk, content_hash, size, tokens, source in Artifact.objects.filter(
            pk__in=Entry.objects.filter(journal=journal, artifact__isnull=False).values(
                "artifact_id"
            )
        ).values_list("pk", "content_hash", "byte_size", "token_count", "token_source")
    }
    by_seq: dict[int, _Row] = {}
    figures: list[Problem] = []
    for seq, h, kind, role, is_error, derived, tokens, source, ref, artifact, stored in (
        Entry.objects.filter(journal=journal)
        .order_by("seq")
        .values_list(
            "seq",
            "entry_hash",
            "kind",
            "role",
            "is_error",
            "derived",
            "token_count",
            "token_source",
            "source_ref",
            "artifact_id",
            "figures_hash",
        )  # fmt: skip
        .iterator(chunk_size=5000)
    ):
        by_seq[seq] = _Row(seq, h, kind, role, is_error, derived, tokens)
        figures += [
            Problem("figures", f"entry seq {seq}: {detail}", entry=display(h))
            for detail in check_figures(
                entry_hash=h,
                token_count=tokens,
                token_source=source,
                source_ref=ref,
                artifact=artifacts.get(artifact),
                figures_hash_stored=stored,
            )
        ]
    for seq, body, meta in (
        Entry.objects.filter(
            journal=journal, kind="message", role__in=("system", "developer", "user")
        )
        .values_list("seq", "body", "meta")
        .iterator(chunk_size=500)
    ):
        row = by_seq[seq]
        text = content_text(row.kind, json.loads(body))
        data = json.loads(meta)
        if text and is_authoritative(row.kind, row.role, row.derived, data, text=text, rules=2):
            row.pin_text = text
        if text and is_authoritative(row.kind, row.role, row.derived, data, text=text, rules=3):
            row.pin_text3 = pin_text(text, 3)
        if not row.derived and text:
            row.legacy_pin_text = text
    return by_seq, {r.entry_hash: r for r in by_seq.values()}, figures


def _cited(ops: list[Any]) -> list[str]:
    cited: list[str] = []
    for op in ops:
        if not isinstance(op, dict):
            continue
        fact = op.get("fact")
        if isinstance(fact, dict) and isinstance(fact.get("support"), list):
            cited += [
                s["entry"]
                for s in fact["support"]
                if isinstance(s, dict) and isinstance(s.get("entry"), str)
            ]
        if isinstance(op.get("evidence"), list):
            cited += [h for h in op["evidence"] if isinstance(h, str)]
    return cited


class _Checker:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.by_seq, self.by_hash, self.problems = _entries(journal)

    def add(self, check: str, detail: str, **where: Any) -> None:
        self.problems.append(Problem(check, detail, **where))

    # -- journal head -------------------------------------------------------------------
    def head(self, folds: list[Fold]) -> None:
        j = self.journal
        last = max(self.by_seq) if self.by_seq else 0
        last_hash = self.by_seq[last].entry_hash if last else ""
        if (j.head_seq, j.head_hash) != (last, last_hash):
            self.add(
                "journal head",
                f"the journal's head is seq {j.head_seq} {display(j.head_hash)}; its entries "
                f"end at seq {last} {display(last_hash)}",
            )
        revision = max((f.revision for f in folds), default=0)
        if revision > min(j.head_seq, last):
            fold = max(folds, key=lambda f: f.revision)
            self.add(
                "journal head",
                f"fold {fold.number} saw the journal at revision {revision}, but the journal "
                f"now ends at seq {min(j.head_seq, last)}: entries were removed (a truncated "
                "journal)",
                fold=fold.number,
            )

    # -- one fold -------------------------------------------------------------------------
    def fold(self, fold: Fold, delta: dict[str, Any], prev: Fold | None, expected: int) -> None:
        n = fold.number
        if n != expected:
            self.add("fold chain", f"fold number {n}, expected {expected}", fold=n)
        if fold.previous_id != (prev.pk if prev else None):
            self.add(
                "fold chain",
                f"names fold pk {fold.previous_id} as its predecessor, not fold "
                f"{prev.number if prev else '(none)'}",
                fold=n,
            )
        if delta.get("fold") != n:
            self.add("fold chain", f"its delta says fold {delta.get('fold')!r}", fold=n)
        if delta.get("revision") != fold.revision:
            self.add(
                "fold chain",
                f"its delta says revision {delta.get('revision')!r}, the fold {fold.revision}",
                fold=n,
            )
        manifest = fold.manifest if isinstance(fold.manifest, dict) else {}
        for key, want in (
            ("revision", fold.revision),
            ("previous_fold", prev.number if prev else None),
        ):
            if key in manifest and manifest[key] != want:
                self.add("manifest", f"{key} is {manifest[key]!r}, expected {want!r}", fold=n)
        if "outcome" in manifest and manifest["outcome"] != fold.outcome:
            self.add(
                "manifest",
                f"outcome {manifest['outcome']!r}, the fold's is {fold.outcome!r}",
                fold=n,
            )
        self.support(fold, delta)

    def range(self, fold: Fold, delta: dict[str, Any], last_end: int, origin: Fold | None) -> None:
        n = fold.number
        start, end = fold.seq_start, fold.seq_end
        if start is None or end is None:
            self.add("ranges", "a range fold without seq bounds", fold=n)
            return
        if fold.kind == Fold.Kind.FOLD and start != last_end + 1:
            self.add(
                "ranges",
                f"starts at seq {start}; the previous range fold ended at {last_end}",
                fold=n,
            )
        if fold.kind == Fold.Kind.REFOLD and (
            origin is None or (origin.seq_start, origin.seq_end) != (start, end)
        ):
            self.add(
                "ranges",
                f"a refold of fold {delta.get('refold_of')!r} must cover that fold's range, "
                f"not seq {start}-{end}",
                fold=n,
            )
        if not 1 <= start <= end <= fold.revision:
            self.add(
                "ranges", f"seq {start}-{end} is not within 1..revision {fold.revision}", fold=n
            )
        covered = [self.by_seq.get(s) for s in range(start, end + 1)]
        missing = [s for s, r in zip(range(start, end + 1), covered, strict=True) if r is None]
        if missing:
            self.add(
                "ranges",
                f"covers seq {start}-{end}, but the journal has no entry at seq {missing[0]}",
                fold=n,
            )
        rows = [r for r in covered if r is not None]
        hashes = [r.entry_hash for r in rows]
        key = range_hash(hashes)
        manifest = fold.manifest if isinstance(fold.manifest, dict) else {}
        stored_key = fold.range_hash if fold.kind == Fold.Kind.FOLD else manifest.get("range_hash")
        if fold.kind == Fold.Kind.REFOLD and origin is not None:
            if manifest.get("refold_of") != origin.number:
                self.add(
                    "manifest",
                    f"refold_of {manifest.get('refold_of')!r}, the delta says {origin.number}",
                    fold=n,
                )
        if stored_key != key:
            self.add(
                "ranges",
                f"range_hash {stored_key} does not match the entries at seq {start}-{end} "
                f"(re-derived {key})",
                fold=n,
            )
        if fold.kind == Fold.Kind.FOLD and manifest.get("range_hash") != fold.range_hash:
            self.add(
                "manifest",
                f"range_hash {manifest.get('range_hash')!r}, the fold's is {fold.range_hash}",
                fold=n,
            )
        covered_m = manifest.get("covered")
        if not isinstance(covered_m, dict):
            self.add("manifest", "no 'covered' section", fold=n)
        else:
            for name, want in (
                ("seq_start", start),
                ("seq_end", end),
                ("entries", len(rows)),
                ("entry_hashes", hashes),
            ):
                if covered_m.get(name) != want:
                    shown = f"{len(want)} hashes" if name == "entry_hashes" else repr(want)
                    self.add(
                        "manifest",
                        f"covered.{name} differs from the journal (re-derived: {shown})",
                        fold=n,
                    )
        tokens = manifest.get("tokens")
        if (
            fold.kind == Fold.Kind.FOLD
            and isinstance(tokens, dict)
            and "covered" in tokens
            and tokens["covered"] != sum(r.token_count for r in rows)
        ):
            self.add(
                "manifest",
                f"tokens.covered {tokens['covered']!r}, the covered entries hold "
                f"{sum(r.token_count for r in rows)}",
                fold=n,
            )
        self.pins(fold, delta, rows)

    def pins(self, fold: Fold, delta: dict[str, Any], rows: list[_Row]) -> None:
        """The delta's required pins and pin facts against the journal, under the pin rules
        the delta names (``delta["pin_rules"]``, 1 when absent: :data:`PIN_RULES`)."""
        n = fold.number
        rules = int(delta.get("pin_rules") or 1)

        def pin_text(r: _Row) -> str | None:
            if rules < 2:
                return r.legacy_pin_text
            return r.pin_text if rules < 3 else r.pin_text3

        sources = {r.entry_hash: r for r in rows if pin_text(r) is not None}
        if fold.kind == Fold.Kind.FOLD:
            want = [{"entry": h, "text": pin_text(r)} for h, r in sources.items()]
            if delta.get("required_pins") != want:
                self.add(
                    "pins",
                    f"the delta's required pins differ from the {len(want)} authoritative "
                    "messages of the range, verbatim",
                    fold=n,
                )
        pinned: set[str] = set()
        for op in delta.get("ops", []):
            fact = op.get("fact") if isinstance(op, dict) else None
            if not (isinstance(fact, dict) and fact.get("pin")):
                continue
            support = fact.get("support") or [{}]
            h = support[0].get("entry") if isinstance(support[0], dict) else None
            source = self.by_hash.get(h or "")
            fact_id = str(fact.get("id"))
            if source is None or pin_text(source) is None:
                self.add(
                    "pins",
                    "a pin citing an entry that is not an authoritative message of this journal",
                    fold=n,
                    fact=fact_id,
                    entry=h,
                )
            elif fact.get("text") != pin_text(source):
                self.add(
                    "pins",
                    f"pin text differs from entry seq {source.seq}",
                    fold=n,
                    fact=fact_id,
                    entry=h,
                )
            elif fact_id != f"pin:{source.entry_hash[:16]}" or fact.get("priority") != "P0":
                self.add(
                    "pins",
                    "a pin's id or priority is not the one code writes",
                    fold=n,
                    fact=fact_id,
                )
            elif rules >= 3 and fact.get("pin_kind") not in (GOVERNING, REQUEST):
                self.add("pins", "a pin without its pin_kind", fold=n, fact=fact_id, entry=h)
            elif rules >= 3:
                for problem in attachment_problems(fact, source.legacy_pin_text):
                    self.add("pins", f"pin {problem}", fold=n, fact=fact_id, entry=h)
            if h:
                pinned.add(h)
        if fold.kind == Fold.Kind.FOLD and pinned != set(sources):
            lost = sorted(set(sources) - pinned)
            self.add(
                "pins",
                "the range's authoritative messages and the delta's pin ops differ"
                + (f" (no pin for seq {sources[lost[0]].seq})" if lost else ""),
                fold=n,
                entry=lost[0] if lost else None,
            )

    def support(self, fold: Fold, delta: dict[str, Any]) -> None:
        n = fold.number
        evidence = delta.get("evidence")
        if not isinstance(evidence, dict):
            self.add("support", "the delta has no evidence index", fold=n)
            return
        ops = delta.get("ops") if isinstance(delta.get("ops"), list) else []
        for h in dict.fromkeys(_cited(ops)):
            if h not in evidence:
                self.add("support", "cited but not in the delta's evidence", fold=n, entry=h)
        for h, info in evidence.items():
            row = self.by_hash.get(h)
            if row is None:
                self.add(
                    "support",
                    f"sha256:{h} is not an entry of this journal (any more)",
                    fold=n,
                    entry=h,
                )
                continue
            if row.seq > fold.revision:
                self.add(
                    "support",
                    f"entry seq {row.seq} is after the fold's revision {fold.revision}",
                    fold=n,
                    entry=h,
                )
            want = {
                "seq": row.seq,
                "kind": row.kind,
                "role": row.role,
                "is_error": row.is_error,
                "derived": row.derived,
            }
            got = {k: info.get(k) for k in want} if isinstance(info, dict) else {}
            if got != want:
                self.add(
                    "support",
                    f"the evidence index describes entry seq {row.seq} as {got}, the journal "
                    f"as {want}",
                    fold=n,
                    entry=h,
                )
            if fold.kind == Fold.Kind.FOLD and fold.seq_start is not None:
                inside = fold.seq_start <= row.seq <= (fold.seq_end or 0)
                if inside and isinstance(info, dict) and info.get("fold") != n:
                    self.add(
                        "support",
                        f"entry seq {row.seq} is in this fold's range; the evidence says fold "
                        f"{info.get('fold')!r}",
                        fold=n,
                        entry=h,
                    )

    # -- reviews --------------------------------------------------------------------------
    def reviews(self, folds: dict[int, tuple[Fold, dict[str, Any]]]) -> None:
        by_pk = {f.pk: (f, d) for f, d in folds.values()}
        requests = list(RetirementRequest.objects.filter(journal=self.journal).order_by("pk"))
        answered: dict[int, int] = {}
        events = {
            (e.object_id, e.action): e.details
            for e in AuditEvent.objects.filter(
                object_type="retirement",
                object_id__in=[str(r.pk) for r in requests],
                action__in=("review.approve", "review.refuse"),
            )
        }
        for r in requests:
            self._request(r, by_pk, events, answered)
        for fold, _ in folds.values():
            if fold.kind != Fold.Kind.REVIEW:
                continue
            review = (fold.manifest or {}).get("review") or {}
            pk = review.get("request")
            if answered.get(fold.pk) != pk or pk is None:
                self.add(
                    "reviews",
                    f"a review fold for retirement request {pk!r}, which does not name it as "
                    "its decision",
                    fold=fold.number,
                    fact=review.get("fact_id"),
                )
            expected = hashlib.sha256(f"review:{pk}".encode()).hexdigest()
            if fold.range_hash != expected:
                self.add(
                    "reviews",
                    "range_hash is not the review key of its request",
                    fold=fold.number,
                )

    def _request(
        self,
        r: RetirementRequest,
        by_pk: dict[int, tuple[Fold, dict[str, Any]]],
        events: dict[tuple[str, str], Any],
        answered: dict[int, int],
    ) -> None:
        origin = by_pk.get(r.requested_in_id)
        if origin is None:
            self.add(
                "retirements", f"request {r.pk}: its fold is not in this journal", fact=r.fact_id
            )
            return
        fold, delta = origin
        ops = delta.get("ops", [])
        made = [
            v
            for v in delta.get("verdicts", [])
            if v.get("op") == "retire"
            and v.get("status") == "pending"
            and v.get("fact_id") == r.fact_id
        ]
        if not made:
            self.add(
                "retirements",
                f"request {r.pk}: fold {fold.number} has no pending retire op for this fact",
                fold=fold.number,
                fact=r.fact_id,
            )
        else:
            index = made[0].get("index")
            op = ops[index] if isinstance(index, int) and 0 <= index < len(ops) else {}
            if list(op.get("evidence", [])) != list(r.evidence or []):
                self.add(
                    "retirements",
                    f"request {r.pk}: its evidence differs from the retire op of fold {fold.number}",
                    fold=fold.number,
                    fact=r.fact_id,
                )
        status = r.status
        if status == RetirementRequest.Status.PENDING:
            if r.decided_in_id is not None or r.decided_at is not None or r.reviewer_id:
                self.add(
                    "retirements",
                    f"request {r.pk} is pending but records a decision",
                    fact=r.fact_id,
                )
            return
        decided = by_pk.get(r.decided_in_id) if r.decided_in_id else None
        if decided is None or decided[0].kind != Fold.Kind.REVIEW:
            self.add(
                "retirements",
                f"request {r.pk} is {status} but no review fold of this journal decided it",
                fact=r.fact_id,
            )
            return
        review_fold, review_delta = decided
        answered[review_fold.pk] = r.pk
        decision = "approve" if status == RetirementRequest.Status.APPROVED else "refuse"
        review_ops = [op for op in review_delta.get("ops", []) if isinstance(op, dict)]
        op = review_ops[0] if len(review_ops) == 1 else {}
        verdicts = review_delta.get("verdicts", [])
        reviewer = r.reviewer.get_username() if r.reviewer_id else None
        if (
            op.get("op") != "review"
            or op.get("id") != r.fact_id
            or op.get("decision") != decision
            or (reviewer is not None and op.get("reviewer") != reviewer)
            or not verdicts
            or verdicts[0].get("status") != "accepted"
        ):
            self.add(
                "retirements",
                f"request {r.pk} is {status}, but review fold {review_fold.number} records "
                f"{op.get('decision')!r} of {op.get('id')!r} by {op.get('reviewer')!r}",
                fold=review_fold.number,
                fact=r.fact_id,
            )
        if review_fold.number <= fold.number:
            self.add(
                "retirements",
                f"request {r.pk} was decided in fold {review_fold.number}, before it was made",
                fold=review_fold.number,
                fact=r.fact_id,
            )
        details = events.get((str(r.pk), f"review.{decision}"))
        if not isinstance(details, dict) or details.get("fold") != review_fold.number:
            self.add(
                "reviews",
                f"request {r.pk} is {status} with no audit event review.{decision} naming "
                f"fold {review_fold.number}",
                fold=review_fold.number,
                fact=r.fact_id,
            )


def ledger_integrity(*, journal: Journal) -> list[Problem]:
    """Check ``journal``'s ledger against the journal and the reviews (module docstring).

    Reads each fold's stored record (no ledger state), the journal's entry hashes and
    figures (bodies of authoritative messages only), the retirement requests and their
    audit events. Read-only.

    Args:
        journal: the scope whose folds are checked.

    Returns:
        Every :class:`Problem` found, in fold order then retirements; empty when the ledger
        agrees with the journal and the reviews.
    """
    journal = Journal.objects.get(pk=journal.pk)
    checker = _Checker(journal)
    folds: dict[int, tuple[Fold, dict[str, Any]]] = {}
    for fold in Fold.objects.filter(journal=journal).order_by("number").only(*_FOLD_FIELDS[1:]):
        try:
            delta = json.loads(fold.delta)
        except ValueError:
            delta = None
        if not isinstance(delta, dict):
            checker.add("fold chain", "the stored delta is not a JSON object", fold=fold.number)
            delta = {}
        folds[fold.number] = (fold, delta)
    ordered = [f for f, _ in folds.values()]
    checker.head(ordered)
    prev: Fold | None = None
    last_end = 0
    for expected, (fold, delta) in enumerate(folds.values(), start=1):
        checker.fold(fold, delta, prev, expected)
        if fold.kind in (Fold.Kind.FOLD, Fold.Kind.REFOLD):
            origin = None
            if fold.kind == Fold.Kind.REFOLD:
                pair = folds.get(delta.get("refold_of"))  # type: ignore[arg-type]
                origin = pair[0] if pair and pair[0].kind == Fold.Kind.FOLD else None
            checker.range(fold, delta, last_end, origin)
            if fold.kind == Fold.Kind.FOLD and fold.seq_end is not None:
                last_end = fold.seq_end
        prev = fold
    checker.reviews(folds)
    return checker.problems


#: sent by a page that finds no stored check for the ledger's state, with ``journal_id``;
#: ``ledger_app.receivers`` queues the ``check_ledger`` task after commit (the services
#: cannot import the tasks, which import them)
check_wanted = Signal()

#: the claim of a queued check (:func:`ledger_app.services.checks.check_claim`)
_QUEUED_KEY = "{pk}:{state}"
#: seconds a queued check is trusted to be on its way before a page queues it again
QUEUED_TTL = 600


def _state(journal: Journal) -> list[Any]:
    """What a stored check is keyed by: the journal's head and its last fold (1 query)."""
    last = Fold.objects.filter(journal=journal).order_by("-number").values_list("pk", flat=True)
    return [journal.head_seq, journal.head_hash, last.first()]


@dataclass(frozen=True)
class LedgerCheck:
    """A stored full check of one journal's ledger, for the pages (:func:`ledger_warnings`).

    Attributes:
        state: ``[head_seq, head_hash, last fold pk]`` the check ran at.
        problems: at most :data:`MAX_WARNINGS` sentences, the replay's mismatch first;
            empty when the ledger verified.
        checked_at: ISO time of the check.
    """

    state: list[Any]
    problems: list[str]
    checked_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: problems a page lists (the command lists all)
MAX_WARNINGS = 5


def ledger_check(*, journal: Journal) -> LedgerCheck:
    """Run the full check of ``journal``'s ledger and store it for the pages.

    The replay (:func:`ledger_app.services.verify.ledger_verify`) and
    :func:`ledger_integrity` (figures, head, chain, ranges, manifests, pins, support,
    retirements, reviews), stored in the database (:mod:`ledger_app.services.checks`, read by
    every process) under the journal with the state
    it ran at. Run by the ``check_ledger`` task (:mod:`ledger_app.tasks`), which a page
    queues when the stored check is missing or older than the ledger; pages only read it.
    Read-only on the database; idempotent.

    Returns:
        The stored :class:`LedgerCheck`.
    """
    from ledger_app.services.verify import ledger_verify

    journal = Journal.objects.get(pk=journal.pk)
    state = _state(journal)
    out: list[str] = []
    report = ledger_verify(journal=journal)
    if not report.ok:
        m = report.mismatch or {}
        out.append(f"replay: fold {m.get('fold')} ({m.get('check')}): {m.get('detail')}")
    out += [str(p) for p in ledger_integrity(journal=journal)]
    check = LedgerCheck(
        state=state, problems=out[:MAX_WARNINGS], checked_at=timezone.now().isoformat()
    )
    check_store(journal_id=journal.pk, state=state, problems=check.problems, at=timezone.now())
    return check


def _checked_at(stored: dict[str, Any]) -> datetime | None:
    """When a stored check ran (``None``: no readable time)."""
    try:
        return datetime.fromisoformat(stored["checked_at"])
    except (KeyError, TypeError, ValueError):
        return None


def _too_old(stored: dict[str, Any]) -> bool:
    """Whether a stored check ran more than ``LEDGER_CHECK_MAX_AGE_SECONDS`` ago."""
    at = _checked_at(stored)
    if at is None:
        return True
    age = (timezone.now() - at).total_seconds()
    return age > settings.LEDGER_CHECK_MAX_AGE_SECONDS


@dataclass(frozen=True)
class ShownCheck:
    """What a ledger page shows of the stored check: ``problems`` (at most
    :data:`MAX_WARNINGS` sentences, ``[]`` when it verified) and ``checked_at`` (when that
    check ran, ``None`` before the first), so a reader sees how fresh the answer is."""

    problems: list[str]
    checked_at: datetime | None
    pending: bool = False  # the ledger moved past the stored check: a new one is on its way
    #: why a wanted check could not be queued (the task broker unreachable), else ""
    not_queued: str = ""


def ledger_warnings(*, journal: Journal) -> ShownCheck:
    """Why ``journal``'s ledger does not verify, for the UI's warning, and when it was
    checked.

    Reads the stored :func:`ledger_check` with the ledger's state (one query,
    whatever the journal's size: a page never runs the check itself). When no check
    is stored for the current state (a new entry or fold since, or none yet), the check is
    queued once per state (:data:`check_wanted`, whose receiver queues the ``check_ledger``
    task after commit) and the last stored problems are shown meanwhile, marked pending
    (the page says "checking ..."). With eager tasks (the embedded default, no worker) the
    check runs in a background thread of the web process (:mod:`ledger_app.background`),
    never inside the request; behind a worker it runs there. A stored check older than
    ``LEDGER_CHECK_MAX_AGE_SECONDS`` (default 3,600) is queued again too, so a change made
    in the database in place (no new entry or fold) shows within that time. The stored
    checks live in the database, so every web and worker process reads the same ones.

    Returns:
        :class:`ShownCheck`: at most :data:`MAX_WARNINGS` problems as sentences (the
        replay's mismatch first), the time of the stored check they come from, and whether
        a newer check is pending.
    """
    state, stored, claim = check_lookup(journal=journal)
    pending = stored is None or stored["state"] != state
    not_queued, wait = claim_not_queued(claim)
    if (pending or _too_old(stored)) and not wait:
        # a change made in place (no new entry nor fold) is seen once the check is older
        # than LEDGER_CHECK_MAX_AGE_SECONDS: queued again, once per period
        period = ""
        if stored is not None and stored["state"] == state:
            period = f":{int(time.time()) // max(1, settings.LEDGER_CHECK_MAX_AGE_SECONDS)}"
        queued = _QUEUED_KEY.format(pk=journal.pk, state=":".join(map(str, state))) + period
        key = queued[-200:]
        if not claim_fresh(claim, key=key, ttl_seconds=QUEUED_TTL) and check_claim(
            journal_id=journal.pk, key=key, ttl_seconds=QUEUED_TTL
        ):
            check_wanted.send(sender=Journal, journal_id=journal.pk)
    if not pending:
        not_queued = ""
    if not stored:
        return ShownCheck([], None, pending=True, not_queued=not_queued)
    return ShownCheck(
        list(stored["problems"]), _checked_at(stored), pending=pending, not_queued=not_queued
    )
