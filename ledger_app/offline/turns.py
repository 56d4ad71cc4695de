"""The words a turn is read with: cancellations, conclusions, instructions and parts. Pure.

For the offline writer (:class:`ledger_app.offline.OfflineWriter`):

* :func:`cancellations`: sentences of an authoritative user or developer message that lift an
  earlier instruction ("never mind", "scratch that", "ignore my previous instruction", "no
  longer need ..."), and :func:`cancelled_pin`, the earlier pin they most likely lift (most
  words in common, else the latest). The writer proposes a ``retire`` of that pin; the
  reducer sends it to the review queue (docs/design.md 5.2: authoritative evidence from a later
  fold, then a reviewer).
* :func:`conclusion`: the text an assistant ended a turn with (what it concluded, delivered,
  or asks the user), kept as a ``reported`` fact so folding the turn does not lose it.
* :func:`completes`: whether a successful state-changing tool result carried out an
  instruction (it names a word of the instruction in its call or output), so the instruction's
  pin can be shown as done with its evidence.

Requests that close only when each part has completion evidence (docs/design.md 5.5):

* :func:`instruction_parts` / :func:`part_kind`: a request's steps ("fix the crash in B and
  add a regression test" is two) and what carries each out;
* :func:`numbered_items`: a user's numbered list of problems, one open obligation per
  problem.

:mod:`ledger_app.offline.request_parts` follows the parts through a fold's results and
closes them on evidence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ledger_app.entry_view import EntryView, command_of
from ledger_app.facts import Fact
from ledger_app.offline.heuristics import sentences
from ledger_app.pin_facts import is_pin_source

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

    docs/design.md 5.2: a P0 pin retires only on authoritative evidence *from a later fold*. A
    transcript imported whole would fold "rotate the keys" and "never mind, don't" together,
    and the cancellation could propose nothing (a fresh-eyes finding). So a
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

    docs/design.md 5.5: a user's list of problems is one request with one part per problem, each
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
    shown done (docs/design.md 5.5): the items of a numbered list (:func:`numbered_items`), else
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
CHECK_STEP = re.compile(
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
    """What carries out one step (docs/design.md 5.5):

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
