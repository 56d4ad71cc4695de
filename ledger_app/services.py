"""Every state change of the ledger: folds, reviews, verification (DESIGN.md section 5).

``ledger_fold`` is the one function the command, the task, the API and the UI call to fold;
``ledger_review`` the one that decides a P0 retirement. Both lock the journal row, so there
is one ledger change at a time per branch (DESIGN.md section 9).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from journal_app.models import Entry, Journal, Membership
from journal_app.rounds import complete_prefix_end, group_rounds
from journal_app.services import entry_check
from journal_app.tokens import count_tokens, source_label
from ledger_app import reducer
from ledger_app.budget import plan_consolidation, render_fact
from ledger_app.facts import support_hashes
from ledger_app.loss import loss_report
from ledger_app.mechanical import EntryView, is_pin_source, pin_fact, required_pins
from ledger_app.models import Fold, RetirementRequest
from ledger_app.writers import MechanicalWriter, Writer

WRITERS: dict[str, type] = {"mechanical": MechanicalWriter}
FALLBACK_NOTE = "retrieve raw journal evidence before relying on omitted state"


class LedgerError(Exception):
    """Base of the ledger's domain errors."""


class FoldRefused(LedgerError):
    """A required pin is missing or altered, or a pin no longer matches its entry; nothing stored."""


class ReviewError(LedgerError):
    """A review that cannot be applied (not pending, bad decision)."""


class ReviewForbidden(LedgerError):
    """The user is not a reviewer (or admin) of the journal's tenant."""


@dataclass
class FoldResult:
    """``fold`` is the stored fold (new, or the existing one for the same range); ``created``."""

    fold: Fold | None
    created: bool
    reason: str = ""


def entry_view(entry: Entry) -> EntryView:
    """The pure view of a row that the writers and :mod:`ledger_app.mechanical` read."""
    return EntryView(
        seq=entry.seq,
        entry_hash=entry.entry_hash,
        kind=entry.kind,
        role=entry.role,
        text=entry.text,
        content=entry.content,
        tool_call_id=entry.tool_call_id,
        tool_name=entry.tool_name,
        derived=entry.derived,
        is_error=entry.is_error,
        meta=entry.meta_dict,
    )


def range_hash(hashes: Sequence[str]) -> str:
    """Idempotency key of a fold: sha256 of the canonical list of covered entry hashes."""
    return hashlib.sha256(rfc8785.dumps(list(hashes))).hexdigest()


def latest_fold(journal: Journal, kind: str | None = None) -> Fold | None:
    """The journal's last fold (of ``kind`` if given), or ``None``."""
    qs = Fold.objects.filter(journal=journal)
    if kind:
        qs = qs.filter(kind=kind)
    return qs.order_by("-number").first()


def ledger_state(journal: Journal, fold: Fold | None = None) -> dict[str, Any]:
    """The ledger state after ``fold`` (default: the latest); the empty state if none."""
    fold = fold or latest_fold(journal)
    return fold.state_dict if fold else copy.deepcopy(reducer.EMPTY_STATE)


def _info(e: Entry, fold_number: int) -> dict[str, Any]:
    return {
        "seq": e.seq,
        "kind": e.kind,
        "role": e.role,
        "is_error": e.is_error,
        "derived": e.derived,
        "fold": fold_number,
    }


def _cited(ops: Sequence[dict[str, Any]]) -> set[str]:
    cited: set[str] = set()
    for op in ops:
        fact = op.get("fact")
        if isinstance(fact, dict) and isinstance(fact.get("support"), list):
            cited |= {
                s["entry"]
                for s in fact["support"]
                if isinstance(s, dict) and isinstance(s.get("entry"), str)
            }
        if isinstance(op.get("evidence"), list):
            cited |= {h for h in op["evidence"] if isinstance(h, str)}
    return cited


