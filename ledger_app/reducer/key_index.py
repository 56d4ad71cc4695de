"""The command-key index of a facts dict: the active fact of a key without a scan.

Pure module: no Django, no database. Kept per thread, for the facts dict the last delta was
applied to (a replay applies every delta to the same dict).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ledger_app.facts import Fact


class KeyIndex:
    """Command key -> ids of the facts added with it (checked when read: a fact that has
    ended since is skipped), so a replay finds the active fact of a key without a scan."""

    def __init__(self, facts: Mapping[str, Fact]) -> None:
        self.facts = facts
        self.ids: dict[str, list[str]] = {}
        for fid, f in facts.items():
            if f.get("command_key") and f.get("lifecycle", "active") == "active":
                self.ids.setdefault(str(f["command_key"]), []).append(fid)

    def add(self, key: str, fact_id: str) -> None:
        self.ids.setdefault(key, []).append(fact_id)

    def active(self, key: str, but: str) -> list[str]:
        alive = [
            fid
            for fid in self.ids.get(key, ())
            if fid != but
            and (f := self.facts.get(fid)) is not None
            and f.get("command_key") == key
            and f.get("lifecycle", "active") == "active"
            and not f.get("pin")
        ]
        self.ids[key] = alive
        return alive


#: the index of the facts dict the last delta was applied to, and that dict's size after it
#: (a replay applies every delta to the same dict: the index is built once and kept up to
#: date; a dict changed in between by anything else is indexed again)
#: (one slot per thread: a threaded server or worker applies deltas to different states)
_index_local = threading.local()


def index_slot() -> list[Any]:
    """This thread's ``[facts dict, its KeyIndex, its size after the last delta]``."""
    slot = getattr(_index_local, "slot", None)
    if slot is None:
        slot = _index_local.slot = [None, None, -1]
    return slot


def index_of(facts: dict[str, Fact]) -> KeyIndex:
    """The :class:`KeyIndex` of ``facts``: the kept one when ``facts`` is the dict the last
    delta was applied to and unchanged since, else a new one."""
    slot = index_slot()
    if slot[0] is not facts or slot[2] != len(facts):
        slot[0], slot[1] = facts, KeyIndex(facts)
    index: KeyIndex = slot[1]
    return index
