"""What a turn ended with: cancellations, conclusions and carried-out instructions. Pure.

Issue 15, items 4, 6 and 7, for the offline writer (:class:`ledger_app.offline.OfflineWriter`):

* :func:`cancellations`: sentences of an authoritative user or developer message that lift an
  earlier instruction ("never mind", "scratch that", "ignore my previous instruction", "no
  longer need ..."), and :func:`cancelled_pin`, the earlier pin they most likely lift (most
  words in common, else the latest). The writer proposes a ``retire`` of that pin; the
  reducer sends it to the review queue (DESIGN.md 5.2: authoritative evidence from a later
  fold, then a reviewer).
* :func:`conclusion`: the text an assistant ended a turn with (what it concluded, delivered,
  or asks the user), kept as a ``reported`` fact so folding the turn does not lose it.
* :func:`completes`: whether a successful state-changing tool result carried out an
  instruction (it names a word of the instruction in its call or output), so the instruction's
  pin can be shown as done with its evidence.

Requests that close only when each part has completion evidence (DESIGN.md 5.5):

* :func:`instruction_parts` / :func:`part_kind`: a request's steps ("fix the crash in B and
  add a regression test" is two) and what carries each out; :class:`PartProgress` follows
  one step through the fold's results;
* :func:`numbered_items` / :class:`RequestParts`: a user's numbered list of problems is one
  open obligation per problem, each closed on its own evidence, the request's pin when all
  are; :func:`request_part_ids` and :func:`pin_kinds` say what a fold reads for that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger_app import mechanical
from ledger_app.facts import Fact
from ledger_app.mechanical import EntryView, cite, command_of, is_pin_source, redact
from ledger_app.offline.heuristics import sentences

#: "that"/"it" closing a clause: "cancel that." lifts something, "drop that table" is a task
_END = r"(?=\s*(?:[.,;:!?)]|\band\b|\bbut\b|$))"
CANCEL = re.compile(
    r"\b(?:never ?mind|scratch that|forget (?:about )?(?:(?:that|it)" + _END + r"|what i said|"
    r"my (?:earlier|previous|last)\b)|disregard (?:that" + _END + r"|my|the (?:earlier|previous|"
    r"last))|ignore (?:that" + _END + r"|my (?:earlier|previous|last)|the (?:earlier|previous|"
    r"last) (?:instruction|request|message))|"
    r"(?:cancel|drop|undo) (?:that" + _END + r"|my (?:earlier|previous|last) (?:instruction|"
    r"request))|"
    r"(?:do not|don't|no need to) (?:do|bother with) (?:that|it) (?:any ?more|after all)|"
    r"no longer (?:need|want|required|necessary|applies)|(?:is|are) no longer (?:needed|required|"
    r"necessary|a requirement)|you (?:can|may) (?:now )?(?:ignore|skip|drop) (?:the|that|my))\b",
    re.I,
)
#: words of the cancelling phrases themselves: a sentence with nothing else ("never mind",
#: "scratch that, forget it") lifts the latest request; one naming something lifts only a pin
#: that names it too
_CANCEL_WORDS = frozenset(
    "never mind nevermind scratch forget cancel ignore disregard undo drop longer need needed "
    "want bother anymore after earlier previous last instruction request message required "
    "necessary applies okay actually".split()
)
AWAITS_USER = re.compile(
    r"\?\s*$|\b(?:would you like|do you want|shall i|should i|let me know|next steps?|"
    r"please (?:confirm|review|test|check)|awaiting your|once you)\b",
    re.I,
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{3,}")
_STOP = frozenset(
    "this that with from have will would should could please about there their them then "
    "than what when where which while into your yours make sure also just like want need "
    "more some only each every other instead using used file files code".split()
)


#: A word that names a thing rather than an action: it holds ``_``, ``.``, ``/`` or a digit
_IDENTIFIER_LIKE = re.compile(r"[_./0-9]")


def words(text: str) -> set[str]:
    """Lower-cased content words of ``text`` (4+ characters, common words left out); a path
    also gives its last part (``billing/refunds.py`` names ``refunds.py``)."""
    found = {w.lower().strip("./-") for w in _WORD.findall(text)}
    found |= {w.rsplit("/", 1)[1] for w in found if "/" in w and len(w.rsplit("/", 1)[1]) >= 4}
    return found - _STOP


def cancellations(parts: list[str]) -> list[str]:
    """The sentences (of one authoritative message) that cancel an earlier instruction."""
    return [s for s in parts if CANCEL.search(s)]


def cancellation_boundary(views: list[EntryView]) -> int | None:
    """The seq a fold over ``views`` (one fold's range, in seq order) should end at so that
    an authoritative cancellation falls in the next fold, or ``None``.

    DESIGN.md 5.2: a P0 pin retires only on authoritative evidence *from a later fold*. A
    transcript imported whole would fold "rotate the keys" and "never mind, don't" together,
    and the cancellation could propose nothing (fresh-eyes finding, issue 15 item 7). So a
    range holding a pin source and, after it, an authoritative message with a cancelling
    sentence ends just before that message (a user or developer message opens a round, so
    the cut is a round boundary); the next fold starts at it and proposes the retirement.
    """
    pinned = False
    for v in views:
        if v.kind != "message" or not is_pin_source(v):
            continue
        if pinned and cancellations(sentences(v.text)):
            return v.seq - 1
        pinned = True
    return None


def cancelled_pin(sentence: str, pins: Mapping[str, Fact]) -> str | None:
    """The id of the active user/developer pin ``sentence`` most likely lifts, or ``None``.

    Args:
        sentence: a cancelling sentence (:func:`cancellations`).
        pins: active P0 pins of the ledger before the fold, in ledger order.

    Returns:
        The pin sharing most content words with the sentence (a tie: the later pin); with
        none shared, the latest ``objective`` pin only when the sentence is a bare
        cancellation (a "never mind" lifts the last request; "we no longer need Python 3.8
        support" names something no pin names and lifts nothing). A pin that is itself a
        cancellation is never the answer. ``None`` when there is no such pin.
    """
    said = words(sentence)
    best, best_score = None, 0
    latest = None
    for fid, fact in pins.items():
        if not fact.get("pin") or fact.get("lifecycle") != "active":
            continue
        text = str(fact.get("text", ""))
        if CANCEL.search(text):
            continue  # an earlier cancellation is not an instruction to lift
        if fact.get("category") == "objective":
            latest = fid
        score = len(said & words(text))
        if score and score >= best_score:  # a tie goes to the later pin (ledger order)
            best, best_score = fid, score
    if best is not None:
        return best
    # nothing shared: only a bare cancellation ("never mind") lifts the latest request
    return latest if not (said - _CANCEL_WORDS) else None


def conclusion(text: str, limit: int = 400) -> tuple[str, str, bool]:
    """``(excerpt, quote, awaits_user)`` of an assistant's closing message.

    ``excerpt`` is the whitespace-collapsed text cut to ``limit`` characters; ``quote`` the
    first non-empty line verbatim (exact text for the support item); ``awaits_user`` whether
    the message ends by asking the user or handing them next steps (:data:`AWAITS_USER`).
    """
    flat = " ".join(text.split())
    excerpt = flat if len(flat) <= limit else flat[: limit - 1] + "…"
    quote = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    tail = flat[-300:]
    return excerpt, quote[:200], bool(AWAITS_USER.search(tail))


#: Verbs that open a second action after "and" ("fix the crash in B and add a test")
_ACTIONS = (
    r"add|write|create|fix|run|re-?run|update|deploy|remove|delete|drop|rename|commit|push|"
    r"open|document|bump|release|merge|migrate|backfill|refactor|implement|test|check|"
    r"install|upgrade|revert|restart|rebuild|publish|tag|send|apply|lint|format|clean ?up"
)
#: Where an instruction moves to its next step ("drop X, then deploy Y"; "A; B"; lines;
#: "fix X and add a test": an "and" followed by an action verb)
_STEP = re.compile(
    r"(?:,?\s+(?:and\s+)?then\b|\bafter that\b|\bafterwards\b|;|\n|"
    r",?\s+and\s+(?:also\s+)?(?=(?:" + _ACTIONS + r")\b))",
    re.I,
)
#: One item of a numbered list: "1. ...", "2) ...", at the start of a line
_NUMBERED = re.compile(r"(?m)^[ \t]*(?:\*\*)?(\d{1,2})[.)](?:\*\*)?[ \t]+(\S.*)$")
#: The most items a numbered list may have to become one obligation each
MAX_LIST_ITEMS = 30


def numbered_items(text: str) -> list[str] | None:
    """The items of a numbered list in ``text`` ("1. ... 2. ... 6. ..."), each the exact
    text of its line after the number; ``None`` unless ``text`` holds at least two items
    numbered 1, 2, ... in order (at most :data:`MAX_LIST_ITEMS`).

    DESIGN.md 5.5: a user's list of problems is one request with one part per problem, each
    closed on its own evidence.
    """
    found = _NUMBERED.findall(text)
    if len(found) < 2 or len(found) > MAX_LIST_ITEMS:
        return None
    if [int(n) for n, _ in found] != list(range(1, len(found) + 1)):
        return None
    return [item.strip() for _, item in found]


#: The line before a numbered list that says the items are problems to fix
_PROBLEMS_LEAD = re.compile(
    r"\b(?:problems|issues|bugs|things to (?:fix|change|do)|fix (?:these|them|the following|"
    r"all of them|each)|one by one)\b",
    re.I,
)


def problem_list(text: str) -> bool:
    """Whether ``text`` holds a numbered list (:func:`numbered_items`) that its lead-in line
    calls problems to fix ("I found six problems, please fix them one by one:"): a list of
    work items even in a governing message, unlike a task's numbered guidelines ("IMPORTANT
    TIPS:", "Follow these steps ...")."""
    first = _NUMBERED.search(text)
    if first is None or numbered_items(text) is None:
        return False
    lead = [ln for ln in text[: first.start()].splitlines() if ln.strip()]
    return bool(lead) and bool(_PROBLEMS_LEAD.search(lead[-1]))


def instruction_parts(text: str) -> list[str]:
    """The steps of an instruction, each needing its own evidence before the instruction is
    shown done (DESIGN.md 5.5): the items of a numbered list (:func:`numbered_items`), else
    ``text`` split at "then", "after that", ";", line breaks and an "and" that opens a
    second action ("fix the crash in B and add a regression test"), keeping the parts that
    hold a content word (:func:`words`); ``[text]`` when it has one step."""
    items = numbered_items(text)
    if items is not None:
        return items
    parts = [p.strip() for p in _STEP.split(text) if words(p)]
    return parts or [text]


#: A step that asks for a test to be written ("add a regression test", "write tests for X")
_WRITE_TEST = re.compile(
    r"\b(?:add|write|create|extend|cover)\b[^.;]*\btests?\b|\bregression tests?\b|"
    r"\btest (?:case|coverage)s? for\b",
    re.I,
)
#: A step that asks for a check: a passing test run, lint, type check or build carries it out
_CHECK_STEP = re.compile(
    r"\b(?:tests?|test suite|unit tests?|lint|linters?|type ?checks?|typecheck|checks?|build)\b",
    re.I,
)
#: A step that asks only to run a check ("run the unit tests", "lint it"): no change needed
_RUN_CHECK = re.compile(
    r"^\W*(?:(?:please|now|also|then)\s+)?(?:(?:re-?)?run|execute|make sure|ensure|verify)\b"
    r"[^.;]*\b(?:tests?|test suite|lint|linters?|type ?checks?|typecheck|checks?|build)\b|"
    r"^\W*(?:(?:please|now|also|then)\s+)?(?:lint|type ?check|test)\b",
    re.I,
)
#: A step that reports or asks to fix a problem: done only when a change naming it is
#: followed by a passing run (an edit alone does not show the problem gone)
_FIX_STEP = re.compile(
    r"\b(?:fix\w*|bugs?|crash\w*|broken|breaks?|fails?|failing|failures?|errors?|exceptions?|"
    r"regressions?|wrong|incorrect|doesn'?t work|does not work|not working|hangs?|leaks?)\b",
    re.I,
)
#: Where a path names a test file: ``tests/...``, ``test_x.py``, ``x_test.go``, ``x.test.ts``
TEST_PATH = re.compile(
    r"(?:^|[\s/\\\"'=:])(?:tests?/|__tests__/|spec/)[\w./-]+|"
    r"(?:^|[\s/\\\"'=:])(?:test_[\w-]+|[\w-]+_test|[\w-]+\.(?:test|spec))\.[a-z]{1,4}\b"
)


def part_kind(part: str, *, problem: bool = False) -> str:
    """What carries out one step (DESIGN.md 5.5):

    * ``"write_test"`` (add/write a test): a test file written, then a passing test run;
    * ``"check"`` (run the tests, lint, build): a passing test run or check;
    * ``"fix"`` (a problem to fix; every item of a numbered list of problems, ``problem``):
      a change naming it, then a passing test run or check;
    * ``"do"`` (anything else): a successful change naming it (:func:`completes`).
    """
    if _WRITE_TEST.search(part):
        return "write_test"
    if problem or _FIX_STEP.search(part):
        return "fix"
    if _RUN_CHECK.search(part):
        return "check"
    return "do"


def completes(instruction: str, call_text: str, output: str) -> bool:
    """Whether a successful call/result pair names a content word of ``instruction``.

    A weak but mechanical link: the instruction "drop the table orders_old" is carried out
    by ``psql -c 'DROP TABLE orders_old'`` (shares ``orders_old``), not by ``ls``; "run every
    check" is not carried out by ``check 7`` (one plain shared word is not enough).
    """
    said = words(call_text)
    # a path or dotted name also names its parts: ``auth/login.py`` names "login"
    said |= {p for w in said for p in re.split(r"[./_-]", w) if len(p) >= 4} - _STOP
    shared = words(instruction) & (said | words(output[:4000]))
    # one plain word ("check" in "run every check") is too weak to mark a P0 instruction
    # done: an identifier-like word (``orders_old``, ``refunds.py``, ``v2``) or two words
    return len(shared) >= 2 or any(_IDENTIFIER_LIKE.search(w) for w in shared)


def pins_of(state: Mapping[str, Any]) -> dict[str, Fact]:
    """The active P0 pins of a writer state (``state["facts"]``), in order."""
    facts: Mapping[str, Fact] = state.get("facts", {})
    return {
        fid: f
        for fid, f in facts.items()
        if f.get("pin") and f.get("priority") == "P0" and f.get("lifecycle") == "active"
    }


def call_text(call: EntryView) -> str:
    """What a tool call says, for matching it to a request: its text, shell command and
    arguments (as JSON, at most 4,000 characters)."""
    args = call.content.get("arguments")
    shown = json.dumps(args, ensure_ascii=False)[:4000] if args is not None else ""
    return "\n".join(t for t in (call.text, command_of(call), shown) if t)


@dataclass
class PartProgress:
    """One step of a request and the evidence that carries it out (DESIGN.md 5.5).

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
            if _CHECK_STEP.search(self.text) if check else completes(self.text, said, result.text):
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
    (:class:`PartProgress`), and the request's pin closes when every part has (DESIGN.md 5.5).

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
        out (its words alone close nothing; DESIGN.md 5.2)."""
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
    lifecycle, for a request's close to cite every part's evidence (DESIGN.md 5.5)."""
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
    fold writes them (:func:`ledger_app.mechanical.pin_facts`: the session's first request
    is its objective, governing); a pin without ``pin_kind`` counts as governing
    (DESIGN.md 5.2: only a request closes)."""
    facts = getattr(mechanical, "pin_facts", None)  # pin kinds: the pins' code (DESIGN 5.2)
    if facts is not None:
        pins = facts(entries, state=state)
    else:  # a code base whose pins have no kind yet: every pin governing
        pins = [mechanical.pin_fact(e) for e in entries if is_pin_source(e)]
    return {p["id"]: str(p.get("pin_kind") or "governing") for p in pins}