def _evidence(
    journal: Journal,
    covered: Sequence[Entry],
    ops: Sequence[dict[str, Any]],
    number: int,
    revision: int,
) -> dict[str, dict[str, Any]]:
    """Evidence index of a delta: covered entries plus earlier raw entries the ops cite."""
    evidence = {e.entry_hash: _info(e, number) for e in covered}
    missing = _cited(ops) - evidence.keys()
    if missing:
        ranges = list(
            Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD).values_list(
                "number", "seq_start", "seq_end"
            )
        )
        for e in Entry.objects.filter(journal=journal, entry_hash__in=missing, seq__lte=revision):
            owner = next((n for n, a, b in ranges if a <= e.seq <= b), number)
            evidence[e.entry_hash] = _info(e, owner)
    return evidence


def _active_tokens(state: dict[str, Any]) -> int:
    text = "\n".join(
        f["text"] for f in state.get("facts", {}).values() if f["lifecycle"] == "active"
    )
    return count_tokens(text, settings.TOKEN_ENCODING)


def _provider_usage(entries: Sequence[Entry]) -> dict[str, Any]:
    totals = {"input_tokens": 0, "output_tokens": 0, "entries_with_usage": 0}
    for e in entries:
        usage = e.meta_dict.get("usage")
        if isinstance(usage, dict):
            totals["entries_with_usage"] += 1
            for key in ("input_tokens", "output_tokens"):
                value = usage.get(
                    key,
                    usage.get(
                        {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}[key]
                    ),
                )
                if isinstance(value, int):
                    totals[key] += value
    return totals


def instructions_check(journal: Journal, state: dict[str, Any]) -> dict[str, Any]:
    """Re-hash every pin against its journal entry (issue 3, "instruction integrity").

    For each pin in ``state`` the cited entry is read, its hashes recomputed, and its text
    compared with the pin's byte for byte.

    Returns:
        ``{"pins": n, "intact": True, "pins_hash": sha256 over (entry hash, text hash) pairs}``.

    Raises:
        FoldRefused: an entry's hashes no longer match, or a pin's text differs from it.
    """
    pins = sorted(
        (f for f in state.get("facts", {}).values() if f.get("pin")),
        key=lambda f: f["support"][0]["entry"],
    )
    wanted = [f["support"][0]["entry"] for f in pins]
    rows = {
        e.entry_hash: e
        for e in Entry.objects.filter(journal=journal, entry_hash__in=wanted).prefetch_related(
            "chunks"
        )
    }
    pairs = []
    for fact in pins:
        h = fact["support"][0]["entry"]
        entry = rows.get(h)
        if entry is None:
            raise FoldRefused(f"pin {fact['id']}: entry sha256:{h} is not in this journal")
        problems = entry_check(entry)
        if problems:
            raise FoldRefused(
                f"pin {fact['id']}: entry sha256:{h} fails its hash check: {problems[0]}"
            )
        if entry.text != fact["text"]:
            raise FoldRefused(f"pin {fact['id']}: text differs from entry sha256:{h}")
        pairs.append([h, hashlib.sha256(fact["text"].encode("utf-8")).hexdigest()])
    return {
        "pins": len(pins),
        "intact": True,
        "pins_hash": hashlib.sha256(rfc8785.dumps(pairs)).hexdigest(),
    }


def _verdicts(reduction: reducer.Reduction) -> list[dict[str, Any]]:
    return [
        {"index": r.index, "op": r.op, "status": r.status, "reason": r.reason, "fact_id": r.fact_id}
        for r in reduction.results
    ]


def _resolve_writer(writer: str | Writer) -> Writer:
    if isinstance(writer, str):
        if writer not in WRITERS:
            raise LedgerError(f"unknown writer {writer!r} (known: {', '.join(WRITERS)})")
        return WRITERS[writer]()
    return writer


