"""Signals the journal sends; other apps (the ledger) subscribe without journal_app importing them."""

from __future__ import annotations

from django.dispatch import Signal

#: Sent after an append batch commits with at least one new entry.
#: Keyword arguments: ``journal`` (Journal), ``appended`` (int), ``head_seq`` (int).
entries_appended = Signal()
