"""The compaction steps, each applied only while the request is over its target (docs/design.md 6).

Pure module: no Django, no database. Each step changes how rounds of a
:class:`~ledger_app.context.build_state.Builder` are shown and records a decision (step number,
action, reason, tokens before and after):

* :func:`project`: oversized tool results become their artifact receipts (step 2);
* :func:`shrink`: old, already-consumed results become deterministic excerpts (step 3);
* :func:`leave_out_prefix`: the folded prefix read as metadata only leaves at once (step 4);
* :func:`cut`: every round the last fold covers leaves the verbatim part except the fold's
  own recent window (:func:`fold_cut`), asking the ``fold`` callback once when that is not
  enough; run after :func:`project` and before :func:`shrink`, so that what precedes the
  tail is a function of the fold (step 4);
* :func:`drop`: the oldest complete API rounds covered by the ledger leave the verbatim part,
  asking the ``fold`` callback once when none is covered yet (:func:`ask_fold`, step 4);
* :func:`recover`: the one controlled recovery compaction after a failed validation on a
  budget or an artifact (step 6), with :func:`register` and :func:`restore`.

A whole round leaves or stays, never part of it (parallel calls together).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ledger_app.context.build_state import Builder, Plan
from ledger_app.context.projection import receipt_text, shrink_text
from ledger_app.validation import ARTIFACT_CHECKS, ValidationReport


def project(b: Builder, plans: Iterable[Plan], step: int, target: int) -> None:
    """Step 2: replace verbatim results that have an artifact receipt by the receipt, in
    order, until the request is within ``target`` tokens."""
    for p in plans:
        for part in p.parts:
            if b.total() <= target:
                return
            if part.kind != "result" or part.form != "verbatim" or part.entry is None:
                continue
            receipt = b.receipts.get(part.entry.entry_hash)
            if receipt is None:
                continue
            before = b.total()
            part.text = receipt_text(receipt, part.entry.seq)
            part.form = "receipt"
            part.reference = str(receipt.get("reference", ""))
            b.set_cost(p)
            b.decide(
                step,
                "project",
                f"tool result at seq {part.entry.seq} is oversized: replaced by its artifact receipt {part.reference}",
                before,
                b.total(),
                seqs=[part.entry.seq],
                entry=part.entry.entry_hash,
            )


def shrink(b: Builder, plans: Iterable[Plan], step: int, target: int, consumed_only: bool) -> None:
    """Step 3 (and 6): shrink results to a deterministic excerpt, in order, until within
    ``target``; ``consumed_only``: only results the model has answered after. A round
    already left out of the verbatim part is not shrunk (it takes no room in the request);
    when one comes back (:func:`restore`), its old results are shrunk then, as step 3 would
    have shrunk them (:attr:`Builder.consumed_shrunk`)."""
    if consumed_only:
        b.consumed_shrunk = True
    for p in plans:
        if p.dropped:
            continue
        if not _shrink_plan(b, p, step, target, consumed_only):
            return


def _shrink_plan(b: Builder, p: Plan, step: int, target: int | None, consumed_only: bool) -> bool:
    """Shrink the results of ``p`` (:func:`shrink`); ``False`` once the request is within
    ``target`` (``None``: shrink them all)."""
    for part in p.parts:
        if target is not None and b.total() <= target:
            return False
        if part.kind != "result" or part.form == "shrunk" or part.entry is None:
            continue
        if consumed_only and part.entry.seq >= b.last_assistant:
            continue
        source = part.entry.text
        original = b.meter.text(source)
        new = shrink_text(source, part.entry, original)
        if b.meter.text(new) >= b.meter.text(part.text):
            continue
        before = b.total()
        was = part.form
        part.text, part.form, part.reference = new, "shrunk", ""
        b.set_cost(p)
        why = (
            "an old result the model has already answered"
            if consumed_only
            else "recovery compaction"
        )
        b.decide(
            step,
            "shrink",
            f"tool result at seq {part.entry.seq} ({was}) shrunk to a deterministic excerpt: {why}",
            before,
            b.total(),
            seqs=[part.entry.seq],
            entry=part.entry.entry_hash,
        )
    return True


def ask_fold(b: Builder, upto: int, step: int) -> bool:
    """Ask the fold callback to fold the complete API rounds up to ``upto``; ``True`` when
    the ledger grew (the facts and task state are then re-read). A failing callback is
    recorded and the rounds stay verbatim (case 18)."""
    if b.fold is None:
        b.fold_attempts.append(
            {"upto": upto, "outcome": "no fold callback: the ledger cannot grow here"}
        )
        return False
    try:
        ledger, covered = b.fold(upto)
    except Exception as exc:  # the writer, the verifier or the store failed: keep the rounds
        b.fold_attempts.append(
            {"upto": upto, "outcome": f"fold failed: {type(exc).__name__}: {exc}"}
        )
        b.decide(
            step,
            "fold",
            f"asked the ledger to fold up to seq {upto}; the fold failed ({type(exc).__name__}), so the rounds stay verbatim",
            b.total(),
            b.total(),
        )
        return False
    grew = covered > b.covered_upto
    b.fold_attempts.append(
        {
            "upto": upto,
            "outcome": "folded" if grew else "nothing new folded",
            "covered_upto": covered,
        }
    )
    if grew:
        b.ledger, b.covered_upto = ledger, covered
        b.facts_from(ledger)
    b.decide(
        step,
        "fold",
        f"asked the ledger to fold the complete API rounds up to seq {upto}: it now covers up to seq {covered}",
        b.total(),
        b.total(),
        covered_upto=covered,
    )
    return grew


def _leave_out(b: Builder, p: Plan, step: int, why: str) -> None:
    before = b.total()
    b.set_dropped(p, True)
    b.decide(
        step,
        "fold",
        f"API round seq {p.round.first_seq}-{p.round.last_seq} {why}: left out of the verbatim "
        "part, its facts go in the checkpoint",
        before,
        b.total(),
        seqs=[p.round.first_seq, p.round.last_seq],
    )


def leave_out_prefix(b: Builder, step: int) -> None:
    """Step 4 for the folded prefix: the API rounds the service read as metadata only
    (:attr:`~ledger_app.context.build_state.Plan.metadata`: every one covered by the last
    fold, before its kept window, and together more tokens than the limit, so the request
    could not show them whole) leave the verbatim part at once, as one decision, before any
    other step; no step shows them again (docs/design.md 6, "The folded prefix"). Their
    facts go in the checkpoint as any folded round's. Nothing when there is no such round."""
    prefix = [p for p in b.droppable if p.metadata]
    if not prefix:
        return
    before = b.total()
    tokens = sum(p.cost for p in prefix)
    for p in prefix:
        b.set_dropped(p, True)
    b.cut_due = True  # the request with the prefix was over: the cut runs (cut)
    first, last = prefix[0].round.first_seq, prefix[-1].round.last_seq
    b.decide(
        step,
        "fold",
        f"{len(prefix)} API rounds seq {first}-{last} are covered by the last fold (up to seq "
        f"{b.covered_upto}) and before its kept window: left out of the verbatim part whole "
        f"({tokens} tokens by their entries' stored counts, over the limit {b.limit}); read "
        "as metadata only, their facts go in the checkpoint",
        before,
        b.total(),
        seqs=[first, last],
        rounds=len(prefix),
    )


