"""Where a benchmark spends its time: the product's functions in a cProfile, by cumulative
time (``python -m bench --profile``)."""

from __future__ import annotations

import cProfile
import os
import pstats
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: the packages whose functions a profile lists (the product's, and the bench's own)
PROFILED = (
    "journal_app",
    "ledger_app",
    "recovery_app",
    "audit_app",
    "proxy_app",
    "bench",
    "config",
)


def print_profile(profiler: Any, title: str, limit: int = 25, others: int = 8) -> None:
    """Print the ``limit`` functions of :data:`PROFILED` packages with the most cumulative
    time under ``profiler`` (a stopped :class:`cProfile.Profile`), then the ``others``
    functions outside them (Django's templates and ORM, the database driver, the standard
    library) with the most time of their own, seconds, one per line."""
    stats = pstats.Stats(profiler)
    root = str(Path(__file__).resolve().parent.parent)
    ours, theirs = [], []
    for (path, line, name), (_, calls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        rel = os.path.relpath(path, root) if path.startswith(root) else ""
        if rel.split(os.sep)[0] in PROFILED:
            ours.append((cumtime, tottime, calls, f"{rel}:{line}({name})"))
        else:
            short = path.split("site-packages/")[-1] if "site-packages/" in path else path
            theirs.append((tottime, cumtime, calls, f"{short}:{line}({name})"))
    ours.sort(reverse=True)
    theirs.sort(reverse=True)
    print(f"profile of {title}: cumulative s, own s, calls, function")
    for cumtime, tottime, calls, where in ours[:limit]:
        print(f"  {cumtime:8.3f} {tottime:8.3f} {calls:9d}  {where}")
    print("  outside the product, by own time: own s, cumulative s, calls, function")
    for tottime, cumtime, calls, where in theirs[:others]:
        print(f"  {tottime:8.3f} {cumtime:8.3f} {calls:9d}  {where}")


def profiled(fn: Callable[[], Any], title: str, limit: int = 25) -> Any:
    """Run ``fn()`` once under cProfile, print :func:`print_profile` of it, return its value."""
    profiler = cProfile.Profile()
    result = profiler.runcall(fn)
    print_profile(profiler, title, limit)
    return result
