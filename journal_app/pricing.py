"""Computed cost of model calls from a price table (pure: no Django).

The table is the ``LEDGER_MODEL_PRICES`` setting (README, "Settings"): a JSON object of model
names to ``[input, output]`` or ``[input, output, cached_input]`` prices in US dollars per
million tokens, e.g. ``{"gpt-5-codex": [1.25, 10.0, 0.125]}``. Integers and floats are both
accepted; a price must be a finite number >= 0.

A call's cost is computed from the token figures the provider reported for it (the entry's
``usage`` metadata), never from our own counts, and is labelled "computed" wherever shown:
it is what the table says the call cost, not an invoice.

Cached input: OpenAI-style usage (``input_tokens``/``prompt_tokens`` with
``cached_input_tokens`` or ``*_tokens_details.cached_tokens``) counts cached tokens *inside*
the input figure, so they are taken out of it and charged at the cached price; Anthropic-style
usage (``cache_read_input_tokens``) counts them *beside* it, so they are added. Without a
cached price, cached tokens are charged at the input price. Anthropic's
``cache_creation_input_tokens`` are charged at the input price.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any, NamedTuple

MILLION = Decimal(1_000_000)


class PriceTableError(ValueError):
    """The price table is not of the documented shape; the message names the bad entry."""


class Price(NamedTuple):
    """USD per million tokens: input, output and (``None``: the input price) cached input."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None


_FIELDS = ("input", "output", "cached input")


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return None
    if isinstance(value, (float, Decimal)) and not math.isfinite(value):
        return None
    if value < 0:
        return None
    return value if isinstance(value, Decimal) else Decimal(str(value))


def _entry(name: Any, value: Any) -> Price:
    if isinstance(value, Price):  # already parsed (settings hold parsed tables)
        value = [v for v in value if v is not None]
    if not isinstance(value, list):
        raise PriceTableError(
            f"model {name!r}: {value!r} is not a list [input, output] or [input, output, "
            "cached input] of USD per million tokens"
        )
    if len(value) < 2:
        raise PriceTableError(
            f"model {name!r}: the {_FIELDS[len(value)]} price is missing (give [input, "
            "output] or [input, output, cached input], USD per million tokens)"
        )
    if len(value) > 3:
        raise PriceTableError(
            f"model {name!r}: {len(value)} prices given, at most 3 (input, output, cached input)"
        )
    numbers = []
    for field, raw in zip(_FIELDS, value, strict=False):
        number = _number(raw)
        if number is None:
            raise PriceTableError(
                f"model {name!r}: the {field} price {raw!r} is not a non-negative number "
                "(USD per million tokens)"
            )
        numbers.append(number)
    return Price(*numbers)


def parse_price_table(table: Any) -> dict[str, Price]:
    """Parse the price table (already decoded from JSON).

    Args:
        table: ``{"model": [input, output]}`` or ``{"model": [input, output, cached]}``,
            USD per million tokens (int or float, >= 0).

    Returns:
        model name -> :class:`Price`.

    Raises:
        PriceTableError: not an object, an empty model name, or an entry that is not a list
            of two or three non-negative numbers. The message is one line naming the model and the field
            (``input``, ``output``, ``cached input``) at fault, e.g. ``model 'gpt-5-codex':
            the output price 'ten' is not a non-negative number (USD per million tokens)``.
    """
    if not isinstance(table, dict):
        raise PriceTableError(
            "must be a JSON object of model names to [input, output(, cached input)] USD per "
            'million tokens, e.g. {"gpt-5-codex": [1.25, 10.0]}'
        )
    for name in table:
        if not str(name).strip():
            raise PriceTableError(
                "a model name is empty: name each model as its source does (an empty name "
                "would price every call whose source names no model)"
            )
    return {str(name): _entry(name, value) for name, value in table.items()}


