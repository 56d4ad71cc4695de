"""Query parameters of the journal's pages, read leniently: a value that does not parse
is treated as absent (the page shows its default), never an error page."""

from __future__ import annotations

from django.http import HttpRequest


def page_number(request: HttpRequest) -> str:
    """``?page=`` as given (``"1"`` when absent), for :meth:`Paginator.get_page`, which
    clamps it and takes ``"last"``."""
    return request.GET.get("page") or "1"


def parse_int(value: str | None) -> int | None:
    """``value`` as a whole number; ``None`` when absent, empty or not a number."""
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def parse_range(value: str | None) -> tuple[int, int] | None:
    """``"A-B"`` or ``"A"`` (whole numbers, ``A <= B``) as ``(A, B)``; anything else ``None``."""
    if not value:
        return None
    first, _, last = value.partition("-")
    a, b = parse_int(first.strip()), parse_int((last or first).strip())
    if a is None or b is None or a < 0 or b < a:
        return None
    return a, b
