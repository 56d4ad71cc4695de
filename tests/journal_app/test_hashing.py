import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal_app.chain import ArtifactFigures, figures_hash
from journal_app.chunking import chunk, chunk_bounds
from journal_app.hashing import (
    CanonicalisationError,
    body_hash,
    canonical_body,
    canonical_record,
    display,
    entry_hash,
    entry_header,
    header_hash,
    strip_prefix,
)


def test_it_hashes_bodies_like_git_blobs():
    body = b"hello\n"
    # `printf 'hello\n' | git hash-object --stdin` uses sha1; the same rule with sha256:
    expected = hashlib.sha256(b"blob 6\0hello\n").hexdigest()
    assert body_hash(body) == expected


def test_it_canonicalises_key_order_but_keeps_text_verbatim():
    a = canonical_body({"b": 1, "a": "Ünïcode \u2028 tab\t"})
    b = canonical_body({"a": "Ünïcode \u2028 tab\t", "b": 1})
    assert a == b
    assert a.startswith(b'{"a":"')
    assert "Ünïcode \u2028 tab".encode() in a


def test_it_refuses_lone_surrogates_and_nan():
    with pytest.raises(CanonicalisationError):
        canonical_body({"text": "\ud800"})
    with pytest.raises(CanonicalisationError):
        canonical_body({"x": float("nan")})


def test_entry_hash_changes_with_any_header_field():
    header = {"seq": 1, "kind": "message", "parent_hash": ""}
    base = entry_hash(header)
    assert entry_hash({**header, "seq": 2}) != base
    assert entry_hash({**header, "parent_hash": "00"}) != base
    assert entry_hash(dict(reversed(list(header.items())))) == base


def test_display_and_strip_prefix_round_trip():
    h = "ab" * 32
    assert display(h) == "sha256:" + h
    assert display(display(h)) == "sha256:" + h
    assert strip_prefix("SHA256:" + h.upper()) == h


def test_chunks_cover_the_body_and_never_split_utf8():
    body = ("é" * 3000 + "x" * 5000).encode()
    bounds = chunk_bounds(body, 4096)
    assert sum(n for _, n in bounds) == len(body)
    assert [o for o, _ in bounds] == sorted(o for o, _ in bounds)
    for off, n in bounds:
        body[off : off + n].decode("utf-8")  # each chunk decodes on its own
    # "é" is two bytes and 4096 is even: the first cut falls on a character boundary
    assert bounds[0] == (0, 4096)
    specs = chunk(body, 4096)
    assert (
        specs[1].offset == 4096
        and specs[1].hash == hashlib.sha256(body[4096 : 4096 + specs[1].length]).hexdigest()
    )


def test_chunk_moves_cut_back_inside_a_multibyte_sequence():
    body = b"a" + "€".encode() * 3  # 1 + 9 bytes; a cut at 4 lands inside the second euro sign
    assert chunk_bounds(body, 4) == [(0, 4), (4, 3), (7, 3)]
    assert chunk_bounds(b"", 4096) == [(0, 0)]


# -- the direct encoders agree with the general path -------------------------
_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from('"\\\n\t\x00\x1f/é😀'),
    max_size=20,
)
_INT = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)


@settings(max_examples=300, deadline=None)
@given(
    scope=st.tuples(_TEXT, _TEXT, _TEXT, _TEXT),
    seq=_INT,
    strs=st.tuples(_TEXT, _TEXT, _TEXT, _TEXT, _TEXT, _TEXT, _TEXT),
    byte_length=_INT,
    derived=st.booleans(),
)
def test_header_hash_is_entry_hash_of_the_header(scope, seq, strs, byte_length, derived):
    kind, role, call, b_hash, p_hash, m_hash, tool = strs
    fields = dict(
        tenant=scope[0], session=scope[1], lane=scope[2], branch=scope[3], seq=seq,
        kind=kind, role=role, tool_call_id=call, body_hash=b_hash, byte_length=byte_length,
        parent_hash=p_hash, meta_hash=m_hash, derived=derived, tool_name=tool,
    )  # fmt: skip
    assert header_hash(**fields) == entry_hash(entry_header(**fields))


def test_header_hash_takes_the_general_path_for_other_types_and_refuses_surrogates():
    fields = dict(
        tenant="t", session="s", lane="main", branch="main", seq=1, kind="message",
        role="user", tool_call_id="", body_hash="a", byte_length=1, parent_hash="",
        meta_hash="m", derived=False,
    )  # fmt: skip
    for bad in ({"seq": 2**60}, {"kind": "\ud800"}):  # beyond 2**53; a lone surrogate
        with pytest.raises(CanonicalisationError) as fast:
            header_hash(**{**fields, **bad})
        with pytest.raises(CanonicalisationError) as general:
            entry_hash(entry_header(**{**fields, **bad}))
        assert str(fast.value) == str(general.value)
    assert header_hash(**{**fields, "seq": True}) == entry_hash(
        entry_header(**{**fields, "seq": True})
    )


@settings(max_examples=300, deadline=None)
@given(
    e_hash=_TEXT, count=_INT, source=_TEXT, ref=_TEXT,
    artifact=st.none() | st.builds(ArtifactFigures, _TEXT, _INT, _INT, _TEXT),
)  # fmt: skip
def test_figures_hash_is_the_hash_of_the_canonical_record(e_hash, count, source, ref, artifact):
    record = {
        "entry_hash": e_hash,
        "token_count": count,
        "token_source": source,
        "source_ref": ref,
        "artifact": None
        if artifact is None
        else {
            "content_hash": artifact.content_hash,
            "byte_size": artifact.byte_size,
            "token_count": artifact.token_count,
            "token_source": artifact.token_source,
        },
    }
    expected = hashlib.sha256(canonical_record(record)).hexdigest()
    got = figures_hash(
        entry_hash=e_hash, token_count=count, token_source=source, source_ref=ref,
        artifact=artifact,
    )  # fmt: skip
    assert got == expected