def ledger_fold(
    *, journal: Journal, upto: int | None = None, writer: str | Writer = "mechanical"
) -> FoldResult:
    """Fold the journal's unfolded complete API rounds, up to ``upto`` (default: head).

    The pins are added by code; ``writer`` proposes the other ops; the reducer judges every
    op (DESIGN.md 5.2) and the pins are re-hashed against their entries before anything is
    stored. One fold at a time per branch (the journal row is locked). A fold covering
    exactly the same entries as an existing one returns that fold (idempotency key: scope +
    covered range hash, DESIGN.md section 9).

    Args:
        journal: the scope to fold.
        upto: highest seq the fold may cover; it ends at the last complete round at or
            before it. A trailing interrupted round is left for a later fold.
        writer: ``"mechanical"`` (tool outcomes; outcome ``fallback``) or a
            :class:`ledger_app.writers.Writer`.

    Returns:
        :class:`FoldResult`; ``fold`` is ``None`` with a ``reason`` when nothing is foldable.

    Raises:
        FoldRefused: a required pin missing or altered, or a pin that no longer matches its
            journal entry. Nothing is stored.
        LedgerError: unknown writer name.
    """
    w = _resolve_writer(writer)
    with transaction.atomic():
        journal = (
            Journal.objects.select_for_update().select_related("session__tenant").get(pk=journal.pk)
        )
        previous = latest_fold(journal)
        last_range = latest_fold(journal, Fold.Kind.FOLD)
        start = (last_range.seq_end or 0) + 1 if last_range else 1
        limit = journal.head_seq if upto is None else min(upto, journal.head_seq)
        entries = list(Entry.objects.filter(journal=journal, seq__gte=start).order_by("seq"))
        rounds = [r for r in group_rounds(entries) if r.last_seq <= limit]
        if rounds:
            rounds[-1].at_tail = rounds[-1].last_seq == journal.head_seq
        end = complete_prefix_end(rounds)
        if end is None or end < start:
            return FoldResult(
                None, False, "nothing to fold: no complete API round after the last fold"
            )
        covered = [e for e in entries if e.seq <= end]
        hashes = [e.entry_hash for e in covered]
        key = range_hash(hashes)
        existing = Fold.objects.filter(journal=journal, range_hash=key).first()
        if existing is not None:
            return FoldResult(existing, False, "this range is already folded")
        number = (previous.number + 1) if previous else 1
        views = [entry_view(e) for e in covered]
        prev_state = previous.state_dict if previous else copy.deepcopy(reducer.EMPTY_STATE)
        pin_ops = [{"op": "add", "fact": pin_fact(v)} for v in views if is_pin_source(v)]
        ops = pin_ops + w.propose(views, prev_state)
        delta = {
            "fold": number,
            "revision": journal.head_seq,
            "evidence": _evidence(journal, covered, ops, number, journal.head_seq),
            "required_pins": required_pins(views),
            "ops": ops,
        }
        try:
            reduction = reducer.apply_delta(prev_state, delta)
        except (reducer.PinViolation, reducer.DeltaInvalid) as exc:
            raise FoldRefused(str(exc)) from exc
        state = reduction.state
        instructions = instructions_check(journal, state)
        outcome = Fold.Outcome.FALLBACK if w.id == "mechanical" else Fold.Outcome.ACCEPTED
        interrupted = [c for r in rounds if r.last_seq <= end for c in r.interrupted_call_ids]
        ledger_text = "\n".join(
            render_fact(f) for f in state["facts"].values() if f["lifecycle"] == "active"
        )
        manifest = {
            "covered": {
                "seq_start": start,
                "seq_end": end,
                "entries": len(covered),
                "entry_hashes": hashes,
            },
            "range_hash": key,
            "previous_fold": previous.number if previous else None,
            "revision": journal.head_seq,
            "writer": {"id": w.id, "label": w.label, "prompt_version": w.prompt_version},
            "verifier": {"id": "reducer-rules", "prompt_version": None},
            "tokens": {
                "covered": sum(e.token_count for e in covered),
                "ledger_active": _active_tokens(state),
                "source": source_label(settings.TOKEN_ENCODING),
                "provider": {
                    **_provider_usage(covered),
                    "source": "provider-reported usage in the journal",
                },
            },
            "interrupted_calls": interrupted,
            "outcome": outcome,
            "instructions": instructions,
            "loss": loss_report(views, ledger_text).to_dict(),
        }
        if outcome == Fold.Outcome.FALLBACK:
            manifest["note"] = "mechanical facts only: " + FALLBACK_NOTE
        verdicts = _verdicts(reduction)
        try:
            with transaction.atomic():
                fold = Fold.objects.create(
                    journal=journal,
                    number=number,
                    previous=previous,
                    seq_start=start,
                    seq_end=end,
                    revision=journal.head_seq,
                    range_hash=key,
                    outcome=outcome,
                    writer=w.id,
                    verifier="reducer-rules",
                    manifest=manifest,
                    delta=rfc8785.dumps({**delta, "verdicts": verdicts}).decode("utf-8"),
                    state=reducer.state_bytes(state).decode("utf-8"),
                    state_hash=reducer.state_hash(state),
                    facts_added=sum(
                        1 for r in reduction.results if r.op == "add" and r.status == "accepted"
                    ),
                    ops_rejected=len(reduction.rejected),
                )
        except IntegrityError:
            existing = Fold.objects.filter(journal=journal, range_hash=key).first()
            if existing is None:
                raise
            return FoldResult(existing, False, "this range is already folded")
        for r in reduction.results:
            if r.op == "retire" and r.status == "pending":
                fact = state["facts"][r.fact_id]
                pending = fact["pending_retirement"]
                RetirementRequest.objects.create(
                    journal=journal,
                    fact_id=r.fact_id,
                    fact_text=fact["text"],
                    requested_in=fold,
                    evidence=pending["evidence"],
                    reason=pending.get("reason", ""),
                )
    return FoldResult(fold, True)


