"""Approvals as decisions with their content, awaited approvals, consumption (docs/design.md 5.5). Pure.

For the offline writer (:class:`ledger_app.offline.OfflineWriter`):

* :func:`acceptance`: whether a user message accepts what came before it ("yes", "approved",
  "go with option 2", "do it"), picks an option, or accepts with an edit ("take option 2,
  but replace X with Y": not a decision yet; the assistant's restatement, once confirmed, is);
* :func:`proposal_body` / :func:`options`: the exact text a proposal offers (a quoted or
  fenced text, a blockquote line, or the message) and its numbered options;
* :func:`awaits_approval`: an assistant message ending by asking leave ("shall I ...?");
* :class:`Approvals`: the decisions of one fold: a ``decision`` fact quoting exactly what
  was accepted, supported by the proposal and the acceptance (each with a quote); an
  approval with no proposal before it quotes only the user's words and says so; an
  awaited approval is an open obligation until answered; a decision is **consumed**
  ("used at seq N") by a ``close`` citing the approved action's successful result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger_app.entry_view import EntryView, cite
from ledger_app.fact_text import clip, redact
from ledger_app.facts import Fact
from ledger_app.offline.turns import call_text, completes, words
from ledger_app.outcomes import QUOTE_CHARS

#: ``command_key`` of the awaited approval (one active at a time; a new question replaces it)
AWAIT_KEY = "assistant:awaits-approval"
#: Fact id prefixes: approval decisions and awaited approvals
APPROVAL, AWAIT = "approval:", "await:"
#: Longest user message read as an acceptance (a longer one is a new request)
ACCEPT_CHARS = 400
#: Longest accepted text a decision fact holds (exact; longer is cut with a mark)
DECISION_CHARS = 2000

_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}
ACCEPT = re.compile(
    r"^\W*(?:(?:please|then|thanks|thank you|great|perfect|good|ok(?:ay)?)\W+)?(?:yes|yep|yeah|yup|ok(?:ay)?|sure|approved?|lgtm|sounds good|looks good|"
    r"go ahead|do it|ship it|proceed|confirm(?:ed)?|agreed|perfect|great|correct|exactly|"
    r"(?:let'?s |please |i'?ll |we'?ll )?(?:go with|take|use|pick|choose) (?:the )?"
    r"(?:option\s*#?\d+|(?:first|second|third|fourth|fifth|last) (?:one|option))|"
    r"option\s*#?\d+)\b",
    re.I,
)
_OPTION = re.compile(
    r"\boption\s*#?(\d+)\b|\b(first|second|third|fourth|fifth|last) (?:one|option)\b", re.I
)
#: An acceptance that changes what it accepts: the decision waits for the restated text
EDIT = re.compile(
    r"\b(?:but|except|however|only)\b[^.!?]*\b(?:replace|change|rename|swap|make it|"
    r"drop|remove|add|use|instead)\b|\breplace\b[^.!?]*\bwith\b|\binstead of\b",
    re.I,
)
_ASKS_LEAVE = re.compile(
    r"\b(?:shall (?:i|we)|should (?:i|we)|do you want (?:me )?to|would you like (?:me )?to|"
    r"may i|can i|ok(?:ay)? to|do you approve|approve|go ahead|proceed|confirm|"
    r"which (?:option|one)|does (?:this|that) (?:look|work|sound)|is (?:this|that) ok(?:ay)?)\b"
    r"[^?.!\n]*\?|\bplease (?:confirm|approve)\b",
    re.I,
)
_OPTION_LINE = re.compile(
    r"(?m)^[ \t]*(?:[-*][ \t]+)?(?:\*\*)?(?:option[ \t]*)?#?(\d{1,2})(?:\*\*)?[ \t]*[.):][ \t]*"
    r"(?:\*\*)?[ \t]*(\S.*?)[ \t]*$",
    re.I,
)
_QUOTED = re.compile(r"\"([^\"\n]{3,})\"|“([^”\n]{3,})”|«([^»\n]{3,})»")
_FENCED = re.compile(r"```[^\n]*\n(.*?)\n[ \t]*```", re.S)
_BLOCKQUOTE = re.compile(r"(?m)^[ \t]*>[ \t]?(\S.*)$")


#: Words that approve whatever came before ("approved", "do it"); "yes", "ok", "sure" only
#: approve a message that asked leave or offered options (else they just answer)
STRONG = re.compile(
    r"\b(?:approved?|lgtm|go ahead|do it|ship it|proceed|confirm(?:ed)?|option\s*#?\d+|"
    r"(?:first|second|third|fourth|fifth|last) (?:one|option))\b",
    re.I,
)
#: Tools that act on nothing: they never carry out an approved action
_NO_ACTION = re.compile(r"(?i)^(?:think|plan|todo\w*|update_plan|ask\w*|question\w*)$")


@dataclass(frozen=True)
class Acceptance:
    """How a user message accepts: ``option`` (1-based, -1 the last; ``None``: the whole
    proposal), ``edited`` (accepted with a change: no decision until it is restated),
    ``strong`` (it approves whatever came before, :data:`STRONG`)."""

    option: int | None = None
    edited: bool = False
    strong: bool = False


def acceptance(text: str) -> Acceptance | None:
    """The acceptance a user message states, or ``None`` (not one, or too long to be one:
    :data:`ACCEPT_CHARS`). "Yes, approved." -> ``Acceptance()``; "go with option 2" ->
    ``Acceptance(option=2)``; "Take option 2, but replace X with Y" ->
    ``Acceptance(option=2, edited=True)``. A message starting "no"/"don't" is not one."""
    flat = " ".join(text.split())
    if not flat or len(flat) > ACCEPT_CHARS or not ACCEPT.match(flat):
        return None
    picked = _OPTION.search(flat)
    option = None
    if picked:
        option = int(picked.group(1)) if picked.group(1) else _ORDINALS[picked.group(2).lower()]
    return Acceptance(
        option=option, edited=bool(EDIT.search(flat)), strong=bool(STRONG.search(flat))
    )


def awaits_approval(text: str) -> bool:
    """An assistant message that asks, in its last 400 characters, the user's leave or
    choice ("Shall I apply migration 0042 to staging?", "Which option do you prefer?",
    "Would you like to use your credit card ...?", "please confirm ...")."""
    return bool(_ASKS_LEAVE.search(" ".join(text.split())[-400:]))


def options(text: str) -> dict[int, str]:
    """The numbered options of a proposal, ``{number: exact text of its line}`` (``1. ...``,
    ``Option 2: ...``, ``- **3)** ...``); ``{}`` with fewer than two."""
    found: dict[int, str] = {}
    for m in _OPTION_LINE.finditer(text):
        found.setdefault(int(m.group(1)), m.group(2).rstrip("*").strip())
    return found if len(found) >= 2 else {}


def proposal_body(text: str) -> str:
    """The exact text a proposal offers, a substring of ``text``: the one fenced block, else
    the one blockquote line, else the longest quoted span of three or more words, else the
    message stripped."""
    fenced = _FENCED.findall(text)
    if len(fenced) == 1 and fenced[0].strip():
        return str(fenced[0]).strip()
    quoted = _BLOCKQUOTE.findall(text)
    if len(quoted) == 1:
        return str(quoted[0]).strip()
    spans = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]
    spans = [s.strip() for s in spans if len(s.split()) >= 3]
    if spans:
        return max(spans, key=len)
    return text.strip()


def accepted_text(proposal: str, how: Acceptance) -> tuple[str, str]:
    """``(exact accepted text, what it is)`` of ``proposal`` under ``how``: the chosen
    option's line (``"option N"``) when the proposal numbers it, else :func:`proposal_body`
    (``"proposal"``)."""
    if how.option is not None:
        found = options(proposal)
        number = max(found) if how.option == -1 and found else how.option
        if number in found:
            return found[number], f"option {number}"
    return proposal_body(proposal), "proposal"


def _quoted(view: EntryView, quote: str) -> dict[str, Any]:
    """A support item quoting ``quote`` (its first :data:`QUOTE_CHARS` characters: exact
    text of ``view`` keeps its byte range)."""
    return cite(view, quote.strip()[:QUOTE_CHARS])


def _exact(text: str) -> str:
    return text if len(text) <= DECISION_CHARS else text[: DECISION_CHARS - 1] + "…"


@dataclass
class _Open:
    """A decision that the approved action may still consume."""

    id: str
    words: str
    bare: bool
    after: int
    #: the pins of the edits it confirms ("Take option 2, but replace X with Y"): done with it
    confirms: tuple[str, ...] = ()


@dataclass
class Approvals:
    """The approvals of one fold, in journal order (module docstring).

    Args:
        state: the writer state before the fold: its active awaited approval
            (:data:`AWAIT_KEY`) and active ``approval:`` decisions (consumed here too).
        request_pins: the ids of this fold's request pins. When the approved action runs,
            the acceptance's own pin closes too if it is a request ("Approved: run W4
            against staging now." is done when W4 ran); ``closed_pins`` collects the pins
            closed so, for the writer not to close one twice.
    """

    state: Mapping[str, Any]
    request_pins: set[str] = field(default_factory=set)
    awaiting: Fact | None = None
    open: list[_Open] = field(default_factory=list)
    closed_pins: set[str] = field(default_factory=set)
    #: the pins of accepted-with-an-edit messages since the last decision
    edits: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        facts = self.state.get("facts", {})
        for fid, f in facts.items():
            if f.get("lifecycle") != "active":
                continue
            if f.get("pin") and f.get("pin_kind") == "request":
                self.request_pins.add(fid)
            elif f.get("command_key") == AWAIT_KEY:
                self.awaiting = f
            elif fid.startswith(APPROVAL) and f.get("category") == "decision":
                self.open.append(
                    _Open(fid, str(f.get("decision_text", "")), False, int(f.get("seq", 0)))
                )

    def user(self, message: EntryView, proposal: EntryView | None) -> list[dict[str, Any]]:
        """Ops for a user ``message``; ``proposal`` is the assistant's message just before it
        in this fold (``None``: the awaited approval from an earlier fold, if any).

        An acceptance becomes a decision (``supersede`` of the awaited approval it answers,
        else ``add``); any other answer to an awaited approval ``cancel``s it (answered, not
        approved, the user's message the evidence); an acceptance with an edit answers it
        and decides nothing yet.
        """
        how = acceptance(message.text)
        waited = self.awaiting
        self.awaiting = None
        if proposal is not None and not (awaits_approval(proposal.text) or options(proposal.text)):
            proposal = None  # it asked nothing: a "yes" after it answers, it approves nothing
        if how is not None and not how.strong and proposal is None and waited is None:
            how = None  # "sure, my id is ..." after a question: an answer, not an approval
        if how is not None and how.edited:
            self.edits.append(f"pin:{message.entry_hash[:16]}")
        if how is None or how.edited:
            if waited is None:
                return []
            said = "with changes" if how is not None else "without approving it"
            return [
                {
                    "op": "cancel",
                    "id": waited["id"],
                    "evidence": [message.entry_hash],
                    "reason": f"the user answered at seq {message.seq} {said}",
                }
            ]
        fact = self._decision(message, how, proposal, waited)
        bound = proposal is not None or waited is not None
        self.open.append(
            _Open(
                fact["id"],
                str(fact.get("decision_text", "")) + " " + message.text,
                # a bare "yes" is used by the next action only when it answered a proposal;
                # "Approved." with nothing before it must name what the action does
                bound and not (words(message.text) - _ACCEPT_WORDS),
                message.seq,
                tuple(self.edits),
            )
        )
        self.edits = []
        if waited is not None and proposal is None:
            return [{"op": "supersede", "id": waited["id"], "fact": fact}]
        ops: list[dict[str, Any]] = []
        if waited is not None:  # answered, by the later proposal's acceptance
            ops.append(
                {
                    "op": "cancel",
                    "id": waited["id"],
                    "evidence": [message.entry_hash],
                    "reason": f"the user answered at seq {message.seq}",
                }
            )
        return [*ops, {"op": "add", "fact": fact}]

    def _decision(
        self,
        message: EntryView,
        how: Acceptance,
        proposal: EntryView | None,
        waited: Fact | None,
    ) -> Fact:
        words_ = " ".join(message.text.split())
        fact: Fact = {
            "id": f"{APPROVAL}{message.entry_hash[:16]}",
            "category": "decision",
            "priority": "P1",
            "confidence": "reported",
            "author": "offline",
            "acceptance": redact(words_)[:ACCEPT_CHARS],
            "seq": message.seq,
        }
        source_text = proposal.text if proposal is not None else None
        source_hash = proposal.entry_hash if proposal is not None else None
        source_seq = proposal.seq if proposal is not None else None
        if proposal is None and waited is not None:
            source_text = str(waited.get("proposal_text", ""))
            source_hash = waited.get("proposal_entry")
            source_seq = waited.get("proposal_seq")
        if not source_text or not source_hash:
            fact.update(
                text=f'User approved (seq {message.seq}), with no proposal before it: "'
                f'{clip(redact(words_), ACCEPT_CHARS)}"',
                support=[_quoted(message, message.text)],
                decision_text=redact(words_)[:ACCEPT_CHARS],
                bound=False,
            )
            return fact
        exact, what = accepted_text(source_text, how)
        shown = _exact(redact(exact))
        support_proposal = (
            _quoted(proposal, exact)
            if proposal is not None
            else {"entry": source_hash, "quote": exact.strip()[:QUOTE_CHARS]}
        )
        said = clip(redact(words_), ACCEPT_CHARS)
        own = f' (the user\'s words: "{said}")' if words(words_) - _ACCEPT_WORDS else ""
        fact.update(
            text=f"User approved (seq {message.seq}) the {what} proposed at seq {source_seq}: "
            f'"{shown}"{own}',
            support=[support_proposal, _quoted(message, message.text)],
            decision_text=shown,
            bound=True,
            proposal_entry=source_hash,
            proposal_seq=source_seq,
            accepted=what,
        )
        return fact

    def result(self, call: EntryView, result: EntryView, fact: Fact) -> list[dict[str, Any]]:
        """``close`` ops for the decisions a successful action consumes: one that names what
        was approved (:func:`completes`), or, for a bare acceptance ("yes", "do it"), the
        first action after it. ``fact`` is the writer's outcome fact of the pair; the
        caller passes only non-read, non-check calls."""
        if fact.get("outcome") == "failure" or fact.get("result") not in ("success", None):
            return []
        if _NO_ACTION.match(call.tool_name.split("__")[-1]):
            return []
        ops = []
        for d in list(self.open):
            if result.seq <= d.after:
                continue
            said = call_text(call)
            if (
                d.bare
                or completes(d.words, said, result.text)
                or _numbered(d.words) & _numbered(said)
            ):
                self.open.remove(d)
                ran = clip(redact(fact.get("text", "")), 200)
                close = {
                    "op": "close",
                    "id": d.id,
                    "evidence": [call.entry_hash, result.entry_hash],
                    "reason": f"used at seq {result.seq}: the approved action ran ({ran})",
                    "seq": result.seq,
                }
                ops.append(close)
                # the acceptance's own pin, and the edit it confirmed, are done with it
                for pin in ("pin:" + d.id.removeprefix(APPROVAL), *d.confirms):
                    if pin in self.request_pins and pin not in self.closed_pins:
                        self.closed_pins.add(pin)
                        reason = f"the approved action ran at seq {result.seq} ({ran})"
                        ops.append({**close, "id": pin, "reason": reason})
        return ops

    def end(self, said: EntryView | None) -> list[dict[str, Any]]:
        """At the fold's end: an awaited approval for a final assistant message ``said``
        that asks the user's leave (superseding an earlier one still awaited)."""
        if said is None or not awaits_approval(said.text):
            return []
        question = next((ln.strip() for ln in reversed(said.text.splitlines()) if ln.strip()), "")
        body = proposal_body(said.text)
        fact: Fact = {
            "id": f"{AWAIT}{said.entry_hash[:16]}",
            "category": "open_obligation",
            "priority": "P1",
            "confidence": "reported",
            "text": f"Awaiting the user's answer (asked at seq {said.seq}): "
            f"{clip(redact(question), 300)}",
            "support": [_quoted(said, question)],
            "author": "offline",
            "command_key": AWAIT_KEY,
            "proposal_text": _exact(redact(body)),
            "proposal_entry": said.entry_hash,
            "proposal_seq": said.seq,
        }
        if self.awaiting is not None:
            return [{"op": "supersede", "id": self.awaiting["id"], "fact": fact}]
        return [{"op": "add", "fact": fact}]


_NUMBERED_NAME = re.compile(r"[A-Za-z0-9_]*\d[A-Za-z0-9_]*")


def _numbered(text: str) -> set[str]:
    """Names holding a digit ("0042", "W4", "v2"; two characters or more, not a bare
    digit): what an approved action names most surely (migration 0042, wave W4)."""
    found = _NUMBERED_NAME.findall(text)
    return {m.lower() for m in found if (len(m) >= 2 and not m.isdigit()) or len(m) >= 3}


#: Words of a bare acceptance: an acceptance holding nothing else names no action
_ACCEPT_WORDS = frozenset(
    "yes yeah okay sure approved approve lgtm sounds good looks ahead ship proceed confirm "
    "confirmed agreed perfect great correct exactly thanks please option first second third "
    "fourth fifth last take pick choose with".split()
)
