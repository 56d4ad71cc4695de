"""Admission against a frozen snapshot and hash-verified reads (pure)."""

import dataclasses

import pytest

from journal_app.chain import prepare_entries
from journal_app.formats.base import tool_call
from recovery_app.snapshot import (
    CHECKS,
    Denied,
    Snapshot,
    StoredChunk,
    StoredEntry,
    admit,
    verify_read,
)

SCOPE = {"tenant": "acme", "session": "s1", "lane": "main", "branch": "main"}
SNAP = Snapshot(**SCOPE, revision=10, journal_id=7)


def _stored(seq=4, chunk_bytes=16):
    p = prepare_entries(
        scope=SCOPE,
        start_seq=seq,
        parent_hash="p" * 64,
        items=[
            tool_call("m1", "exec", {"command": "python manage.py migrate billing 0042 --fake"})
        ],
        chunk_bytes=chunk_bytes,
    )[0]
    return StoredEntry(
        scope=dict(SCOPE), journal_id=7, chunk_bytes=chunk_bytes, seq=p.seq, kind=p.kind,
        role=p.role, tool_call_id=p.tool_call_id, derived=p.derived, body=p.body,
        body_hash=p.body_hash, byte_length=p.byte_length, meta=p.meta, meta_hash=p.meta_hash,
        parent_hash=p.parent_hash, entry_hash=p.entry_hash, tool_name=p.tool_name,
        chunks=[StoredChunk(c.position, c.offset, c.length, c.hash) for c in p.chunks],
    )  # fmt: skip


def test_it_admits_the_same_scope_at_the_same_or_a_later_revision():
    admit(SNAP, scope=dict(SCOPE), revision=10)
    admit(SNAP, scope=dict(SCOPE), revision=11)


@pytest.mark.parametrize("part", ["tenant", "session", "lane", "branch"])
def test_it_refuses_cross_scope_requests(part):
    with pytest.raises(Denied) as exc:
        admit(SNAP, scope={**SCOPE, part: "other"}, revision=10)
    assert exc.value.reason == part and "'other'" in str(exc.value)


def test_it_refuses_a_lower_revision():
    with pytest.raises(Denied) as exc:
        admit(SNAP, scope=dict(SCOPE), revision=9)
    assert exc.value.reason == "revision"


def test_an_intact_read_passes_every_check():
    s = _stored()
    check = verify_read(SNAP, s, lead_seq=4, lead_hash=s.entry_hash)
    assert check.ok and check.failed == [] and set(check.checks) == set(CHECKS)
    assert len(s.chunks) > 2  # several chunks were checked


def _fails(stored, *, lead_seq=4, lead_hash=None, snap=SNAP):
    check = verify_read(snap, stored, lead_seq=lead_seq, lead_hash=lead_hash or stored.entry_hash)
    assert not check.ok
    return check


def test_each_kind_of_tampering_names_its_check():
    s = _stored()
    assert _fails(dataclasses.replace(s, body=s.body.replace("fake", "real"))).failed == [
        "entry_hash", "body_hash", "chunks",
    ]  # fmt: skip
    assert _fails(dataclasses.replace(s, byte_length=s.byte_length + 1)).failed == ["byte_length"]
    chunks = list(s.chunks)
    chunks[1] = dataclasses.replace(chunks[1], hash="0" * 64)
    c = _fails(dataclasses.replace(s, chunks=chunks))
    assert c.failed == ["chunks"] and f"chunk 1: stored offset {chunks[1].offset}" in c.reason
    assert f"hash {'0' * 64}, recomputed" in c.reason
    chunks = list(s.chunks)
    chunks[2] = dataclasses.replace(chunks[2], position=9)
    assert "chunks: chunk 9: stored" in _fails(dataclasses.replace(s, chunks=chunks)).reason
    assert _fails(dataclasses.replace(s, chunks=list(s.chunks)[:-1])).failed == ["chunks"]
    assert _fails(dataclasses.replace(s, meta='{"x":1}')).failed == ["entry_hash", "meta_hash"]


def test_scope_seq_revision_and_raw_are_checked():
    s = _stored()
    other = dataclasses.replace(s, scope={**SCOPE, "lane": "worker"})
    assert "scope" in _fails(other).failed
    assert _fails(s, lead_seq=5).failed == ["seq"]
    assert _fails(s, lead_hash="f" * 64).failed == ["entry_hash"]
    late = _stored(seq=11)
    assert _fails(late, lead_seq=11).failed == ["revision"]
    derived = dataclasses.replace(s, derived=True)
    assert "raw" in _fails(derived).failed
