"""The ledger's view of one journal entry: what every writer, the context builder and the
loss report read of it (built from a row by ``ledger_app.services.entries``). Pure.

:class:`EntryView` holds the entry's readable parts; :func:`command_of` reads a call's shell
command and :func:`cite` makes the support item that cites the entry.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from journal_app.chunking import DEFAULT_CHUNK_BYTES
from journal_app.content import content_text
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


class RowView(EntryView):
    """An :class:`EntryView` made from a stored row that parses what a build seldom reads
    when it is first read, not when the view is made: the ``meta`` JSON (most builds read
    the meta of messages and calls only) and, for a ``tool_call``, its ``text``
    (``name(arguments)``, :func:`journal_app.content.content_text`; the request carries a
    call's arguments through :func:`ledger_app.context.entry_text.args_text`). Parsing
    every meta and rendering every call as JSON were a third of a 20,000-entry build.

    Its fields hold what the eager view's hold once read, and it equals an
    :class:`EntryView` with the same fields. Made by :meth:`of_row`."""

    _text: str | None = None
    _meta: dict[str, Any] | None = None
    _meta_raw: str = "{}"

    @classmethod
    def of_row(
        cls,
        *,
        seq: int,
        entry_hash: str,
        kind: str,
        role: str,
        content: dict[str, Any],
        meta: str,
        text: str | None = None,
        **fields: Any,
    ) -> RowView:
        """A view of a row: ``meta`` the stored JSON text (parsed when read), ``text``
        ``None`` to render it from ``content`` when read; other fields as
        :class:`EntryView`'s."""
        view = cls(
            seq=seq, entry_hash=entry_hash, kind=kind, role=role, text=text,  # type: ignore[arg-type]
            content=content, **fields,
        )  # fmt: skip
        view._meta_raw, view._meta = meta, None
        return view

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EntryView):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(EntryView))

    __hash__ = None  # type: ignore[assignment]  # as EntryView's (a mutable dataclass)

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = content_text(self.kind, self.content)
        return self._text

    @text.setter
    def text(self, value: str | None) -> None:
        self._text = value

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = json.loads(self._meta_raw) if self._meta_raw != "{}" else {}
        return self._meta

    @meta.setter
    def meta(self, value: dict[str, Any]) -> None:
        self._meta = value


class MetadataView(RowView):
    """An :class:`EntryView` of a row read without its body: the columns a build reads of
    an entry of the folded prefix (seq, hash, kind, role, call id, tool name, flags, meta,
    stored token count), its ``content`` (and ``text``) loaded by ``load(seq)`` only if
    some reader asks for it (one query each: a build that reads as it should asks for none).

    :attr:`metadata_only` stays ``True`` for the view's life, loaded or not: the service
    that made it read in full every entry of the prefix that a scan of the build needs
    (docs/design.md 6, "The folded prefix"), so a scan skips such a view whatever was loaded
    since, and the build does not depend on the order readers ran in. Made by :meth:`of_meta`.
    """

    # every attribute in a slot: no per-view dict to make and free (100,000 views a build)
    __slots__ = (
        "seq", "entry_hash", "kind", "role", "tool_call_id", "tool_name", "derived", "is_error",
        "chunk_bytes", "identifiers", "_text", "_meta", "_meta_raw", "_content", "_load",
    )  # fmt: skip
    _content: dict[str, Any] | None
    _load: Any
    metadata_only = True

    @classmethod
    def of_meta(
        cls,
        *,
        seq: int,
        entry_hash: str,
        kind: str,
        role: str,
        tool_call_id: str,
        tool_name: str,
        derived: bool,
        is_error: bool,
        meta: str,
        chunk_bytes: int,
        load: Any,
    ) -> MetadataView:
        """A view of a row read without its body: ``load(seq) -> content`` reads it when
        asked (``text`` is rendered from it when read); ``meta`` the stored JSON text; other
        fields as :class:`EntryView`'s."""
        return cls.of_row_meta(
            (seq, entry_hash, kind, role, tool_call_id, tool_name, derived, is_error, meta),
            chunk_bytes,
            load,
        )

    @classmethod
    def of_row_meta(cls, row: Sequence[Any], chunk_bytes: int, load: Any) -> MetadataView:
        """:meth:`of_meta` from a row ``(seq, entry_hash, kind, role, tool_call_id,
        tool_name, derived, is_error, meta, ...)`` (further columns ignored), made without
        the dataclass ``__init__`` (its property setters were most of the cost of 100,000
        views)."""
        view = object.__new__(cls)
        (
            view.seq, view.entry_hash, view.kind, view.role, view.tool_call_id, view.tool_name,
            derived, is_error, view._meta_raw,
        ) = row[:9]  # fmt: skip
        view.derived, view.is_error = bool(derived), bool(is_error)
        view.chunk_bytes, view._load = chunk_bytes, load
        view.identifiers = view._text = view._meta = view._content = None
        return view

    @property
    def content(self) -> dict[str, Any]:
        if self._content is None:
            self._content = self._load(self.seq) if self._load is not None else {}
        return self._content

    @content.setter
    def content(self, value: dict[str, Any] | None) -> None:
        self._content = value


def metadata_only(view: EntryView) -> bool:
    """Whether ``view`` was read as metadata only (:class:`MetadataView`): a scan that reads
    entries' content skips it (the service read in full every entry such a scan needs)."""
    return getattr(view, "metadata_only", False)


def meta_get(view: EntryView, key: str) -> Any:
    """``view.meta.get(key)`` (``None`` when absent or the meta is not an object), without
    parsing a :class:`RowView`'s stored meta when its text cannot hold ``key``: a JSON
    object's key appears in its text quoted, or behind a ``\\u`` escape. A scan of every
    entry for one key (:func:`ledger_app.context.calibration.provider_usage`) then parses
    only the metas that may hold it."""
    if isinstance(view, RowView) and view._meta is None:
        raw = view._meta_raw
        if f'"{key}"' not in raw and "\\u" not in raw:
            return None
    meta = view.meta
    return meta.get(key) if isinstance(meta, dict) else None