def _int(usage: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        v = usage.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _cached_inside(usage: Mapping[str, Any]) -> int:
    direct = _int(usage, "cached_input_tokens", "cached_tokens")
    if direct is not None:
        return direct
    for key in ("input_tokens_details", "prompt_tokens_details"):
        details = usage.get(key)
        if isinstance(details, dict):
            n = _int(details, "cached_tokens")
            if n is not None:
                return n
    return 0


def call_cost(price: Price, usage: Mapping[str, Any]) -> Decimal | None:
    """The computed cost in USD of one call from its provider-reported ``usage``.

    Args:
        price: the model's :class:`Price`.
        usage: the provider's usage object as stored (OpenAI, Anthropic or Codex names).

    Returns:
        USD as a :class:`~decimal.Decimal`; ``None`` when the usage has neither an input nor
        an output figure. The rule for cached input is in the module docstring.
    """
    tokens_in = _int(usage, "input_tokens", "prompt_tokens")
    tokens_out = _int(usage, "output_tokens", "completion_tokens")
    if tokens_in is None and tokens_out is None:
        return None
    cached_price = price.cached_input if price.cached_input is not None else price.input
    uncached = tokens_in or 0
    read = _int(usage, "cache_read_input_tokens")
    if read is not None:  # Anthropic: cache reads and writes are beside input_tokens
        cached = read
        uncached += _int(usage, "cache_creation_input_tokens") or 0
    else:
        cached = min(_cached_inside(usage), uncached)
        uncached -= cached
    total = price.input * uncached + cached_price * cached + price.output * (tokens_out or 0)
    return total / MILLION


def entry_cost(prices: Mapping[str, Price], meta: Mapping[str, Any]) -> Decimal | None:
    """The computed cost of the call an entry's metadata reports (``usage`` and the model
    named by :func:`source_model`); ``None`` without usage or without a price for the model."""
    usage = meta.get("usage")
    if not isinstance(usage, dict) or not prices:
        return None
    price = prices.get(source_model(meta))
    return call_cost(price, usage) if price is not None else None


class CostTotal(NamedTuple):
    """A sum of computed costs over calls (entries whose metadata carries provider ``usage``
    with an input or output figure).

    ``usd`` sums the ``priced`` calls; ``unpriced`` counts the calls whose model has no price
    in the table or is not named: a total with unpriced calls is partial and says so
    (:func:`cost_text`).
    """

    usd: Decimal = Decimal(0)
    priced: int = 0
    unpriced: int = 0


def cost_add(total: CostTotal, prices: Mapping[str, Price], meta: Mapping[str, Any]) -> CostTotal:
    """``total`` plus the call an entry's metadata reports (:func:`entry_cost`); an entry that
    is not a call (no usage, or usage without an input or output figure) adds nothing."""
    usage = meta.get("usage")
    if not isinstance(usage, dict) or (
        _int(usage, "input_tokens", "prompt_tokens") is None
        and _int(usage, "output_tokens", "completion_tokens") is None
    ):
        return total
    cost = entry_cost(prices, meta)
    if cost is None:
        return total._replace(unpriced=total.unpriced + 1)
    return total._replace(usd=total.usd + cost, priced=total.priced + 1)


def cost_sum(totals: Iterable[CostTotal]) -> CostTotal:
    """The sum of several totals (a session's journals, a tenant's sessions)."""
    out = CostTotal()
    for t in totals:
        out = CostTotal(out.usd + t.usd, out.priced + t.priced, out.unpriced + t.unpriced)
    return out


def cost_text(total: CostTotal | None, places: int = 2) -> str:
    """A total for people: ``"$1.23"``, ``"$1.23 + 4 unpriced calls"`` (partial),
    ``"4 unpriced calls"`` (nothing priced), ``""`` for ``None`` or no call; ``places``
    decimals (2 on lists, 4 on the timeline)."""
    if total is None or (total.priced == 0 and total.unpriced == 0):
        return ""
    unpriced = f"{total.unpriced} unpriced call{'' if total.unpriced == 1 else 's'}"
    if total.priced == 0:
        return unpriced
    usd = f"${total.usd.quantize(Decimal(1).scaleb(-places)):,}"
    return f"{usd} + {unpriced}" if total.unpriced else usd


#: Where sources name the model of a call in an entry's metadata, first match wins: the top
#: level and Claude Code's ``message``, Codex's ``turn_context``, mini-swe-agent's
#: ``extra.response`` (the provider's answer), OpenHands' ``tool_call_metadata.model_response``
#: and then its ``llm_metrics.accumulated_token_usage``
MODEL_PATHS: tuple[tuple[str, ...], ...] = (
    (),
    ("message",),
    ("turn_context",),
    ("extra", "response"),
    ("tool_call_metadata", "model_response"),
    ("llm_metrics", "accumulated_token_usage"),
)


def source_model(meta: Mapping[str, Any]) -> str:
    """The model the source names for an entry: ``model`` at one of :data:`MODEL_PATHS` in
    its metadata (a non-empty string), or ``""``."""
    for path in MODEL_PATHS:
        holder: Any = meta
        for key in path:
            holder = holder.get(key) if isinstance(holder, dict) else None
        model = holder.get("model") if isinstance(holder, dict) else None
        if isinstance(model, str) and model:
            return model
    return ""


def money(amount: Decimal | None) -> str:
    """USD for people: ``"$0.0123"`` under a dollar (4 places), ``"$12.35"`` above, ``""``
    for ``None``."""
    if amount is None:
        return ""
    places = Decimal("0.0001") if abs(amount) < 1 else Decimal("0.01")
    return f"${amount.quantize(places):,}"
