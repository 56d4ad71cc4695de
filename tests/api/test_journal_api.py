"""The journal over the API: append batches, imports, entries with chunks and verification,
artifact receipts (docs/design.md section 4)."""

from __future__ import annotations

import pytest

from journal_app.hashing import display
from journal_app.models import Artifact, Entry, Journal, Session
from journal_app.services import journal_import

pytestmark = pytest.mark.django_db

SCOPE = "/sessions/run-1/main/main"
TAU = "openai-chat-tool-calls/taubench-gpt4o-airline-task3.json"


def _msg(text: str, role: str = "user") -> dict:
    return {"kind": "message", "role": role, "content": {"text": text}}


def _batch() -> list[dict]:
    return [
        _msg("Never touch the payments tables without asking first.", "system"),
        _msg("Fix the refund rounding."),
        {
            "kind": "tool_call",
            "role": "assistant",
            "tool_call_id": "c1",
            "tool_name": "exec",
            "content": {"name": "exec", "arguments": {"command": "pytest"}},
        },
        {
            "kind": "tool_result",
            "role": "tool",
            "tool_call_id": "c1",
            "content": {"output": "1 failed", "is_error": True, "exit_code": 1},
            "metadata": {"duration_ms": 812},
        },
    ]


def test_it_appends_a_batch_and_creates_the_scope(api, tenant):
    r = api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()})

    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["appended"], body["unchanged"], body["head_seq"]) == (4, 0, 4)
    stored = list(Entry.objects.filter(journal__session__tenant=tenant).order_by("seq"))
    assert [e.kind for e in stored] == ["message", "message", "tool_call", "tool_result"]
    assert [e["entry_hash"] for e in body["entries"]] == [display(e.entry_hash) for e in stored]
    assert body["head_hash"] == display(stored[-1].entry_hash)
    assert stored[3].is_error and stored[3].meta_dict["duration_ms"] == 812


def test_resending_the_same_batch_is_a_no_op(api):
    api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()})

    r = api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()})

    assert r.status_code == 200
    assert (r.json()["appended"], r.json()["unchanged"], r.json()["head_seq"]) == (0, 4, 4)
    assert Entry.objects.count() == 4


def test_an_overlapping_batch_appends_only_the_new_tail(api):
    api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()[:2]})

    r = api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()})

    assert (r.json()["appended"], r.json()["unchanged"]) == (2, 2)
    assert [e["seq"] for e in r.json()["entries"]] == [3, 4]


def test_a_different_entry_at_an_existing_seq_is_a_conflict_and_writes_nothing(api):
    api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()})
    changed = [_msg("Never touch the payments tables.", "system"), _msg("a new tail message")]

    r = api.post(SCOPE + "/entries", {"start_seq": 1, "entries": changed})

    assert r.status_code == 409
    assert r.json()["code"] == "conflict"
    assert r.json()["entry"] == "seq 1"
    assert Entry.objects.count() == 4
    assert Journal.objects.get().head_seq == 4


def test_a_gap_is_refused_and_leaves_no_session_behind(api):
    r = api.post("/sessions/fresh/main/main/entries", {"start_seq": 3, "entries": [_msg("x")]})

    assert r.status_code == 409
    assert r.json() == {
        "code": "gap",
        "message": "seq 3 would leave a gap: the journal's head is 0; nothing written",
        "field": "start_seq",
        "entry": None,
    }
    assert not Session.objects.filter(key="fresh").exists()


def test_an_invalid_entry_names_its_index_and_field(api):
    entries = [_msg("fine"), {"kind": "tool_result", "role": "tool", "content": {"output": "x"}}]

    r = api.post(SCOPE + "/entries", {"start_seq": 1, "entries": entries})

    assert r.status_code == 422
    assert r.json()["code"] == "invalid_entry"
    assert r.json()["field"] == "entries[1].tool_call_id"
    assert r.json()["entry"] == "entries[1]"
    assert not Entry.objects.exists() and not Session.objects.exists()


def test_it_lists_entries_in_pages(api):
    api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()})

    first = api.get(SCOPE + "/entries", limit=3).json()
    rest = api.get(SCOPE + "/entries", after=first["next_after"], limit=3).json()

    assert [e["seq"] for e in first["entries"]] == [1, 2, 3]
    assert first["next_after"] == 3
    assert [e["seq"] for e in rest["entries"]] == [4]
    assert rest["next_after"] is None
    assert "content" not in first["entries"][0]


def test_reading_an_entry_gives_content_chunks_and_a_fresh_verification(api, settings):
    settings.JOURNAL_CHUNK_BYTES = 16
    api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()})
    entry = Entry.objects.get(seq=2)

    r = api.get(SCOPE + "/entries/2")

    body = r.json()
    assert body["content"] == {"text": "Fix the refund rounding."}
    assert body["text"] == "Fix the refund rounding."
    assert body["entry_hash"] == display(entry.entry_hash)
    assert body["parent_hash"] == display(Entry.objects.get(seq=1).entry_hash)
    assert [c["offset"] for c in body["chunks"]] == [c.offset for c in entry.chunks.all()]
    assert sum(c["length"] for c in body["chunks"]) == entry.byte_length
    assert len(body["chunks"]) > 1
    assert body["verification"] == {"ok": True, "problems": []}


