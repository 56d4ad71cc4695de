"""Re-import of a session export's ledger into any scope (issue 16, item 9; DESIGN.md 5.2).

``journal_app.formats.ledgerkeep_export`` brings the journal back: into the scope it came
from hash for hash, into any other scope re-hashed for that scope (the scope is part of the
entry header, DESIGN.md 4; body hashes never change). :func:`ledger_reimport` then
re-creates what the export holds beside the journal, for one re-imported journal:

* **folds**, in number order, each through the storage helpers every fold uses
  (:func:`~ledger_app.services.common.delta_apply`, then
  :func:`~ledger_app.services.common.fold_store`): the exported delta with every entry hash
  (and the 16-hex prefixes fact ids carry, ``pin:<16 hex>``) mapped old -> new, its verdicts
  re-derived by the reducer and compared with the exported ones, the manifest mapped the
  same way with its range hash re-derived from the new journal;
* **retirement requests** with the fold that made them, and **decisions** with the review
  fold that applied them (reviewer, comment, time, and the ``review.approve`` /
  ``review.refuse`` audit event ``verify_ledger`` looks for);
* **comments** and **annotations** through :mod:`audit_app.services` (each logged), and
  **recovery receipts** (their snapshot re-scoped, fold references by number).

Before anything is stored the export is re-verified on its own terms: each delta hashes to
its exported ``delta_hash``; replaying the exported deltas through the pure reducer gives
every exported ``state_hash`` and verdict; each range fold's exported ``range_hash`` is the
hash of the exported entries it covers. After the copy's state at each fold must be the
exported state with the hashes mapped. At the end ``ledger_verify`` and ``ledger_integrity``
run on the copy; any problem raises, and the caller's transaction writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.apps import apps
from django.utils.dateparse import parse_datetime

from audit_app.services import annotation_add, audit_record, comment_add
from journal_app.formats import ledgerkeep_export
from journal_app.models import Entry, Journal, Membership
from journal_app.services import journal_import
from journal_app.services.errors import _write_transaction
from journal_app.services.imports import ImportResult
from ledger_app import reducer
from ledger_app.errors import LedgerError
from ledger_app.models import Fold, FoldAttempt, Proposal, RetirementRequest, Verdict
from ledger_app.services.entries import range_hash
from ledger_app.services.integrity import ledger_integrity
from ledger_app.services.records import folds_seal
from ledger_app.services.state import latest_fold
from ledger_app.services.store import delta_apply, fold_store
from ledger_app.services.verify import ledger_verify

_HEX64 = re.compile(r"[0-9a-f]{64}")
_ID16 = re.compile(r"(?<=:)[0-9a-f]{16}(?![0-9a-f])")
#: values kept verbatim when hashes are mapped: texts quote the journal byte for byte, and a
#: model's replies (and what was parsed from them) are what the model said
_VERBATIM = frozenset({"text", "quote", "fact_text", "claim", "raw", "verifier_raw", "parsed"})


class ReimportInvalid(LedgerError):
    """The export's ledger records do not verify, or do not fit the re-imported journal
    (HTTP 422 ``reimport_invalid``; ``field`` names the record field). Nothing is written
    when the caller holds the import's transaction."""

    status = 422
    code = "reimport_invalid"


class ReimportConflict(LedgerError):
    """The journal already holds a different ledger (HTTP 409 ``reimport_conflict``)."""

    status = 409
    code = "reimport_conflict"


@dataclass
class ReimportResult:
    """What :func:`ledger_reimport` re-created for one journal; ``skipped`` says what not, why."""

    folds: int = 0
    attempts: int = 0
    retirements: int = 0
    decisions: int = 0
    comments: int = 0
    annotations: int = 0
    receipts: int = 0
    unchanged: bool = False
    skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Remap:
    """Maps old entry hashes (and their 16-hex fact-id prefixes) to new ones in JSON values."""

    def __init__(self, hashes: Mapping[str, str]) -> None:
        self.full = dict(hashes)
        self.short = {o[:16]: n[:16] for o, n in hashes.items()}

    def text(self, s: str) -> str:
        s = _HEX64.sub(lambda m: self.full.get(m.group(0), m.group(0)), s)
        return _ID16.sub(lambda m: self.short.get(m.group(0), m.group(0)), s)

    def __call__(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {
                (self.text(k) if isinstance(k, str) else k): self(v, k) for k, v in value.items()
            }
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, str) and key not in _VERBATIM:
            return self.text(value)
        return value


