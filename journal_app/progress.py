"""One progress bar for every long command (README, "Command line"): pure, tqdm only.

On a terminal the bar redraws at most :data:`REDRAWS_PER_SECOND` times a second whatever
the number of updates (tqdm's ``mininterval``; ``refresh()`` per update redrew once per
entry). Not on a terminal (a pipe, a log file, CI), nothing is drawn and one final line
says what was done: ``verifying: 2,005 entries in 1.3 s``.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import IO

from tqdm import tqdm

REDRAWS_PER_SECOND = 4


class Progress:
    """A progress bar over ``total`` units (0: unknown); a context manager.

    Args:
        total: units to do (entries, bytes); ``0`` when unknown.
        desc: what is being done ("verifying").
        unit: the unit's name ("entry", "B").
        file: where to draw (the command's stderr).
        enabled: ``False`` draws nothing and prints nothing (``--no-progress``, verbosity 0).
        bytes_: the unit is bytes: sizes scaled (kB, MB) on the bar and the final line.
    """

    def __init__(
        self,
        *,
        total: int,
        desc: str,
        unit: str,
        file: IO[str],
        enabled: bool = True,
        bytes_: bool = False,
    ) -> None:
        self.total = total
        self.desc = desc
        self.unit = unit
        self.file = file
        self.enabled = enabled
        self.bytes = bytes_
        self.done = 0
        self.started = time.monotonic()
        tty = enabled and bool(getattr(file, "isatty", lambda: False)())
        self.bar: tqdm | None = (
            tqdm(
                total=total or None,
                desc=desc,
                unit=unit,
                unit_scale=bytes_,
                unit_divisor=1000,
                file=file,
                mininterval=1 / REDRAWS_PER_SECOND,
                dynamic_ncols=True,
            )
            if tty
            else None
        )

    def update_to(self, done: int, total: int | None = None) -> None:
        """Set the units done so far (a callback ``progress(done, total)`` can point here)."""
        if total and total != self.total:
            self.total = total
            if self.bar is not None:
                self.bar.total = total
        if self.bar is not None and done > self.done:
            self.bar.update(done - self.done)  # redraws only past mininterval
        self.done = max(self.done, done)

    def __call__(self, done: int, total: int | None = None) -> None:
        self.update_to(done, total)

    def close(self, *, ok: bool = True) -> None:
        """End the bar; off a terminal, print the one final line."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
            return
        if not self.enabled or not ok:
            return
        seconds = time.monotonic() - self.started
        amount = _size(self.done) if self.bytes else f"{self.done:,} {self.unit}"
        self.file.write(f"{self.desc}: {amount} in {seconds:.1f} s\n")

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(ok=exc_type is None)


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"
