"""The continuation record at the head of every checkpoint (docs/design.md section 6). Pure.

Built from the ledger state alone (never from the journal's tail), so the part of the request
before the tail changes only when a fold lands and provider prompt caches stay warm. Sections,
in this order, each line citing the entry it rests on:

* ``objective``: the ledger's objective facts verbatim; when it has none, the user's
  governing instruction(s) (pins, shown verbatim above) named by seq and first line;
* ``constraints``: active constraint facts verbatim (pins are shown verbatim above);
* ``decisions``: active ``decision`` facts with their exact text;
* ``done``: one line each with its evidence hash: closed request pins ("done at seq N: first
  line ..., evidence sha256:..."), closed obligations (``ended_by.evidence``), instructions
  carried out (``completes`` + ``evidence_entry``), consumed decisions ("used at seq N"), and
  active P0/P1 ``verified_state`` successes (consequential actions);
* ``in progress``: open obligations whose plan status (``plan_status``, a plan/todo tool's
  item) says so;
* ``pending``: the other open obligations (pending calls and awaited replies included) and the
  open requests before the latest;
* ``blockers``: active blockers and active P0/P1 failures;
* ``end state``: the source's end status (``submitted``, ``exit_status``, task complete) and
  the last deliverable (the latest end-of-turn conclusion: its text, or a receipt when it is
  over the room given);
* ``next step``: the latest open request (or the latest user instruction when the ledger
  predates request pins).

Never an empty header: a ledger with nothing to say gets one line saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger_app.context.entry_text import short
from ledger_app.entry_view import EntryView
from ledger_app.fact_text import clip
from ledger_app.pins import open_requests_split, pin_shown_text, request_line

RECORD_MARK = "[continuation record"
#: The record's sections, in the order they are shown (docs/design.md 6).
SECTIONS = (
    "objective",
    "constraints",
    "decisions",
    "done",
    "in progress",
    "pending",
    "blockers",
    "end state",
    "next step",
)
#: Closed items listed under ``done`` (the newest); the rest are counted.
DONE_LINES = 12
#: Characters of a request's first line in its one-line "done at seq N" form.
FIRST_LINE_CHARS = 120
#: Used decisions (consumed approvals) the record still quotes, newest last
DECISIONS_USED = 5
#: Characters of an item's text on one line (objectives, constraints and decisions are whole).
ITEM_CHARS = 240
#: Lines of a deliverable's receipt.
RECEIPT_LINES = 3
#: Plan statuses that mean "in progress".
IN_PROGRESS = ("in_progress", "in-progress", "doing", "active", "started")
#: Fact ``result`` / end status words that mean the run ended by delivering.
END_WORDS = ("submitted", "task_complete", "completed", "complete", "finished")


def first_line(text: str, limit: int = FIRST_LINE_CHARS) -> str:
    """The first non-blank line of ``text``, cut to ``limit`` characters with `` ...`` when cut
    (or when more lines follow)."""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    if not lines:
        return ""
    head = " ".join(lines[0].split())
    if len(head) > limit:
        return head[: limit - 4].rstrip() + " ..."
    return head + (" ..." if len(lines) > 1 else "")


def _evidence(fact: Mapping[str, Any]) -> list[str]:
    ended = fact.get("ended_by")
    if isinstance(ended, Mapping):
        return [str(h) for h in ended.get("evidence") or [] if h]
    return []


def done_seq(fact: Mapping[str, Any], by_hash: Mapping[str, EntryView]) -> int | None:
    """The seq a closed fact was done at: ``ended_by.seq``, else the seq of its first evidence
    entry in the journal, else ``None``."""
    ended = fact.get("ended_by")
    if isinstance(ended, Mapping) and isinstance(ended.get("seq"), int):
        return int(ended["seq"])
    for h in _evidence(fact):
        if h in by_hash:
            return by_hash[h].seq
    return None


def is_request(fact: Mapping[str, Any]) -> bool:
    """A request pin (``pin_kind`` "request"); a pin without ``pin_kind`` is governing."""
    return bool(fact.get("pin")) and fact.get("pin_kind") == "request"


def is_closed_request(fact: Mapping[str, Any]) -> bool:
    """A request pin the reducer closed on completion evidence (docs/design.md 5.2)."""
    return is_request(fact) and fact.get("lifecycle") == "closed"


def done_request_line(fact: Mapping[str, Any], by_hash: Mapping[str, EntryView]) -> str:
    """A closed request as the context shows it: one line, never as current (docs/design.md 5.2):
    ``done at seq N: <first line ...>, evidence sha256:<hex>``."""
    seq = done_seq(fact, by_hash)
    evidence = _evidence(fact)
    at = f"seq {seq}" if seq is not None else "an earlier seq"
    proof = f", evidence {short(evidence[0])}" if evidence else ""
    return f"done at {at}: {first_line(str(fact.get('text', '')))}{proof}"


def _cite(fact: Mapping[str, Any]) -> str:
    support = [s.get("entry") for s in fact.get("support", []) if isinstance(s, Mapping)]
    hashes = [short(str(h)) for h in support if h]
    return f" ({fact.get('id')}; {', '.join(hashes[:2])})" if hashes else f" ({fact.get('id')})"


def _pin_hash(fact: Mapping[str, Any]) -> str:
    support = fact.get("support") or [{}]
    return short(str(support[0].get("entry", "")))


def _pin_seq(fact: Mapping[str, Any], by_hash: Mapping[str, EntryView]) -> int:
    support = fact.get("support") or [{}]
    e = by_hash.get(str(support[0].get("entry", "")))
    return e.seq if e is not None else 0


@dataclass
class Record:
    """The continuation record of one ledger state.

    Attributes:
        text: the record (opens with :data:`RECORD_MARK`), never empty.
        shown: ids of the facts it renders in full (the checkpoint does not repeat them).
        sections: section name -> its lines (for tests and the debug trace).
    """

    text: str
    shown: set[str] = field(default_factory=set)
    sections: dict[str, list[str]] = field(default_factory=dict)
    #: a line rests on more than the pins (a fact, a closed request, the source's end status):
    #: the record must be shown; without one it only repeats the pins shown above
    must: bool = False
    #: the record without the lines that only point at pins shown above (what a tight budget
    #: keeps; ``""`` when nothing else is left)
    core: str = ""


def continuation_record(
    facts: Iterable[Mapping[str, Any]],
    *,
    by_hash: Mapping[str, EntryView],
    end_status: str = "",
    deliverable_tokens: int | None = None,
    count: Callable[[str], int] | None = None,
    clean: Callable[[str], str] = str,
) -> Record:
    """The continuation record of a ledger (module docstring: sections and order).

    Args:
        facts: every fact of the ledger state, any lifecycle (plain dicts, ledger_app.facts).
        by_hash: entry hex -> entry of the journal as of the revision (seqs, the deliverable).
        end_status: the source's own end status (``info.exit_status`` of a SWE-agent or
            mini-swe-agent run, ``""`` for none).
        deliverable_tokens: the most tokens the last deliverable is shown verbatim in (over
            it: a receipt naming its entry, size and first lines); ``None``: always verbatim.
        count: token counter for ``deliverable_tokens`` (required with it).
        clean: redacts secrets from non-pin text.

    Returns:
        :class:`Record`; deterministic for equal inputs (facts are ordered by seq and id).
    """
    all_facts = sorted(facts, key=lambda f: str(f.get("id")))
    active = [f for f in all_facts if f.get("lifecycle", "active") == "active"]
    shown: set[str] = set()
    sections: dict[str, list[str]] = {}
    pinned: set[str] = set()  # lines that only point at pins
    must = [False]

    def add(
        section: str, line: str, fact: Mapping[str, Any] | None = None, pin: bool = False
    ) -> None:
        sections.setdefault(section, []).append(line)
        if fact is not None and fact.get("id"):
            shown.add(str(fact["id"]))
        if not pin:
            must[0] = True
        else:
            pinned.add(line)

    def text_of(f: Mapping[str, Any]) -> str:
        return " ".join(clean(str(f.get("text", ""))).split())

    pins = [f for f in all_facts if f.get("pin")]
    pins.sort(key=lambda f: (_pin_seq(f, by_hash), str(f.get("id"))))
    # objective
    for f in active:
        if f.get("category") == "objective" and not f.get("pin"):
            add("objective", f"- {text_of(f)}{_cite(f)}", f)
    if "objective" not in sections:
        user_governing = [
            f
            for f in pins
            if f.get("lifecycle", "active") == "active"
            and not is_request(f)
            and f.get("category") == "objective"
        ]
        for f in user_governing[:3]:
            add(
                "objective",
                f"- seq {_pin_seq(f, by_hash)} (pinned above, {_pin_hash(f)}): "
                f"{first_line(pin_shown_text(f))}",
                pin=True,
            )
        if len(user_governing) > 3:
            add(
                "objective",
                f"- (+{len(user_governing) - 3} more pinned instructions above)",
                pin=True,
            )
    for f in active:
        if f.get("category") == "constraint" and not f.get("pin"):
            add("constraints", f"- {text_of(f)}{_cite(f)}", f)
    for f in active:
        if f.get("category") == "decision" and not f.get("pin"):
            add("decisions", f'- "{text_of(f)}"{_cite(f)}', f)
    # what was decided stays readable once an approval is used (its exact text, docs/design.md 6)
    used = [
        f
        for f in all_facts
        if f.get("category") == "decision"
        and f.get("lifecycle") == "closed"
        and not f.get("pin")
        and f.get("decision_text")
    ]
    used.sort(key=lambda f: (done_seq(f, by_hash) or 0, str(f.get("id"))))
    for f in used[-DECISIONS_USED:]:
        seq = done_seq(f, by_hash)
        at = f", used at seq {seq}" if seq is not None else ", used"
        exact = " ".join(clean(str(f["decision_text"])).split())
        add("decisions", f'- decided: "{exact}"{at}{_cite(f)}', f)

    # done: active successes first (mandatory, in the order they happened), then the newest
    # closed items
    def happened(f: Mapping[str, Any]) -> tuple[int, str]:
        seq = f.get("evidence_seq")
        if not isinstance(seq, int):
            seqs = [
                by_hash[str(x.get("entry"))].seq
                for x in f.get("support", [])
                if isinstance(x, Mapping) and str(x.get("entry")) in by_hash
            ]
            seq = max(seqs, default=0)
        return seq, str(f.get("id"))

    for f in sorted(active, key=happened):
        if f.get("pin") or f.get("category") != "verified_state":
            continue
        if f.get("priority") not in ("P0", "P1") or f.get("outcome") == "failure":
            continue
        if f.get("command_key") == "assistant:end-state":
            continue
        proof = f.get("evidence_entry") or next(
            (s.get("entry") for s in reversed(f.get("support", [])) if isinstance(s, Mapping)),
            "",
        )
        where = f" at seq {f['evidence_seq']}" if isinstance(f.get("evidence_seq"), int) else ""
        add(
            "done",
            f"- done{where}: {clip(text_of(f), ITEM_CHARS)}, evidence {short(str(proof))} "
            f"({f.get('id')})",
            f,
        )
    closed: list[tuple[int, str, str]] = []
    for f in all_facts:
        if f.get("lifecycle") != "closed":
            continue
        seq = done_seq(f, by_hash)
        if is_closed_request(f):
            line = "- " + done_request_line(f, by_hash)
        elif f.get("category") in ("open_obligation", "decision") and _evidence(f):
            verb = "used" if f.get("category") == "decision" else "done"
            at = f" at seq {seq}" if seq is not None else ""
            line = (
                f"- {verb}{at}: {clip(text_of(f), ITEM_CHARS)}, evidence "
                f"{short(_evidence(f)[0])} ({f.get('id')})"
            )
        else:
            continue
        closed.append((seq or 0, str(f.get("id")), line))
    closed.sort()
    if len(closed) > DONE_LINES:
        add("done", f"- (+{len(closed) - DONE_LINES} earlier done items in the ledger)")
    for _, _, line in closed[-DONE_LINES:]:
        add("done", line)
    # in progress / pending
    for f in active:
        if f.get("pin") or f.get("category") != "open_obligation":
            continue
        status = str(f.get("plan_status") or f.get("status") or "").lower()
        section = "in progress" if status in IN_PROGRESS else "pending"
        add(section, f"- {clip(text_of(f), ITEM_CHARS)}{_cite(f)}", f)
    user_seqs = [_pin_seq(f, by_hash) for f in pins if f.get("category") == "objective"]
    last_user = max(user_seqs, default=0)
    for f in active:
        # a question the user answered since (any later user message) awaits nothing
        if f.get("awaits_user") and not f.get("pin") and happened(f)[0] > last_user:
            add("pending", f"- awaiting the user's reply: {clip(text_of(f), ITEM_CHARS)}{_cite(f)}")
    open_requests = [f for f in pins if is_request(f) and f.get("lifecycle", "active") == "active"]
    verbatim, listed, counted = open_requests_split(open_requests)
    for f in sorted(verbatim[1:], key=lambda f: _pin_seq(f, by_hash)):
        add(
            "pending",
            f"- open request, seq {_pin_seq(f, by_hash)} (pinned above, {_pin_hash(f)}): "
            f"{first_line(pin_shown_text(f))}",
            pin=True,
        )
    if counted:
        add(
            "pending",
            f"- (+{len(counted)} older open requests with no completion evidence in the "
            "ledger; search or read the journal for them)",
        )
    for f in sorted(listed, key=lambda f: _pin_seq(f, by_hash)):
        add("pending", f"- open request, not shown above: {request_line(f)}", f)
    # blockers
    for f in active:
        if f.get("pin") or f.get("priority") not in ("P0", "P1"):
            continue
        if f.get("category") == "blocker" or f.get("outcome") == "failure":
            if f.get("category") == "open_obligation":
                continue  # listed as pending
            add("blockers", f"- {clip(text_of(f), ITEM_CHARS)}{_cite(f)}", f)
    # end state
    if end_status:
        add("end state", f"- the source recorded its end status: {end_status}")
    for f in active:
        if str(f.get("result", "")).lower() in END_WORDS and not f.get("pin"):
            add("end state", f"- {clip(text_of(f), ITEM_CHARS)}{_cite(f)}", f)
    ends = [f for f in active if f.get("command_key") == "assistant:end-state"]
    if not ends:  # no end-of-run conclusion: the latest end-of-turn one
        said = [f for f in active if str(f.get("id", "")).startswith("said:")]
        said.sort(key=lambda f: _pin_seq(f, by_hash))
        ends = said[-1:]
    if ends:
        f = ends[-1]
        add("end state", _deliverable(f, by_hash, deliverable_tokens, count, clean), f)
    # next step
    if open_requests:
        f = open_requests[-1]
        add(
            "next step",
            f"- the open request, seq {_pin_seq(f, by_hash)} (pinned above, {_pin_hash(f)}): "
            f"{first_line(pin_shown_text(f))}",
            pin=True,
        )
    else:
        done_at = max((done_seq(f, by_hash) or 0 for f in pins if is_closed_request(f)), default=0)
        legacy = [
            f
            for f in pins
            if f.get("lifecycle", "active") == "active"
            and f.get("category") == "objective"
            # a pin folded before requests were told apart, or a user's governing message
            # that came after the last request was done (rules with a new task in them)
            and f.get("pin_reason") != "ack"
            and ("pin_kind" not in f or (_pin_seq(f, by_hash) > done_at and done_at))
        ]
        if legacy:
            f = legacy[-1]
            seq = _pin_seq(f, by_hash)
            where = (
                "(the objective above)"
                if any(x.startswith(f"- seq {seq} ") for x in sections.get("objective", []))
                else f"(pinned above, {_pin_hash(f)}): {first_line(pin_shown_text(f))}"
            )
            add("next step", f"- the latest user instruction, seq {seq} {where}", pin=True)
        elif any(is_closed_request(f) for f in pins):
            add("next step", "- every request in the ledger is done: wait for the user")
    head = f"{RECORD_MARK}]"
    text = _render(head, sections, set())
    if not sections:
        text += (
            "\n(the ledger holds no objective, decision, done, pending or blocking item yet; "
            "the pins above are the instructions)"
        )
    core = _render(head, sections, pinned) if must[0] else ""
    return Record(text, shown, sections, must[0], core)


def _render(head: str, sections: Mapping[str, list[str]], leave_out: set[str]) -> str:
    """The record's text: ``head``, then each section with a line left (its label first)."""
    lines = [head]
    for name in SECTIONS:
        kept = [x for x in sections.get(name, []) if x not in leave_out]
        if kept:
            lines.append(f"{name}:")
            lines += kept
    return "\n".join(lines)


