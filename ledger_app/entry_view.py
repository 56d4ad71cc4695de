"""The ledger's view of one journal entry: what every writer, the context builder and the
loss report read of it (built from a row by ``ledger_app.services.entries``). Pure.

:class:`EntryView` holds the entry's readable parts; :func:`command_of` reads a call's shell
command and :func:`cite` makes the support item that cites the entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from journal_app.chunking import DEFAULT_CHUNK_BYTES
from journal_app.identifiers import Identifier, shell_command
from ledger_app.outcomes import support_item


@dataclass
class EntryView:
    """What the ledger reads of one entry (built from a row by the service)."""

    seq: int
    entry_hash: str
    kind: str
    role: str
    text: str
    content: dict[str, Any]
    tool_call_id: str = ""
    tool_name: str = ""
    derived: bool = False
    is_error: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    #: the journal's chunk size in bytes (support items name the chunks of their quote)
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    #: the entry's stored identifiers (:class:`journal_app.models.EntryIdentifiers`, the
    #: same :func:`journal_app.identifiers.identifiers_of` reading), when the service read
    #: them; ``None``: :func:`ledger_app.mechanical.mentions` extracts them itself (once per entry)
    identifiers: tuple[Identifier, ...] | None = None


def command_of(call: EntryView) -> str:
    """The shell command of a call, if its arguments hold one (``command``/``cmd``/``script``),
    else ``""``: :func:`journal_app.identifiers.shell_command`, the one reading (the journal
    sits below the ledger, so the rule lives there and this names it for the ledger)."""
    return shell_command(call.content)


def cite(view: EntryView, quote: str = "") -> dict[str, Any]:
    """A support item citing ``view``, with the byte range and chunks of ``quote`` when the
    quote is exact text of the entry (:func:`ledger_app.outcomes.support_item`)."""
    return support_item(
        entry_hash=view.entry_hash, content=view.content, quote=quote, chunk_bytes=view.chunk_bytes
    )
