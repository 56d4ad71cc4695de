"""Token budgets and consolidation of the ledger (docs/design.md section 5.4). Pure.

Deltas accumulate; once the rendered ledger reaches ``start_tokens`` it is consolidated
towards ``target_tokens`` by evicting facts that stay recoverable from the journal.
The target is only a target: every active or uncertain P0 and P1 fact is kept whatever
its size, and when those alone exceed the target the plan says ``target_unreachable``
with the figures instead of evicting an instruction to make the number.

The plan is a list of reducer ``evict`` ops (:mod:`ledger_app.reducer`), so consolidation
is one more delta and the ledger stays computed, never edited in place (section 5.2).
All figures are tokens as counted by ``count`` (default: :func:`journal_app.tokens.count_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from journal_app.tokens import count_tokens
from ledger_app.facts import Fact, support_hashes
from ledger_app.pins import open_requests_split, pin_shown_text, request_line

OUTCOMES = ("not_needed", "accepted", "target_unreachable")
#: Priorities consolidation never evicts (5.4: "keeps every active or uncertain P0 and P1").
KEPT_PRIORITIES = ("P0", "P1")
#: Hex digits of each support hash shown when a fact is rendered for a model.
SUPPORT_PREFIX = 12

Counter = Callable[[str], int]


def render_fact(fact: Fact) -> str:
    """How a fact is shown to a model (and counted): one record per fact.

    ``[{id}] {priority} {category} {lifecycle} {confidence}: {text} (support: sha256:<12 hex>, ...)``

    The text is rendered unchanged (a pin's text stays verbatim, docs/design.md 5.2), so a
    multi-line text spans several lines. A fact with no support says ``(support: none)``.
    Shared with the context builder (section 6) so that counted and sent bytes agree.
    """
    hashes = ", ".join(f"sha256:{h[:SUPPORT_PREFIX]}" for h in support_hashes(fact)) or "none"
    return (
        f"[{fact.get('id', '')}] {fact.get('priority', '')} {fact.get('category', '')} "
        f"{fact.get('lifecycle', 'active')} {fact.get('confidence', '')}: "
        f"{fact.get('text', '')} (support: {hashes})"
    )


def fact_tokens(fact: Fact, count: Counter = count_tokens) -> int:
    """Tokens of :func:`render_fact` of ``fact`` as counted by ``count(text) -> int``."""
    return count(render_fact(fact))


def ledger_tokens(state: Mapping[str, Any], count: Counter = count_tokens) -> int:
    """Tokens of every fact of ``state`` (``{"facts": {id: fact}, ...}``), summed per fact."""
    return sum(fact_tokens(f, count) for f in state.get("facts", {}).values())


@dataclass
class ConsolidationPlan:
    """What consolidating a ledger state would do (docs/design.md 5.4).

    Attributes:
        needed: the ledger had reached ``start_tokens``.
        outcome: ``"not_needed"`` (below the start; no ops), ``"accepted"`` (at or under the
            target after ``ops``) or ``"target_unreachable"`` (P0+P1 alone exceed the target:
            every P2/P3 fact is evicted, every P0/P1 fact kept).
        before_tokens / after_tokens: ledger size before and after ``ops``.
        target_tokens / start_tokens: the budgets the plan was made for.
        kept_p0_p1_tokens: tokens of the P0 and P1 facts, which are never evicted.
        ops: ``[{"op": "evict", "id": ..., "reason": ...}]`` in eviction order, ready to be
            the ``ops`` of a reducer delta.
        evicted: the evicted fact ids, in the same order.
    """

    needed: bool
    outcome: str
    before_tokens: int
    after_tokens: int
    target_tokens: int
    start_tokens: int
    kept_p0_p1_tokens: int
    ops: list[dict[str, Any]] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        """The numbers to store in a fold manifest (JSON-ready; ids are in the delta's ops)."""
        return {
            "outcome": self.outcome,
            "needed": self.needed,
            "before_tokens": self.before_tokens,
            "after_tokens": self.after_tokens,
            "target_tokens": self.target_tokens,
            "start_tokens": self.start_tokens,
            "kept_p0_p1_tokens": self.kept_p0_p1_tokens,
            "evicted_count": len(self.evicted),
            "evicted_tokens": self.before_tokens - self.after_tokens,
        }


def _carried_tokens(fact: Fact, count: Counter) -> int:
    """Tokens a checkpoint carries of ``fact``: a pin that has ended (a closed request, a
    retired instruction) is one line there (docs/design.md 5.2), its text staying in the ledger;
    any other fact is rendered whole."""
    if fact.get("pin") and fact.get("lifecycle", "active") != "active":
        first = next((ln for ln in str(fact.get("text", "")).splitlines() if ln.strip()), "")
        return count(render_fact({**fact, "text": first[:200]}))
    return fact_tokens(fact, count)


def _eviction_class(fact: Fact) -> int | None:
    """0 inactive P2/P3, 1 active P3, 2 active P2; ``None`` = never evicted."""
    if fact.get("priority") in KEPT_PRIORITIES:
        # Active or uncertain P0/P1 must stay (5.4). Inactive P0/P1 stay too: a retired
        # instruction carries its review record, and the rule names only P3 and P2 as
        # what consolidation drops.
        return None
    if fact.get("lifecycle", "active") != "active":
        return 0
    if fact.get("priority") == "P3":
        return 1
    if fact.get("priority") == "P2":
        return 2
    return None  # unknown priority: keep rather than guess


_CLASS_LABEL = ("no longer active", "active P3", "active P2")


def plan_consolidation(
    state: Mapping[str, Any],
    *,
    target_tokens: int,
    start_tokens: int,
    count: Counter = count_tokens,
) -> ConsolidationPlan:
    """Plan the consolidation of ``state`` (docs/design.md 5.4, seed "What survives").

    Order of eviction: facts no longer active (closed, retired, superseded, cancelled) of
    P2/P3, then active P3, then active P2; within each class oldest first (``origin_fold``
    ascending, then ``id``). Eviction stops as soon as the ledger is at or under
    ``target_tokens``. P0 and P1 facts are never evicted. If they alone exceed the target
    the outcome is ``"target_unreachable"``: every P2/P3 fact is still evicted and every
    P0/P1 fact kept. A pin that has ended (a closed request, a retired instruction) counts
    as the one line a checkpoint shows of it (docs/design.md 5.2).

    Args:
        state: a reducer state ``{"facts": {id: fact}, "folds": n}``; not modified.
        target_tokens: checkpoint target, tokens (production passes
            ``settings.LEDGER_CHECKPOINT_TARGET_TOKENS``: the figures live in settings only).
        start_tokens: consolidation runs only when the ledger has at least this many tokens
            (``settings.LEDGER_CONSOLIDATE_AT_TOKENS``).
        count: ``count(text) -> int`` token counter applied to :func:`render_fact`.

    Returns:
        :class:`ConsolidationPlan`; deterministic for a given state (dict order is irrelevant).
        Its ops are all accepted by :func:`ledger_app.reducer.apply_delta`.
    """
    facts: Mapping[str, Fact] = state.get("facts", {})
    sizes = {fid: _carried_tokens(f, count) for fid, f in facts.items()}
    before = sum(sizes.values())
    kept = sum(sizes[fid] for fid, f in facts.items() if _eviction_class(f) is None)
    plan = ConsolidationPlan(
        needed=before >= start_tokens,
        outcome="not_needed",
        before_tokens=before,
        after_tokens=before,
        target_tokens=target_tokens,
        start_tokens=start_tokens,
        kept_p0_p1_tokens=kept,
    )
    if not plan.needed:
        return plan

    unreachable = kept > target_tokens
    candidates = sorted(
        (
            (cls, int(f.get("origin_fold", 0)), str(fid))
            for fid, f in facts.items()
            if (cls := _eviction_class(f)) is not None
        ),
    )
    total = before
    for cls, _fold, fid in candidates:
        if not unreachable and total <= target_tokens:
            break
        fact = facts[fid]
        if unreachable:
            why = (
                f"target unreachable: P0+P1 facts keep {kept} tokens > target "
                f"{target_tokens}; every P2/P3 fact is evicted"
            )
        else:
            why = f"ledger {total} tokens > target {target_tokens}"
        label = _CLASS_LABEL[cls]
        if cls == 0:
            label = f"{fact.get('lifecycle')} {fact.get('priority')}"
        plan.ops.append(
            {
                "op": "evict",
                "id": fid,
                "reason": f"consolidation (docs/design.md 5.4): {label} fact, oldest first; {why}; "
                "recoverable from the journal",
            }
        )
        plan.evicted.append(fid)
        total -= sizes[fid]
    plan.after_tokens = total
    plan.outcome = "target_unreachable" if unreachable else "accepted"
    return plan


@dataclass
class MandatoryState:
    """What a context must carry of a ledger state, in tokens (docs/design.md 5.4, 5.5 and 6).

    Attributes:
        governing_tokens: active governing pins (system and developer text, a user's rules and
            objective), rendered as the context shows them (:func:`ledger_app.pins.pin_shown_text`:
            attachments as receipts).
        request_tokens: active (still open) request pins: the latest verbatim, older ones a
            line each, the oldest a count (:func:`ledger_app.pins.open_requests_split`).
        p1_tokens: active P1 facts that are not pins.
        facts: how many facts the three figures count.
    """

    governing_tokens: int = 0
    request_tokens: int = 0
    p1_tokens: int = 0
    facts: int = 0

    @property
    def total(self) -> int:
        """``governing_tokens + request_tokens + p1_tokens``."""
        return self.governing_tokens + self.request_tokens + self.p1_tokens


def mandatory_state(state: Mapping[str, Any], count: Counter = count_tokens) -> MandatoryState:
    """The mandatory state of ``state``: P0 shown verbatim plus active P1 (docs/design.md 5.5).

    Closed, superseded, retired and cancelled facts are not mandatory (a closed request is
    one history line, shown when there is room); a pin without ``pin_kind`` counts as
    governing (pins folded before requests were told apart).

    Args:
        state: a reducer state ``{"facts": {id: fact}, ...}``; not modified.
        count: ``count(text) -> int``, tokens.

    Returns:
        :class:`MandatoryState`.
    """
    out = MandatoryState()
    facts = state.get("facts", {}).values()
    verbatim, listed, counted = open_requests_split([f for f in facts if f.get("pin")])
    for fact in verbatim:
        out.request_tokens += count(render_fact({**fact, "text": pin_shown_text(fact)}))
    out.request_tokens += sum(count(request_line(f)) for f in listed)
    out.request_tokens += count(f"+{len(counted)} older open requests") if counted else 0
    out.facts += len(verbatim) + len(listed) + len(counted)
    for fact in facts:
        if fact.get("lifecycle", "active") != "active":
            continue
        if fact.get("pin"):
            if fact.get("pin_kind") == "request":
                continue
            out.governing_tokens += count(render_fact({**fact, "text": pin_shown_text(fact)}))
        elif fact.get("priority") == "P1":
            out.p1_tokens += count(render_fact(fact))
        else:
            continue
        out.facts += 1
    return out