def fold_cut(b: Builder) -> int:
    """The first seq the last fold keeps verbatim: the rounds it covers, newest first, within
    ``b.tail_tokens`` (at least one), counted at their original cost. A function of the fold
    (its ``covered_upto``) and the budget only, never of where the current tail starts, so
    the request's part before it stays the same until the next fold (docs/design.md 6, README
    "Prompt caching through the proxy"). ``b.covered_upto + 1`` when the fold covers nothing."""
    first = b.covered_upto + 1
    total = 0
    for p, cost in zip(reversed(b.plans), reversed(b.original_costs), strict=True):
        if p.metadata:
            break  # the folded prefix: never in the kept window (read with room to spare)
        if p.round.last_seq > b.covered_upto:
            continue
        if total > 0 and total + cost > b.tail_tokens:
            break
        total += cost
        first = p.round.first_seq
    return first


def cut(b: Builder, step: int, target: int, fold_upto: int) -> None:
    """Step 4 before shrinking: while the request is over ``target``, leave out every
    droppable round before :func:`fold_cut` (all of them, even when fewer would do: the
    checkpoint then names the fold's range, not one that moves with the tail); when that is
    not enough, ask the ``fold`` callback once (up to ``fold_upto``) and cut again. The
    build passes the limit less :func:`~ledger_app.context.final_request.fill_share` as
    ``target``, so a fold leaves room for the P2/P3 facts and for the calls after it. What
    is still over goes to the steps after (:func:`shrink`, :func:`drop`).

    After :func:`leave_out_prefix` the cut runs once whatever the total (``b.cut_due``): the
    request with the prefix shown was over, so the rounds before the fold's kept window leave
    as they do when the whole journal is read."""
    while b.total() > target or b.cut_due:
        b.cut_due = False
        first = fold_cut(b)
        for p in b.droppable[b.n_dropped :]:
            if p.round.last_seq >= first or p.round.last_seq > b.covered_upto:
                break
            _leave_out(
                b,
                p,
                step,
                f"is covered by the last fold and before its kept window (seq {first} on)",
            )
        if b.total() <= target or b.fold_attempts:
            return
        if not ask_fold(b, fold_upto, step):
            return


def register(b: Builder, plans: Sequence[Plan]) -> None:
    """Make tail rounds droppable (recovery): they take the next positions, in order."""
    for p in plans:
        if p.position < 0:
            p.position = len(b.droppable)
            b.droppable.append(p)
            for s in p.round.seqs:
                b.position_of[b.by_seq[s].entry_hash] = p.position
    b.facts_from(b.ledger)