def test_an_entry_is_found_by_its_hash_in_either_spelling(api):
    api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()})
    digest = Entry.objects.get(seq=3).entry_hash

    prefixed = api.get(f"/entries/sha256:{digest}")
    bare = api.get(f"/entries/{digest}")

    assert prefixed.status_code == bare.status_code == 200
    assert prefixed.json()["seq"] == bare.json()["seq"] == 3
    assert prefixed.json()["tool_name"] == "exec"


def test_a_missing_entry_is_404(api):
    api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()})

    assert api.get(SCOPE + "/entries/99").status_code == 404
    assert api.get("/entries/sha256:" + "0" * 64).json()["code"] == "not_found"


def test_it_imports_an_uploaded_transcript_once(api, corpus, tenant):
    path = corpus / TAU
    with path.open("rb") as fh:
        first = api.upload("/sessions/tau/main/main/import", {"file": fh})
    with path.open("rb") as fh:
        again = api.upload("/sessions/tau/main/main/import", {"file": fh, "format": "openai-chat"})

    assert first.status_code == 200, first.content
    assert first.json()["format"] == "openai-chat"
    assert first.json()["appended"] == 63
    assert first.json()["counts"]["tool_call"] == 20
    assert (again.json()["appended"], again.json()["unchanged"]) == (0, 63)
    session = Session.objects.get(tenant=tenant, key="tau")
    assert session.source_name == "taubench-gpt4o-airline-task3.json"
    assert Entry.objects.filter(journal__session=session).count() == 63


def test_an_upload_hashes_exactly_like_the_command_line_import(api, corpus, tenant):
    with (corpus / TAU).open("rb") as fh:
        api.upload("/sessions/tau/main/main/import", {"file": fh})
    reference = journal_import(path=corpus / TAU, tenant="acme", session="tau-cli")

    uploaded = Journal.objects.get(session__key="tau")
    # the scope is part of every entry hash, so compare body hashes and the chain length
    assert list(
        Entry.objects.filter(journal=uploaded).order_by("seq").values_list("body_hash", flat=True)
    ) == list(
        Entry.objects.filter(journal=reference.journal)
        .order_by("seq")
        .values_list("body_hash", flat=True)
    )


def test_a_malformed_transcript_names_the_file_and_line_and_writes_nothing(api, tmp_path):
    bad = tmp_path / "broken session.jsonl"
    bad.write_text('{"type": "user", "message": {"role": "user", "content": "hi"}}\n{"type": ')

    with bad.open("rb") as fh:
        r = api.upload("/sessions/broken/main/main/import", {"file": fh})

    assert r.status_code == 422
    body = r.json()
    assert body["code"] == "invalid_transcript"
    assert body["entry"] == "line 2"
    assert body["message"].startswith("broken-session.jsonl, line 2")
    assert "/tmp" not in body["message"]
    assert not Session.objects.exists()


def test_the_journal_verifies_over_the_api(api):
    api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()})

    r = api.get(SCOPE + "/verify")

    assert r.json()["ok"] is True
    assert r.json()["entries"] == 4
    assert r.json()["first_failure"] is None


def test_sessions_and_journals_are_listed_with_their_heads(api):
    api.post(SCOPE + "/entries", {"start_seq": 1, "entries": _batch()})
    api.post("/sessions/run-1/worker-2/main/entries", {"start_seq": 1, "entries": [_msg("hi")]})

    sessions = api.get("/sessions").json()
    one = api.get("/sessions/run-1").json()
    journal = api.get(SCOPE).json()

    assert [s["key"] for s in sessions] == ["run-1"]
    assert sorted((j["lane"], j["head_seq"]) for j in one["journals"]) == [
        ("main", 4),
        ("worker-2", 1),
    ]
    assert journal["head_seq"] == 4
    assert api.get("/sessions/nobody").status_code == 404


def test_oversized_tool_results_come_back_as_artifact_receipts(api, settings):
    settings.ARTIFACT_THRESHOLD_TOKENS = 50
    output = "\n".join(f"line {i}: ERROR disk quota exceeded on /var/data/{i}" for i in range(200))
    entries = [
        {
            "kind": "tool_call",
            "role": "assistant",
            "tool_call_id": "big",
            "tool_name": "exec",
            "content": {"name": "exec", "arguments": {"command": "du"}},
        },
        {
            "kind": "tool_result",
            "role": "tool",
            "tool_call_id": "big",
            "tool_name": "exec",
            "content": {"output": output},
        },
    ]
    api.post(SCOPE + "/entries", {"start_seq": 1, "entries": entries})
    artifact = Artifact.objects.get()

    receipts = api.get(SCOPE + "/artifacts").json()
    receipt = api.get(f"/artifacts/{display(artifact.content_hash)}").json()
    content = api.get(f"/artifacts/{artifact.content_hash}/content").json()
    entry = api.get(SCOPE + "/entries/2").json()

    assert [r["reference"] for r in receipts] == [f"artifact://acme/{artifact.content_hash}"]
    assert receipt["receipt"]["original_size"]["bytes"] == len(output.encode())
    assert receipt["receipt"]["source_tool"] == "exec"
    assert receipt["entries"] == [display(Entry.objects.get(seq=2).entry_hash)]
    assert content["hash_verified"] is True
    assert content["content"] == output
    assert entry["artifact"] == receipt["receipt"]["reference"]
    assert entry["artifact_receipt"]["content_hash"] == display(artifact.content_hash)
