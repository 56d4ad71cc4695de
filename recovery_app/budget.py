"""The hard budget of one recovery attempt (docs/design.md section 7, "Budget"). Pure.

At most **3 rounds, 4 searches, 8 reads, 4 sources, about 8,000 tokens of retrieved text
and 30 seconds** (each configurable: ``settings.RECOVERY_MAX_ROUNDS``, ``_SEARCHES``,
``_READS``, ``_SOURCES``, ``_TOKENS``, ``_SECONDS``). Whichever runs out first ends the
attempt with outcome ``budget_exhausted``: the meter raises :class:`BudgetExhausted` naming
the limit when the attempt asks for one more than the limit allows. Evidence verified
before that point is kept (the receipt lists it and it still goes to the verifier).

"About 8,000 tokens": a read is charged its whole token count; the read that would take the
total past the limit is not admitted, so retrieved text never exceeds the limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LIMITS = ("rounds", "searches", "reads", "sources", "tokens", "seconds")


class BudgetExhausted(Exception):
    """A limit of the attempt's budget ran out. ``limit`` is one of :data:`LIMITS`."""

    def __init__(self, limit: str, detail: str) -> None:
        self.limit = limit
        super().__init__(f"budget exhausted: {limit} ({detail})")


@dataclass(frozen=True)
class Budget:
    """Limits of one attempt: rounds, searches, reads, distinct sources, tokens read and
    seconds. No defaults here: the figures live in settings (``RECOVERY_MAX_*``, read by
    :func:`recovery_app.services.recovery_budget`)."""

    rounds: int
    searches: int
    reads: int
    sources: int
    tokens: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in LIMITS}


@dataclass
class BudgetMeter:
    """Counts what an attempt used; ``clock`` returns seconds (monotonic by default)."""

    budget: Budget
    clock: Callable[[], float] = time.monotonic
    rounds: int = 0
    searches: int = 0
    reads: int = 0
    tokens: int = 0
    sources: list[str] = field(default_factory=list)
    started: float | None = None

    def __post_init__(self) -> None:
        if self.started is None:
            self.started = self.clock()

    @property
    def elapsed(self) -> float:
        """Seconds since the attempt started."""
        assert self.started is not None
        return self.clock() - self.started

    def check_time(self) -> None:
        """Raise :class:`BudgetExhausted` (``seconds``) when the time is up."""
        if self.elapsed >= self.budget.seconds:
            raise BudgetExhausted("seconds", f"{self.elapsed:.1f} s of {self.budget.seconds:g} s")

    def _take(self, name: str) -> None:
        self.check_time()
        used = getattr(self, name)
        limit = getattr(self.budget, name)
        if used >= limit:
            raise BudgetExhausted(name, f"{used} of {limit} used, one more was needed")
        setattr(self, name, used + 1)

    def start_round(self) -> None:
        """Charge one round (plan, search, read)."""
        self._take("rounds")

    def charge_search(self) -> None:
        """Charge one search request."""
        self._take("searches")

    def charge_read(self) -> None:
        """Charge one read request (before the entry is fetched)."""
        self._take("reads")

    def admit_tokens(self, tokens: int) -> None:
        """Admit ``tokens`` of retrieved text, or raise (``tokens``) if they would pass the limit."""
        if self.tokens + tokens > self.budget.tokens:
            raise BudgetExhausted(
                "tokens",
                f"{self.tokens} of {self.budget.tokens} used, a read of {tokens} would pass it",
            )
        self.tokens += tokens

    def add_source(self, entry_hash: str) -> bool:
        """Count a distinct source; ``False`` if already counted. Raises (``sources``) past the limit."""
        if entry_hash in self.sources:
            return False
        self.check_time()
        if len(self.sources) >= self.budget.sources:
            raise BudgetExhausted(
                "sources", f"{len(self.sources)} of {self.budget.sources} used, one more was found"
            )
        self.sources.append(entry_hash)
        return True

    def usage(self) -> dict[str, Any]:
        """What was used, by limit (seconds rounded to milliseconds)."""
        return {
            "rounds": self.rounds,
            "searches": self.searches,
            "reads": self.reads,
            "sources": len(self.sources),
            "tokens": self.tokens,
            "seconds": round(self.elapsed, 3),
        }
