import hashlib

import pytest

from journal_app.chunking import chunk, chunk_bounds
from journal_app.hashing import (
    CanonicalisationError,
    body_hash,
    canonical_body,
    display,
    entry_hash,
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