def drop(b: Builder, step: int, target: int, fold_upto: int, may_ask: bool = True) -> None:
    """Leave out the oldest covered droppable rounds: the fewest that bring the request
    within ``target``; when none does, the number that makes it smallest (possibly none:
    a fold whose facts cost more than its rounds is not worth it). ``may_ask``: the fold
    callback may be asked (once) when the covered rounds are not enough."""
    asked = not may_ask
    while True:
        base = b.dropped_count()
        rest = b.droppable[base:]
        covered = 0
        for p in rest:
            if p.round.last_seq > b.covered_upto:
                break
            covered += 1
        body = b.body_cost()
        best_j, best_total, fits = 0, b.total(base), False
        saved = 0
        for j in range(1, covered + 1):
            saved += rest[j - 1].cost
            t = b.planned(base + j, body - saved)
            if t <= target:
                best_j, best_total, fits = j, t, True
                break
            if t < best_total:
                best_j, best_total = j, t
        if not fits and covered < len(rest) and not asked:
            asked = True
            if ask_fold(b, fold_upto, step):
                continue
        break
    if covered < len(rest) and not fits:
        p = rest[covered]
        b.decide(
            step,
            "keep",
            f"API round seq {p.round.first_seq}-{p.round.last_seq} and later are not covered "
            "by any fold: they stay verbatim",
            b.total(),
            b.total(),
        )
    for p in rest[:best_j]:
        _leave_out(b, p, step, "is covered by the ledger")


def restore(b: Builder, step: int, target: int) -> None:
    """After recovery shrank what it could, bring back the newest folded rounds that fit."""
    while b.n_dropped > 0:
        p = b.droppable[b.n_dropped - 1]  # the dropped rounds are the oldest: a prefix
        if p.metadata:
            return  # the folded prefix is never brought back (leave_out_prefix)
        if b.consumed_shrunk:  # as step 3 shrinks a round shown (it skipped this one)
            _shrink_plan(b, p, 3, None, consumed_only=True)
        before = b.total()
        b.set_dropped(p, False)
        if b.total() > target:
            b.set_dropped(p, True)
            return
        b.decide(
            step,
            "restore",
            f"API round seq {p.round.first_seq}-{p.round.last_seq} fits again after the "
            "recovery compaction: shown verbatim",
            before,
            b.total(),
            seqs=[p.round.first_seq, p.round.last_seq],
        )


def recover(b: Builder, report: ValidationReport, limit: int, tail_start: int) -> None:
    """Step 6, the one controlled recovery compaction: a checkpoint with no P0/P1 fact is
    planned at no cost (shown only in room left), a receipt that does not verify falls
    back to the journal's own text (shrunk), receipts everywhere, the tail shrinks to the
    last complete round, every result may be shrunk, then the newest folded rounds that fit
    come back. ``tail_start`` is the first seq of the protected tail."""
    bad = {p.ref for p in report.problems if p.check in ARTIFACT_CHECKS}
    for plan in b.plans:
        for part in plan.parts:
            if part.form == "receipt" and part.reference in bad and part.entry is not None:
                was = b.total()
                part.text = shrink_text(part.entry.text, part.entry, b.meter.text(part.entry.text))
                part.form, part.reference = "shrunk", ""
                b.set_cost(plan)
                b.decide(
                    6,
                    "unproject",
                    f"the receipt of seq {part.entry.seq} does not verify: the journal's own "
                    "text is shown instead, shrunk",
                    was,
                    b.total(),
                )
    if b.total() > limit and (b.n_dropped > 0 or b.droppable):
        was = b.total()
        b.soft_checkpoint = True
        if b.facts.make_soft() and b.total() < was:
            b.decide(
                6,
                "checkpoint",
                "the checkpoint carries no P0/P1 fact and there is no room for its note: it "
                "is shown only if room is left (the folded rounds stay in the journal)",
                was,
                b.total(),
            )
        if b.total() > limit and b.n_dropped < len(b.droppable):
            # a checkpoint planned at no cost makes folding worth it even for rounds whose
            # facts cost more than they do (a tiny request over a tiny budget)
            drop(b, 6, limit, tail_start - 1, may_ask=not b.fold_attempts)
    kept = [p for p in b.plans if not p.dropped]
    project(b, kept, 6, limit)
    body = [p for p in b.plans if not p.dropped]
    last = body[-1] if body else None
    tail_api = [p for p in body if p.protected and p is not last and p.round.kind == "api"]
    if b.total() > limit and tail_api:
        register(b, tail_api)
        drop(b, 6, limit, (last.round.first_seq - 1) if last else tail_start - 1)
    shrink(b, [p for p in b.plans if not p.dropped], 6, limit, consumed_only=False)
    restore(b, 6, limit)