def ledger_consolidate(
    *,
    journal: Journal,
    target_tokens: int | None = None,
    start_tokens: int | None = None,
) -> FoldResult:
    """Consolidate the ledger into a checkpoint when it has grown past the start figure.

    DESIGN.md 5.4: consolidation starts at ``LEDGER_CONSOLIDATE_AT_TOKENS`` (67,500) and aims
    for ``LEDGER_CHECKPOINT_TARGET_TOKENS`` (20,000). It evicts P3, then P2 (they stay
    recoverable from the journal) and never a P0 or P1 fact; when those alone exceed the
    target the checkpoint is stored with outcome ``target_unreachable`` and the figures.
    The evictions are an ordinary delta (``evict`` ops) judged by the reducer, stored as a
    ``consolidation`` fold whose state is the checkpoint.

    Returns:
        :class:`FoldResult`; ``fold`` is ``None`` with a reason when no consolidation is due.
    """
    target = settings.LEDGER_CHECKPOINT_TARGET_TOKENS if target_tokens is None else target_tokens
    start = settings.LEDGER_CONSOLIDATE_AT_TOKENS if start_tokens is None else start_tokens
    with transaction.atomic():
        journal = Journal.objects.select_for_update().get(pk=journal.pk)
        previous = latest_fold(journal)
        if previous is None:
            return FoldResult(None, False, "nothing to consolidate: no fold yet")
        plan = plan_consolidation(
            previous.state_dict,
            target_tokens=target,
            start_tokens=start,
            count=lambda t: count_tokens(t, settings.TOKEN_ENCODING),
        )
        if not plan.needed:
            return FoldResult(
                None, False, f"not needed: ledger {plan.before_tokens} tokens, below {start}"
            )
        if not plan.ops:
            # Nothing left to evict: another checkpoint would be the same state (a no-op loop).
            return FoldResult(
                None,
                False,
                f"target unreachable and nothing evictable: P0+P1 hold {plan.kept_p0_p1_tokens} "
                f"tokens, target {target}",
            )
        key = hashlib.sha256(f"consolidation:{previous.state_hash}:{target}".encode()).hexdigest()
        existing = Fold.objects.filter(journal=journal, range_hash=key).first()
        if existing is not None:
            return FoldResult(existing, False, "already consolidated")
        number = previous.number + 1
        delta = {"fold": number, "revision": journal.head_seq, "evidence": {}, "ops": plan.ops}
        reduction = reducer.apply_delta(previous.state_dict, delta)
        state = reduction.state
        outcome = (
            Fold.Outcome.TARGET_UNREACHABLE
            if plan.outcome == "target_unreachable"
            else Fold.Outcome.ACCEPTED
        )
        fold = Fold.objects.create(
            journal=journal,
            number=number,
            kind=Fold.Kind.CONSOLIDATION,
            previous=previous,
            revision=journal.head_seq,
            range_hash=key,
            outcome=outcome,
            writer="consolidation",
            verifier="reducer-rules",
            manifest={
                "consolidation": plan.figures(),
                "outcome": outcome,
                "previous_fold": previous.number,
                "instructions": instructions_check(journal, state),
                "tokens": {
                    "ledger_active": _active_tokens(state),
                    "source": source_label(settings.TOKEN_ENCODING),
                },
            },
            delta=rfc8785.dumps({**delta, "verdicts": _verdicts(reduction)}).decode("utf-8"),
            state=reducer.state_bytes(state).decode("utf-8"),
            state_hash=reducer.state_hash(state),
            ops_rejected=len(reduction.rejected),
        )
    return FoldResult(fold, True)