def _of(records: Sequence[Mapping[str, Any]], kind: str, journal: Journal) -> list[Any]:
    return [r for r in records if r.get("type") == kind and r.get("lane") == journal.lane]


def reimport_mapping(*, journal: Journal, records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Old entry hash -> new entry hash (hex) for ``journal``, re-imported from ``records``.

    Matches the export's ``entry`` records of ``journal``'s lane to the stored entries by
    seq (a journal that grew after the export keeps its later entries), and re-checks each stored body against the exported ``body_hash`` and
    ``byte_length`` (the body is the same bytes whatever the scope).

    Raises:
        ReimportInvalid: an entry missing, or a body that does not hash as exported.
    """
    stored = {
        seq: (h, b, n)
        for seq, h, b, n in Entry.objects.filter(journal=journal).values_list(
            "seq", "entry_hash", "body_hash", "byte_length"
        )
    }
    mapping: dict[str, str] = {}
    for rec in _of(records, "entry", journal):
        row = stored.get(rec.get("seq"))
        if row is None or (row[1], row[2]) != (rec.get("body_hash"), rec.get("byte_length")):
            raise ReimportInvalid(
                f"entry seq {rec.get('seq')} of {journal.scope_label} does not hold the "
                "exported body (body hash or length differs)",
                field="body_hash",
            )
        mapping[str(rec["entry_hash"])] = row[0]
    return mapping


def _verdicts(results: Sequence[reducer.OpResult]) -> list[dict[str, Any]]:
    return [
        {"index": r.index, "op": r.op, "status": r.status, "reason": r.reason, "fact_id": r.fact_id}
        for r in results
    ]


def _user(name: Any, tenant: Any, roles: Sequence[str] | None = None) -> Any:
    """The user named in an export, only if here they are an active member of the target
    tenant (with one of ``roles`` when given): an imported file never lends a decision, a
    comment or an annotation to anyone else's account."""
    if not isinstance(name, str) or not name:
        return None
    members = Membership.objects.filter(tenant=tenant, user__username=name, user__is_active=True)
    if roles is not None:
        members = members.filter(role__in=list(roles))
    member = members.select_related("user").first()
    return member.user if member is not None else None


class _Reimport:
    def __init__(
        self, journal: Journal, records: Sequence[Mapping[str, Any]], mapping: Mapping[str, str]
    ) -> None:
        self.journal = journal
        self.records = records
        self.remap = _Remap(mapping)
        self.old_by_seq = {r["seq"]: r["entry_hash"] for r in _of(records, "entry", journal)}
        self.old_state: dict[str, Any] = reducer.reduce(None, [])
        self.folds: dict[int, Fold] = {}
        self.requests: dict[int, RetirementRequest] = {}
        self.retirements = _of(records, "retirement", journal)
        self.result = ReimportResult()

    def bad(self, rec: Mapping[str, Any], what: str, name: str) -> ReimportInvalid:
        return ReimportInvalid(f"fold {rec.get('number')!r}: {what}", field=name)

    def covered(self, rec: Mapping[str, Any]) -> tuple[list[str], list[str]]:
        start, end = rec.get("seq_start"), rec.get("seq_end")
        if not (isinstance(start, int) and isinstance(end, int)):
            return [], []
        old = [self.old_by_seq.get(s, "") for s in range(start, end + 1)]
        return old, [self.remap.full.get(h, "") for h in old]

    # -- one fold ---------------------------------------------------------------------------
    def fold(self, rec: Mapping[str, Any]) -> None:
        number = rec.get("number")
        text = rec.get("delta")
        if not isinstance(text, str) or hashlib.sha256(text.encode()).hexdigest() != rec.get(
            "delta_hash"
        ):
            raise self.bad(rec, "the delta does not hash to its delta_hash", "delta_hash")
        old_delta = json.loads(text)
        old_verdicts = old_delta.pop("verdicts", [])
        previous = latest_fold(self.journal)
        if number != (previous.number + 1 if previous else 1) or rec.get("previous") != (
            previous.number if previous else None
        ):
            raise self.bad(rec, "folds must run 1, 2, 3 ... each naming its predecessor", "number")
        if old_delta.get("fold") != number:
            raise self.bad(rec, f"its delta says fold {old_delta.get('fold')!r}", "delta")
        # the export on its own terms: the pure replay gives its verdicts and state hash
        try:
            results = reducer.apply_in_place(self.old_state, old_delta)
        except (reducer.DeltaInvalid, reducer.PinViolation) as exc:
            raise self.bad(rec, f"the reducer refuses the exported delta: {exc}", "delta") from None
        if _verdicts(results) != old_verdicts:
            raise self.bad(rec, "the exported verdicts are not the reducer's", "delta")
        if reducer.state_hash(self.old_state) != rec.get("state_hash"):
            raise self.bad(rec, "the replayed state does not hash to state_hash", "state_hash")
        kind = rec.get("kind")
        old_cov, new_cov = self.covered(rec)
        if kind == Fold.Kind.FOLD and range_hash(old_cov) != rec.get("range_hash"):
            raise self.bad(rec, "range_hash is not the hash of the entries it covers", "range_hash")
        # the copy
        delta = self.remap(old_delta)
        applied = delta_apply(self.journal, previous, delta)
        if _verdicts(applied.reduction.results) != self.remap(old_verdicts):
            raise self.bad(rec, "the reducer judges the re-imported delta differently", "delta")
        if applied.state_hash != reducer.state_hash(self.remap(self.old_state)):
            raise self.bad(rec, "the re-imported state is not the exported one", "state_hash")
        manifest = self.remap(rec.get("manifest") or {})
        key = self.key(rec, manifest, new_cov, previous)
        if "range_hash" in manifest and new_cov:
            manifest["range_hash"] = range_hash(new_cov)
        fold = fold_store(
            journal=self.journal,
            applied=applied,
            checkpoint=True if kind == Fold.Kind.CONSOLIDATION else None,
            kind=kind,
            previous=previous,
            seq_start=rec.get("seq_start"),
            seq_end=rec.get("seq_end"),
            revision=rec.get("revision"),
            range_hash=key,
            outcome=rec.get("outcome"),
            writer=str(rec.get("writer", ""))[:100],
            verifier=str(rec.get("verifier", ""))[:100],
            manifest=manifest,
            facts_added=int(rec.get("facts_added") or 0),
            ops_rejected=int(rec.get("ops_rejected") or 0),
        )
        self.folds[fold.number] = fold
        self.result.folds += 1
        if kind == Fold.Kind.REVIEW:
            self.decide(rec, fold)
        self.request(fold)

    def key(
        self,
        rec: Mapping[str, Any],
        manifest: dict[str, Any],
        new_cov: list[str],
        previous: Fold | None,
    ) -> str:
        kind = rec.get("kind")
        if kind == Fold.Kind.FOLD:
            return range_hash(new_cov)
        if kind == Fold.Kind.REVIEW:
            review = manifest.get("review") or {}
            request = self.requests.get(review.get("request"))  # type: ignore[arg-type]
            if request is None:
                raise self.bad(rec, "a review fold for no exported retirement request", "manifest")
            review["request"] = request.pk
            return hashlib.sha256(f"review:{request.pk}".encode()).hexdigest()
        if kind == Fold.Kind.CONSOLIDATION and previous is not None:
            target = (manifest.get("consolidation") or {}).get("target_tokens")
            return hashlib.sha256(
                f"consolidation:{previous.state_hash}:{target}".encode()
            ).hexdigest()
        origin = self.folds.get(manifest.get("refold_of") or 0)
        if kind == Fold.Kind.REFOLD and origin is not None:  # as ledger_refold_apply keys it
            return hashlib.sha256(
                f"refold:{origin.range_hash}:{rec.get('writer')}".encode()
            ).hexdigest()
        return hashlib.sha256(
            f"{kind}:{rec.get('writer')}:{rec.get('number')}:{new_cov}".encode()
        ).hexdigest()

    # -- retirements and decisions ------------------------------------------------------------
    def request(self, fold: Fold) -> None:
        for rec in self.retirements:
            if rec.get("requested_in") != fold.number:
                continue
            made = RetirementRequest.objects.create(
                journal=self.journal,
                fact_id=self.remap.text(str(rec.get("fact_id", ""))),
                fact_text=str(rec.get("fact_text", "")),
                requested_in=fold,
                evidence=self.remap(rec.get("evidence") or []),
                reason=str(rec.get("reason", "")),
            )
            self.requests[rec.get("pk", id(rec))] = made
            self.result.retirements += 1

    def decide(self, rec: Mapping[str, Any], fold: Fold) -> None:
        pk = (fold.manifest.get("review") or {}).get("request")
        request = next((r for r in self.requests.values() if r.pk == pk), None)
        exported = next(
            (
                r
                for r in self.retirements
                if r.get("decided_in") == fold.number
                and self.remap.text(str(r.get("fact_id"))) == getattr(request, "fact_id", None)
            ),
            None,
        )
        if request is None or exported is None:
            raise self.bad(rec, "a review fold whose decision the export does not hold", "kind")
        decision = "approve" if exported.get("status") == "approved" else "refuse"
        reviewer = _user(
            exported.get("reviewer"),
            self.journal.session.tenant,
            (Membership.Role.REVIEWER, Membership.Role.ADMIN),
        )
        if reviewer is None and exported.get("reviewer"):
            self.result.skipped.append(
                f"reviewer {exported.get('reviewer')!r} of fact {request.fact_id}: not an "
                "active reviewer of this tenant; the decision is kept without a reviewer account"
            )
        request.status = exported.get("status")
        request.reviewer = reviewer
        request.comment = str(exported.get("comment", ""))
        request.decided_at = parse_datetime(str(exported.get("decided_at") or ""))
        request.decided_in = fold
        request.save()
        audit_record(
            actor=reviewer,
            tenant=self.journal.session.tenant,
            action=f"review.{decision}",
            object_type="retirement",
            object_id=str(request.pk),
            object_label=f"{self.journal.scope_label} fact {request.fact_id}",
            details={
                "comment": request.comment,
                "fold": fold.number,
                "fact_id": request.fact_id,
                "imported": True,
                "reviewer": exported.get("reviewer"),
            },
        )
        self.result.decisions += 1

    # -- writer runs --------------------------------------------------------------------------
    def attempts(self) -> None:
        for rec in _of(self.records, "attempt", self.journal):
            number = rec.get("fold")
            fold = self.folds.get(number) if number is not None else None
            if number is not None and fold is None:
                raise ReimportInvalid(
                    f"an attempt names fold {number!r}, not in the export", field="fold"
                )
            old_cov, new_cov = self.covered(rec)
            if range_hash(old_cov) != rec.get("range_hash"):
                raise ReimportInvalid(
                    f"the attempt at fold {rec.get('number')!r}: range_hash is not the hash "
                    "of the entries it covers",
                    field="range_hash",
                )
            attempt = FoldAttempt.objects.create(
                journal=self.journal,
                fold=fold,
                range_hash=range_hash(new_cov),
                **{
                    k: self.remap(rec.get(k), k)
                    for k in (
                        "number",
                        "seq_start",
                        "seq_end",
                        "revision",
                        "writer",
                        "writer_label",
                        "verifier",
                        "outcome",
                        "error",
                        "record",
                    )
                },
            )
            for p in rec.get("proposals") or []:
                proposal = Proposal.objects.create(
                    attempt=attempt,
                    **{k: self.remap(v, k) for k, v in p.items() if k != "verdicts"},
                )
                Verdict.objects.bulk_create(
                    [
                        Verdict(proposal=proposal, **{k: self.remap(x, k) for k, x in v.items()})
                        for v in p.get("verdicts") or []
                    ]
                )
            self.result.attempts += 1

    # -- comments, annotations, receipts ------------------------------------------------------
    def comments(self) -> None:
        for rec in _of(self.records, "comment", self.journal):
            author = _user(rec.get("author"), self.journal.session.tenant)
            if author is None:
                self.result.skipped.append(f"comment by {rec.get('author')!r}: no such user here")
                continue
            entry = None
            if rec.get("entry_hash"):
                new = self.remap.full.get(str(rec["entry_hash"]))
                entry = Entry.objects.filter(journal=self.journal, entry_hash=new).first()
                if entry is None:
                    raise ReimportInvalid(
                        f"a comment on entry sha256:{rec['entry_hash']}, not in the export",
                        field="entry_hash",
                    )
            comment_add(
                journal=self.journal,
                author=author,
                text=str(rec.get("text", "")),
                entry=entry,
                fact_id="" if entry is not None else self.remap.text(str(rec.get("fact_id"))),
            )
            self.result.comments += 1

    def annotations(self) -> None:
        for rec in self.records:
            if rec.get("type") != "annotation":
                continue
            author = _user(rec.get("author"), self.journal.session.tenant)
            if author is None:
                self.result.skipped.append(
                    f"annotation by {rec.get('author')!r}: no such user here"
                )
                continue
            annotation_add(
                session=self.journal.session,
                author=author,
                verdict=str(rec.get("verdict", "")),
                note=str(rec.get("note", "")),
            )
            self.result.annotations += 1

    def receipts(self) -> None:
        rows = _of(self.records, "receipt", self.journal)
        if not rows:
            return
        try:
            Receipt = apps.get_model("recovery_app", "Receipt")
        except LookupError:
            self.result.skipped.append(f"{len(rows)} receipt(s): recovery is not installed")
            return
        fields = {f.name: f for f in Receipt._meta.concrete_fields}
        fold_fields = {n for n, f in fields.items() if getattr(f, "related_model", None) is Fold}
        scope = self.journal.scope_fields()
        for rec in rows:
            values: dict[str, Any] = {}
            for name, value in rec.items():
                if name in fold_fields:
                    if value is not None and value not in self.folds:
                        raise ReimportInvalid(
                            f"a receipt names fold {value!r}, not in the export", field=name
                        )
                    values[name] = self.folds.get(value) if value is not None else None
                elif name in fields and name not in ("id", "journal", "created_at"):
                    values[name] = self.remap(value, name)
            snapshot = values.get("snapshot")
            if isinstance(snapshot, dict) and snapshot:
                head = snapshot.get("head_hash")
                if head and head not in self.remap.full.values():
                    raise ReimportInvalid(
                        "a receipt's snapshot names a head that is not an entry of the export",
                        field="snapshot",
                    )
                snapshot.update({k: v for k, v in scope.items() if k in snapshot})
                if "scope" in snapshot:
                    snapshot["scope"] = self.journal.scope_label
            Receipt.objects.create(journal=self.journal, **values)
            self.result.receipts += 1


def ledger_reimport(
    *, journal: Journal, records: Sequence[Mapping[str, Any]], mapping: Mapping[str, str]
) -> ReimportResult:
    """Re-create an export's ledger, reviews, comments and receipts for a re-imported journal.

    Call it inside the import's transaction, after the journal import (see the module
    docstring for what is re-created and re-verified).

    Args:
        journal: the journal the export's entries of one lane were imported into.
        records: the export's records between header and end
            (:func:`journal_app.formats.ledgerkeep_export.export_records`); those of other
            lanes are ignored, annotations (session-level) are taken by the export's first
            lane.
        mapping: old entry hash -> new entry hash, hex (:func:`reimport_mapping`).

    Returns:
        :class:`ReimportResult`. When ``journal`` already holds the exported folds (the
        re-import of an export into the scope it came from, possibly grown since) nothing is
        written and ``unchanged`` is true.

    Raises:
        ReimportInvalid: (422) a record that does not verify (delta hash, verdicts, state
            hash, range hash), or a copy that ``ledger_verify`` / ``ledger_integrity``
            reports; ``field`` names the record field.
        ReimportConflict: (409) the journal holds folds that are not the exported ones.
    """
    folds = sorted(
        (dict(r) for r in _of(records, "fold", journal)), key=lambda r: r.get("number") or 0
    )
    existing = list(
        Fold.objects.filter(journal=journal)
        .order_by("number")
        .values_list("number", "kind", "state_hash")
    )
    if existing:
        exported = [(r.get("number"), r.get("kind")) for r in folds]
        same = [(n, k) for n, k, _ in existing[: len(exported)]] == exported
        if same and _holds_export(existing[len(exported) - 1][2] if folds else "", folds, mapping):
            return ReimportResult(unchanged=True)
        raise ReimportConflict(
            f"{journal.scope_label} already has a ledger of {len(existing)} fold(s); re-import "
            "the export into a fresh session"
        )
    work = _Reimport(journal, records, mapping)
    # retirement records are keyed by their order; the review fold's manifest names the
    # original request pk, which the export does not carry: map by decided_in instead
    for index, rec in enumerate(work.retirements):
        rec = dict(rec)
        work.retirements[index] = rec
        rec["pk"] = index
    for rec in folds:
        if rec.get("kind") == Fold.Kind.REVIEW:
            _review_request(work, rec)
        work.fold(rec)
    work.attempts()
    folds_seal(journal.pk)  # the attempts joined folds already sealed
    work.comments()
    lanes = [r.get("lane") for r in records if r.get("type") == "journal"]
    if lanes and lanes[0] == journal.lane:
        work.annotations()
    work.receipts()
    report = ledger_verify(journal=journal)
    if not report.ok:
        raise ReimportInvalid(f"the copy's ledger does not verify: {report.mismatch}")
    problems = ledger_integrity(journal=journal)
    if problems:
        p = problems[0]
        raise ReimportInvalid(
            f"the copy fails the integrity check {p.check!r}"
            + (f" at fold {p.fold}" if p.fold else "")
            + f": {p.detail}"
        )
    return work.result


def _holds_export(
    stored_hash: str, folds: Sequence[Mapping[str, Any]], mapping: Mapping[str, str]
) -> bool:
    """Whether a journal whose last exported-numbered fold has ``stored_hash`` already holds
    the export: the exported deltas replayed (pure reducer) and carried into this scope's
    entry hashes give that state hash. True for the export's own scope (identity mapping) and
    for a copy it was re-imported into before, so importing it again is a no-op there."""
    if not folds:
        return True
    state: dict[str, Any] = reducer.reduce(None, [])
    try:
        for rec in folds:
            delta = json.loads(str(rec.get("delta") or "{}"))
            delta.pop("verdicts", None)
            reducer.apply_in_place(state, delta)
    except (ValueError, reducer.DeltaInvalid, reducer.PinViolation):
        return False
    return reducer.state_hash(_Remap(mapping)(state)) == stored_hash


def _review_request(work: _Reimport, rec: Mapping[str, Any]) -> None:
    """Point a review fold's manifest at the index of the retirement record it decided."""
    decided = [r for r in work.retirements if r.get("decided_in") == rec.get("number")]
    if len(decided) != 1:
        raise work.bad(rec, "a review fold must decide exactly one exported retirement", "kind")
    manifest = dict(rec.get("manifest") or {})
    manifest["review"] = {**(manifest.get("review") or {}), "request": decided[0]["pk"]}
    rec_any: Any = rec
    rec_any["manifest"] = manifest


@dataclass
class TranscriptImport:
    """What :func:`transcript_import` did: the journal import and each journal's ledger.

    Attributes:
        imported: the journal's :class:`journal_app.services.imports.ImportResult`.
        ledgers: journal pk -> :class:`ReimportResult`, for a ledgerkeep export only.
    """

    imported: ImportResult
    ledgers: dict[int, ReimportResult] = field(default_factory=dict)


def transcript_import(*, path: str | Path, **options: Any) -> TranscriptImport:
    """Import a transcript, and a ledgerkeep export's ledger with it, in one transaction.

    The one import every entry point calls: the ``import_journal`` command directly, the
    upload API through :mod:`journal_app.hooks` (registered by ``ledger_app.apps``). The
    journal comes from :func:`journal_app.services.journal_import`; for a ledgerkeep export
    :func:`ledger_reimport` then re-creates, per imported journal, its folds, verdicts,
    retirements and decisions, comments, annotations and receipts, re-verified (issue 16,
    item 9).

    Args:
        path: the transcript file (or OpenCode export folder).
        options: ``fmt``, ``tenant``, ``session``, ``lane``, ``branch``, ``progress``,
            ``on_parsed``, passed to :func:`journal_app.services.journal_import` as given;
            ``actor`` (the user, ``None`` for a command) is kept in the ``journal.import``
            audit event written in the same transaction.

    Returns:
        :class:`TranscriptImport`.

    Raises:
        Whatever :func:`journal_app.services.journal_import` raises, and
        :class:`ReimportInvalid` (422) / :class:`ReimportConflict` (409). In every case
        nothing is written: the journal's rows roll back with the ledger's.
    """
    actor = options.pop("actor", None)
    # a lost connection: "nothing was written" inside, "unknown" at the commit itself
    with _write_transaction(f"the import of {Path(str(path)).name}"):
        imported = journal_import(path=path, **options)
        ledgers: dict[int, ReimportResult] = {}
        if imported.parsed.format == ledgerkeep_export.NAME:
            _, records = ledgerkeep_export.export_records(path)
            for j in imported.journals:
                ledgers[j.pk] = ledger_reimport(
                    journal=j, records=records, mapping=reimport_mapping(journal=j, records=records)
                )
        session = imported.journal.session
        audit_record(  # in the import's transaction: no event for an import rolled back
            actor=actor,
            tenant=session.tenant,
            action="journal.import",
            object_type="session",
            object_id=f"{session.tenant.slug}/{session.key}",
            object_label=Path(str(path)).name,
            details={
                "session": session.key,
                "format": imported.parsed.format,
                "appended": imported.append.appended,
                "unchanged": imported.append.unchanged,
                "journals": [j.scope_label for j in imported.journals],
            },
        )
    return TranscriptImport(imported=imported, ledgers=ledgers)
