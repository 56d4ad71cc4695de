"""A request's parts and the evidence that closes them; the kinds of a fold's pins. Pure.

For the offline writer (:class:`ledger_app.offline.OfflineWriter`) and the model writer's
judges (:mod:`ledger_app.model_writer.judges`): a request closes only when each part has
completion evidence (docs/design.md 5.5). :class:`PartProgress` follows one part of a plain
instruction; :class:`RequestParts` makes each item of a numbered list a ``part:`` obligation
of its own and closes it on evidence; :func:`pin_kinds` says which pins are requests (only a
request closes, docs/design.md 5.2). The words a turn is read with are in
:mod:`ledger_app.offline.turns`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger_app.entry_view import EntryView, cite
from ledger_app.fact_text import redact
from ledger_app.facts import Fact
from ledger_app.offline.heuristics import sentences
from ledger_app.offline.turns import (
    CHECK_STEP,
    TEST_PATH,
    call_text,
    completes,
    numbered_items,
    part_kind,
    problem_list,
)
from ledger_app.pin_facts import pin_facts


@dataclass
class PartProgress:
    """One step of a request and the evidence that carries it out (docs/design.md 5.5).

    ``kind`` is :func:`part_kind`'s; ``named`` holds the successful change that names a
    ``fix`` or ``write_test`` step (its first half); ``evidence`` the results that carry the
    step out, once they all ran (``None`` before). A failed check after a step carried out
    by a check undoes it (the evidence went stale); a failed change naming a step undoes it.
    """

    text: str
    kind: str
    named: list[EntryView] = field(default_factory=list)
    evidence: list[EntryView] | None = None

    @property
    def done(self) -> bool:
        return self.evidence is not None

    def see(self, call: EntryView, result: EntryView, *, ok: bool, check: bool) -> bool:
        """Read one call and its result (reads excluded by the caller); ``True`` when this
        result carried the step out (it was not done before)."""
        said = call_text(call)
        if not ok:
            if check and self.kind != "do":
                self.evidence = None
            elif not check and completes(self.text, said, result.text):
                self.evidence, self.named = None, []
            return False
        if self.done:
            return False
        if self.kind == "check":
            if check:
                self.evidence = [result]
        elif self.kind == "do":
            # a passing check carries out a step that names one ("build the images"), a
            # change one that it names
            if CHECK_STEP.search(self.text) if check else completes(self.text, said, result.text):
                self.evidence = [result]
        elif check:
            if self.named:
                self.evidence = [*self.named, result]
        elif (
            TEST_PATH.search(said)
            if self.kind == "write_test"
            else completes(self.text, said, result.text)
        ):
            self.named = [result]
        return self.done


#: Fact id prefix of a request part (one open obligation per item of a numbered list)
PART = "part:"
#: "Problem 1 is fixed", "item 2 done", "Fixed problem 3", "#4 is resolved"
_PART_DONE = re.compile(
    r"(?:\b(?:problem|item|issue|bug|point|task|number|no\.)\s*#?|#)(\d{1,2})\b[^.;\n]{0,80}?"
    r"\b(?:is |are |now |has been |was )*(?:fixed|done|resolved|completed?|addressed|solved)\b|"
    r"\b(?:fixed|resolved|completed|solved|addressed)\s+(?:problem|item|issue|bug|#)\s*#?(\d{1,2})\b",
    re.I,
)
#: A sentence saying a part is not done ("diagnosed ... not fixed yet")
_NOT_DONE = re.compile(r"\b(?:not|n't|yet|partially|still|diagnosed|fails?|failing)\b", re.I)


def _hashes_by_seq(views: list[EntryView]) -> list[str]:
    return list(dict.fromkeys(v.entry_hash for v in sorted(views, key=lambda v: v.seq)))


@dataclass
class _OpenPart:
    progress: PartProgress
    request: str
    index: int
    total: int


class RequestParts:
    """The request parts of one fold: a user's numbered list of problems becomes one P1
    ``open_obligation`` per item ("request part"), each closed on its own evidence
    (:class:`PartProgress`), and the request's pin closes when every part has (docs/design.md 5.5).

    Args:
        state: the writer state before the fold: its active pins and **every** active
            ``part:`` fact (they go on being matched; a request whose parts are none of
            them open any more is done); closed ``part:`` facts, when present, lend their
            evidence to the request's close.
        pin_kind: the kind of the pin of a message of this fold (``"request"`` or
            ``"governing"``); a pin in ``state`` without ``pin_kind`` counts as governing.
    """

    def __init__(self, state: Mapping[str, Any], pin_kind: Callable[[EntryView], str]) -> None:
        self.facts: Mapping[str, Fact] = state.get("facts", {})
        self.pin_kind = pin_kind
        self.open: dict[str, _OpenPart] = {}
        #: part id -> evidence hashes of the parts already closed
        self.closed: dict[str, list[str]] = {}
        #: request pin id -> its kind, for the pins of this fold
        self.kinds: dict[str, str] = {}
        for fid, f in self.facts.items():
            if not fid.startswith(PART) or f.get("category") != "open_obligation":
                continue
            if f.get("lifecycle") == "active":
                self.open[fid] = _OpenPart(
                    PartProgress(str(f.get("part_text", "")), str(f.get("part_kind", "fix"))),
                    str(f.get("request", "")),
                    int(f.get("part", 0)),
                    int(f.get("parts_total", 0)),
                )
            elif f.get("lifecycle") == "closed":
                self.closed[fid] = list((f.get("ended_by") or {}).get("evidence", []))
        #: the latest successful change, and a passing check after it, not yet bound to a
        #: part (an assistant message naming the part binds them: :meth:`said`)
        self.change: EntryView | None = None
        self.run: EntryView | None = None

    def open_request(self, message: EntryView) -> list[dict[str, Any]]:
        """``add`` ops of one obligation per item when ``message`` holds a numbered list
        (:func:`numbered_items`) and is a request, or says the items are problems to fix
        (:func:`problem_list`; the session's first message is governing, its list of
        problems still work to do), else ``[]``. Part ``n`` of the request pinned as
        ``pin:<h>`` has the id ``part:<h>.<n>`` and the fields ``request``, ``part``,
        ``parts_total``, ``part_text`` (exact) and ``part_kind`` (:func:`part_kind`)."""
        items = numbered_items(message.text)
        kind = self.pin_kind(message)
        if items is None or (kind != "request" and not problem_list(message.text)):
            return []  # a governing list (a task's guidelines) is shown whole, never closed
        pin = f"pin:{message.entry_hash[:16]}"
        self.kinds[pin] = kind
        ops = []
        for n, item in enumerate(items, start=1):
            fid = f"{PART}{message.entry_hash[:16]}.{n}"
            kind = part_kind(item, problem=True)
            self.open[fid] = _OpenPart(PartProgress(item, kind), pin, n, len(items))
            ops.append(
                {
                    "op": "add",
                    "fact": {
                        "id": fid,
                        "category": "open_obligation",
                        "priority": "P1",
                        "confidence": "reported",
                        "text": f"Request part {n} of {len(items)} (the user's list at seq "
                        f"{message.seq}): {redact(item)}",
                        "support": [cite(message, item[:200])],
                        "author": "offline",
                        "request": pin,
                        "part": n,
                        "parts_total": len(items),
                        "part_text": redact(item),
                        "part_kind": kind,
                    },
                }
            )
        return ops

    def see(
        self, call: EntryView, result: EntryView, *, ok: bool, check: bool
    ) -> list[dict[str, Any]]:
        """``close`` ops for the parts this result carries out, then for each request whose
        parts are now all closed, a ``close`` of its pin (a request pin only; governing pins
        never close). Evidence: the results that carried the parts out; ``seq``: the last."""
        if ok and not check:
            self.change, self.run = result, None
        elif check:
            self.run = result if ok and self.change is not None else None
        ops: list[dict[str, Any]] = []
        for fid, part in list(self.open.items()):
            if part.progress.see(call, result, ok=ok, check=check):
                reason = f"request part {part.index} carried out ({part.progress.kind})"
                ops += self._close(fid, part, part.progress.evidence or [], result, reason)
        return ops

    def said(self, message: EntryView) -> list[dict[str, Any]]:
        """``close`` ops for the parts an assistant ``message`` says are done ("Problem 1 is
        fixed", "Fixed item 2"; not "Problem 3 diagnosed ... not fixed yet") when a
        successful change and a passing check after it ran since the last part closed: the
        change and the run are the evidence, the message only says which part they carry
        out (its words alone close nothing; docs/design.md 5.2)."""
        if self.change is None or self.run is None:
            return []
        ops: list[dict[str, Any]] = []
        for sentence in sentences(message.text):
            if _NOT_DONE.search(sentence):
                continue
            for m in _PART_DONE.finditer(sentence):
                number = int(m.group(1) or m.group(2))
                found = [(fid, p) for fid, p in self.open.items() if p.index == number]
                if not found or self.change is None or self.run is None:
                    continue
                fid, part = found[-1]  # the latest request with that part open
                reason = (
                    f"request part {number} carried out: a change (seq {self.change.seq}) "
                    f"and a passing check (seq {self.run.seq}), named at seq {message.seq}"
                )
                ops += self._close(fid, part, [self.change, self.run], self.run, reason)
                self.change = self.run = None
        return ops

    def _close(
        self, fid: str, part: _OpenPart, evidence: list[EntryView], last: EntryView, reason: str
    ) -> list[dict[str, Any]]:
        del self.open[fid]
        self.closed[fid] = _hashes_by_seq(evidence)
        close = {"op": "close", "id": fid, "evidence": self.closed[fid], "reason": reason}
        return [{**close, "seq": last.seq}, *self._close_request(part, last)]

    def _close_request(self, part: _OpenPart, result: EntryView) -> list[dict[str, Any]]:
        ids = [f"{PART}{part.request.removeprefix('pin:')}.{n}" for n in range(1, part.total + 1)]
        if part.total < 1 or any(i in self.open for i in ids):
            return []  # a part still open: the request is not done
        pin = self.facts.get(part.request)
        kind = self.kinds.get(part.request) or (pin or {}).get("pin_kind") or "governing"
        if kind != "request" or (pin is not None and pin.get("lifecycle") != "active"):
            return []
        evidence = list(dict.fromkeys(h for i in ids for h in self.closed.get(i, [])))
        return [
            {
                "op": "close",
                "id": part.request,
                "evidence": evidence,
                "reason": f"every part of the request ({part.total}) carried out; the last "
                f"at seq {result.seq}",
                "seq": result.seq,
            }
        ]


def request_part_ids(pins: Mapping[str, Fact]) -> set[str]:
    """The ids of the ``part:`` obligations of the active request pins among ``pins``
    (``{id: fact}``): ``part:<h>.1`` ... ``part:<h>.n`` for a pin whose text is a numbered
    list of ``n`` items (:func:`numbered_items`). What a fold must load, whatever their
    lifecycle, for a request's close to cite every part's evidence (docs/design.md 5.5)."""
    ids: set[str] = set()
    for fid, f in pins.items():
        if f.get("pin_kind") != "request" or f.get("lifecycle") != "active":
            continue
        items = numbered_items(str(f.get("text", "")))
        if items is not None:
            h = fid.removeprefix("pin:")
            ids |= {f"{PART}{h}.{n}" for n in range(1, len(items) + 1)}
    return ids


def pin_kinds(entries: Sequence[EntryView], state: Mapping[str, Any]) -> dict[str, str]:
    """``{pin id: "request" | "governing"}`` for the pins code writes for ``entries`` (a
    fold's covered entries, ``state`` the ledger before them), classified exactly as the
    fold writes them (:func:`ledger_app.pin_facts.pin_facts`: the session's first request
    is its objective, governing); a pin without ``pin_kind`` counts as governing
    (docs/design.md 5.2: only a request closes)."""
    pins = pin_facts(entries, state=state)
    return {p["id"]: str(p.get("pin_kind") or "governing") for p in pins}
