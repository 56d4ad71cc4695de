"""The lexical analyst (pure): plans, claims with statuses, exact-quote citation checks."""

import json

from journal_app.chunking import chunk
from journal_app.hashing import canonical_body
from recovery_app.analyst import ModelAnalyst, analyse
from recovery_app.citations import (
    ReadView,
    check_citation,
    check_claims,
    citation,
    complete_citations,
    locate_quote,
)
from recovery_app.query_plan import plan_queries, suggest_terms


def view(
    seq, kind, content, *, role="assistant", call="", tool="", error=False, matched=("q",), **kw
):
    body = canonical_body(content).decode()
    chunks = [(c.position, c.offset, c.length) for c in chunk(body.encode(), 16)]
    return ReadView(
        seq=seq, entry_hash=f"{seq:064x}", kind=kind, role=role, content=content, body=body,
        chunks=chunks, tool_call_id=call, tool_name=tool, is_error=error, matched=list(matched), **kw,
    )  # fmt: skip


CALL = view(
    4,
    "tool_call",
    {"name": "exec", "arguments": {"command": "migrate billing 0042 --fake"}},
    call="m1",
    tool="exec",
)
RESULT = view(
    5,
    "tool_result",
    {"output": 'Applying "0042"...\nFAKED', "is_error": False},
    role="tool",
    call="m1",
    tool="exec",
)


def test_quotes_are_located_in_their_json_form_byte_for_byte():
    start, end = locate_quote(RESULT.body, 'Applying "0042"...\nFAKED')
    assert RESULT.body.encode()[start:end] == b'Applying \\"0042\\"...\\nFAKED'
    c = citation(RESULT, 'Applying "0042"...')
    assert check_citation(c, {RESULT.entry_hash: RESULT}) == ""
    assert (
        c["chunks"]
        == [p for p, off, ln in RESULT.chunks if off < end and off + ln > start][: len(c["chunks"])]
    )


def test_a_citation_is_refused_for_each_reason():
    reads = {CALL.entry_hash: CALL}
    good = citation(CALL, "migrate billing 0042 --fake")
    assert check_citation(good, reads) == ""
    assert "was not read" in check_citation({**good, "entry": "f" * 64}, reads)
    assert "does not occur byte for byte" in check_citation(
        {**good, "quote": "migrate billing 0043"}, reads
    )
    assert "not a byte range" in check_citation({**good, "range": [0, 10**6]}, reads)
    assert "not the chunks covering" in check_citation({**good, "chunks": [0]}, reads)
    summary = view(
        9, "event", {"type": "summary", "text": "migrate billing 0042 --fake"}, derived=True
    )
    s = citation(summary, "migrate billing 0042 --fake")
    assert "summary or compaction marker" in check_citation(s, {summary.entry_hash: summary})
    bad = view(10, "message", {"text": "x y"}, verified=False, reason="chunks: chunk 0 ...")
    assert "failed verification: chunks" in check_citation(
        citation(bad, "x y"), {bad.entry_hash: bad}
    )
    secret = view(11, "message", {"text": "key sk-abcdefghijklmnopqrstuvwxyz0123"})
    sc = citation(secret, "key sk-abcdefghijklmnopqrstuvwxyz0123")
    assert "read filter removes" in check_citation(sc, {secret.entry_hash: secret})


def test_claims_are_marked_current_historical_reported_unresolved():
    old_call = view(
        2,
        "tool_call",
        {"name": "exec", "arguments": {"command": "pytest q"}},
        call="t0",
        tool="exec",
    )
    old = view(
        3,
        "tool_result",
        {"output": "q: 3 failed", "is_error": True},
        role="tool",
        call="t0",
        tool="exec",
        error=True,
    )
    new_call = view(
        6,
        "tool_call",
        {"name": "exec", "arguments": {"command": "pytest q"}},
        call="t1",
        tool="exec",
    )
    new = view(
        7,
        "tool_result",
        {"output": "q: 8 passed", "is_error": False},
        role="tool",
        call="t1",
        tool="exec",
    )
    said = view(8, "message", {"text": "I think q is fixed now."})
    hanging = view(
        9,
        "tool_call",
        {"name": "deploy", "arguments": {"target": "q prod"}},
        call="d1",
        tool="deploy",
    )
    claims = analyse(["q"], [old_call, old, new_call, new, said, hanging])
    status = {c["citations"][0]["seq"]: c["status"] for c in claims}
    assert status == {2: "historical", 6: "current", 8: "reported", 9: "unresolved"}
    assert "failed" in claims[0]["claim"] and len(claims[0]["citations"]) == 2
    accepted, rejected = check_claims(
        claims, {v.entry_hash: v for v in [old_call, old, new_call, new, said, hanging]}
    )
    assert len(accepted) == 4 and rejected == []


def test_unverified_and_derived_reads_make_no_claims():
    tampered = view(4, "message", {"text": "q was done"}, verified=False)
    summary = view(5, "event", {"type": "summary", "text": "q was done"}, derived=True)
    assert analyse(["q"], [tampered, summary]) == []


def test_quotes_stay_clear_of_secrets():
    v = view(
        4,
        "tool_result",
        {"output": "q uses OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz12 ok", "is_error": False},
        role="tool",
    )
    claims = analyse(["q"], [v])
    quote = claims[0]["citations"][0]["quote"]
    assert "sk-" not in quote and quote.startswith("q uses")


def test_plans_go_from_identifiers_to_broader_words():
    plan = plan_queries(
        "The migration 0042_add_refund_index may have been wrong.",
        ["0042_add_refund_index", "--fake"],
        ["billing/refunds.py"],
    )
    assert plan[0] == ['"0042 add refund index"', "fake"]
    # distinctive words of the question, two per query, then the ledger's suggestion
    assert plan[1] == ["0042 migration", "refund index", '"billing refunds py"']
    assert plan[2] == ["0042"]
    assert plan_queries("use the same method as last time") == []


def test_ledger_notes_only_suggest_identifiers_near_the_question():
    notes = ["Applied migration 0042_add_refund_index (routine).", "Read src/other.py."]
    assert suggest_terms("the refund migration was wrong", notes) == ["0042_add_refund_index"]


class FakeClient:
    def __init__(self, text):
        self.text, self.calls = text, []

    def complete(self, **kwargs):
        self.calls.append(kwargs)
        return type("Completion", (), {"text": self.text})()


def test_the_model_analyst_asks_once_and_its_citations_are_checked():
    reply = {
        "claims": [
            {
                "claim": "faked",
                "status": "historical",
                "citations": [{"entry": "sha256:" + CALL.entry_hash, "quote": "0042 --fake"}],
            }
        ]
    }
    client = FakeClient(json.dumps(reply))
    model = ModelAnalyst(client, "m")
    claims = model.propose("what flag?", [{"entry": CALL.entry_hash, "text": "..."}])
    assert model.requests == 1 and client.calls[0]["schema_name"] == "recovery_claims"
    assert "never cite it" in client.calls[0]["messages"][0]["content"]
    done = complete_citations(claims, {CALL.entry_hash: CALL})
    accepted, rejected = check_claims(done, {CALL.entry_hash: CALL})
    assert accepted and accepted[0]["citations"][0]["range"] and rejected == []
    assert ModelAnalyst(FakeClient("not json"), "m").propose("q", []) == []
