"""The one progress bar of the long commands (journal_app/progress.py)."""

from __future__ import annotations

import io

from journal_app.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_only_a_final_line_is_printed():
    out = io.StringIO()
    with Progress(total=2005, desc="verifying", unit="entries", file=out) as bar:
        for n in range(1, 2006):
            bar(n, 2005)
    assert out.getvalue().startswith("verifying: 2,005 entries in ")
    assert out.getvalue().count("\n") == 1


def test_on_a_terminal_many_updates_do_not_redraw_each_time():
    out = _Terminal()
    with Progress(total=100_000, desc="verifying", unit="entries", file=out) as bar:
        for n in range(1, 100_001):
            bar.update_to(n)
    # one redraw per update was ~80 bytes each (8 MB here); a few redraws a second stay small
    assert len(out.getvalue()) < 4_000
    assert "100000/100000" in out.getvalue()


def test_disabled_or_failed_prints_nothing():
    out = io.StringIO()
    with Progress(total=3, desc="x", unit="entries", file=out, enabled=False) as bar:
        bar(3)
    assert out.getvalue() == ""
    failed = Progress(total=3, desc="x", unit="entries", file=out)
    failed(1)
    failed.close(ok=False)
    assert out.getvalue() == ""


def test_bytes_are_scaled_in_the_final_line():
    out = io.StringIO()
    with Progress(total=0, desc="reading", unit="B", file=out, bytes_=True) as bar:
        bar(2_500_000)
    assert out.getvalue().startswith("reading: 2.50 MB in ")