def _deliverable(
    f: Mapping[str, Any],
    by_hash: Mapping[str, EntryView],
    room: int | None,
    count: Callable[[str], int] | None,
    clean: Callable[[str], str],
) -> str:
    """The last deliverable: the whole text of the entry the end-state fact cites when it fits
    in ``room`` tokens, else a receipt (entry, size, first lines) that ``read`` restores."""
    support = [s.get("entry") for s in f.get("support", []) if isinstance(s, Mapping)]
    entry = next((by_hash[h] for h in support if isinstance(h, str) and h in by_hash), None)
    if entry is None or not entry.text.strip():
        return f"- last deliverable: {clip(str(f.get('text', '')), ITEM_CHARS)}{_cite(f)}"
    text = clean(entry.text.strip())
    if room is None or count is None or count(text) <= room:
        return (
            f"- last deliverable (seq {entry.seq}, entry {short(entry.entry_hash)}), whole:\n{text}"
        )
    head = "\n".join(x for x in text.splitlines() if x.strip())
    lines = head.splitlines()[:RECEIPT_LINES]
    return (
        f"- last deliverable (seq {entry.seq}): {len(entry.text)} characters, receipt: entry "
        f"sha256:{entry.entry_hash} (`read` restores it); first lines:\n"
        + "\n".join(clip(x, ITEM_CHARS) for x in lines)
    )