def can_review(user: Any, journal: Journal) -> bool:
    """True when ``user`` is a reviewer or admin of the journal's tenant (or a superuser)."""
    if getattr(user, "is_superuser", False):
        return True
    return Membership.objects.filter(
        user=user,
        tenant_id=journal.session.tenant_id,
        role__in=[Membership.Role.REVIEWER, Membership.Role.ADMIN],
    ).exists()


def ledger_review(
    *, request: RetirementRequest, reviewer: Any, decision: str, comment: str = ""
) -> Fold:
    """Approve or refuse a pending P0 retirement; applied to the ledger as a ``review`` fold.

    Args:
        request: the pending :class:`RetirementRequest`.
        reviewer: the deciding user (must be a reviewer or admin of the tenant).
        decision: ``"approve"`` (the fact becomes ``retired``) or ``"refuse"`` (it stays active).
        comment: free text, stored with who and when.

    Returns:
        The new review fold.

    Raises:
        ReviewForbidden: the user may not review in this tenant.
        ReviewError: the request is not pending, or ``decision`` is not approve/refuse.
    """
    if decision not in ("approve", "refuse"):
        raise ReviewError(f"decision must be 'approve' or 'refuse', got {decision!r}")
    journal = request.journal
    if not can_review(reviewer, journal):
        raise ReviewForbidden(
            f"{reviewer} is not a reviewer of tenant {journal.session.tenant.slug}"
        )
    with transaction.atomic():
        journal = Journal.objects.select_for_update().get(pk=journal.pk)
        request = RetirementRequest.objects.select_for_update().get(pk=request.pk)
        if request.status != RetirementRequest.Status.PENDING:
            raise ReviewError(f"this retirement was already {request.status}")
        previous = latest_fold(journal)
        now = timezone.now()
        op = {
            "op": "review",
            "id": request.fact_id,
            "decision": decision,
            "reviewer": reviewer.get_username(),
            "comment": comment,
            "at": now.isoformat(),
        }
        delta = {
            "fold": previous.number + 1,
            "revision": journal.head_seq,
            "evidence": {},
            "ops": [op],
        }
        reduction = reducer.apply_delta(previous.state_dict, delta)
        if reduction.rejected:
            raise ReviewError(reduction.rejected[0].reason)
        state = reduction.state
        fold = Fold.objects.create(
            journal=journal,
            number=previous.number + 1,
            kind=Fold.Kind.REVIEW,
            previous=previous,
            revision=journal.head_seq,
            range_hash=hashlib.sha256(f"review:{request.pk}".encode()).hexdigest(),
            outcome=Fold.Outcome.ACCEPTED,
            writer=f"reviewer:{reviewer.get_username()}",
            manifest={"review": {"request": request.pk, "fact_id": request.fact_id, **op}},
            delta=rfc8785.dumps({**delta, "verdicts": _verdicts(reduction)}).decode("utf-8"),
            state=reducer.state_bytes(state).decode("utf-8"),
            state_hash=reducer.state_hash(state),
        )
        request.status = (
            RetirementRequest.Status.APPROVED
            if decision == "approve"
            else RetirementRequest.Status.REFUSED
        )
        request.reviewer = reviewer
        request.comment = comment
        request.decided_at = now
        request.decided_in = fold
        request.save()
    return fold


def fold_deltas(journal: Journal) -> list[dict[str, Any]]:
    """Every stored delta of ``journal`` in fold order, verdicts removed (the reducer recomputes them)."""
    out = []
    for raw in (
        Fold.objects.filter(journal=journal).order_by("number").values_list("delta", flat=True)
    ):
        d = json.loads(raw)
        d.pop("verdicts", None)
        out.append(d)
    return out


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Id of the first fact (in id order) that differs between two states, ``"(folds)"`` for the counter."""
    fa, fb = a.get("facts", {}), b.get("facts", {})
    for fact_id in sorted(fa.keys() | fb.keys()):
        if fa.get(fact_id) != fb.get(fact_id):
            return fact_id
    return None if a == b else "(state fields)"


@dataclass
class LedgerVerifyReport:
    """Result of :func:`ledger_verify`. ``mismatch`` names the fold and first differing fact."""

    folds: int = 0
    mismatch: dict[str, Any] | None = None
    checks: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.mismatch is None


def ledger_verify(*, journal: Journal) -> LedgerVerifyReport:
    """Replay every delta from scratch and compare with what is stored (DESIGN.md 5.2).

    Two comparisons per fold N: ``reduce(None, deltas[:N])`` against fold N's stored state
    (replay from scratch), and ``apply(stored state N-1, delta N)`` against it (checkpoint
    plus later deltas); also each stored ``state_hash`` against its state and each op verdict.

    Returns:
        :class:`LedgerVerifyReport` with the first mismatch (fold, fact id, which comparison).
    """
    report = LedgerVerifyReport()
    replay: dict[str, Any] = dict(reducer.EMPTY_STATE)
    stored_prev: dict[str, Any] = dict(reducer.EMPTY_STATE)
    for fold in Fold.objects.filter(journal=journal).order_by("number"):
        report.folds += 1
        delta = json.loads(fold.delta)
        verdicts = delta.pop("verdicts", [])
        stored = json.loads(fold.state)
        try:
            replayed = reducer.apply_delta(replay, delta)
            from_checkpoint = reducer.apply_delta(stored_prev, delta).state
        except (reducer.PinViolation, reducer.DeltaInvalid) as exc:
            report.mismatch = {
                "fold": fold.number,
                "fact": None,
                "check": "replay",
                "detail": str(exc),
            }
            return report
        replay = replayed.state
        for name, candidate in (
            ("replay from scratch", replay),
            ("checkpoint plus delta", from_checkpoint),
        ):
            if reducer.state_bytes(candidate) != fold.state.encode("utf-8"):
                report.mismatch = {
                    "fold": fold.number,
                    "fact": first_difference(stored, candidate),
                    "check": name,
                    "detail": f"stored state differs from {name}",
                }
                return report
        if reducer.state_hash(stored) != fold.state_hash:
            report.mismatch = {
                "fold": fold.number,
                "fact": None,
                "check": "state_hash",
                "detail": "state_hash does not match the stored state",
            }
            return report
        if _verdicts(replayed) != verdicts:
            report.mismatch = {
                "fold": fold.number,
                "fact": None,
                "check": "verdicts",
                "detail": "stored op verdicts differ from the reducer's",
            }
            return report
        stored_prev = stored
    report.checks = ["replay from scratch", "checkpoint plus delta", "state_hash", "verdicts"]
    return report


def fold_ops_cited(fold: Fold) -> list[str]:
    """Every entry hash cited by the fold's facts (for the UI's support links)."""
    return sorted({h for f in fold.state_dict.get("facts", {}).values() for h in support_hashes(f)})
