import gzip
import hashlib

import pytest

from journal_app import tokens


def test_it_counts_with_the_bundled_o200k_file():
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_tokens("") == 0
    # special-token text counts as ordinary text instead of raising
    assert tokens.count_tokens("<|endoftext|>") > 1


def test_bundled_files_match_tiktokens_expected_hashes():
    for name, (filename, expected, _, _) in tokens.ENCODINGS.items():
        raw = gzip.decompress((tokens.DATA_DIR / filename).read_bytes())
        assert hashlib.sha256(raw).hexdigest() == expected, name


def test_it_refuses_a_rank_file_with_the_wrong_hash(tmp_path, monkeypatch):
    (tmp_path / "o200k_base.tiktoken.gz").write_bytes(gzip.compress(b"aGVsbG8= 0\n"))
    monkeypatch.setattr(tokens, "DATA_DIR", tmp_path)
    tokens.get_encoding.cache_clear()
    try:
        with pytest.raises(tokens.TokenizerDataError, match="does not match"):
            tokens.get_encoding("o200k_base")
    finally:
        monkeypatch.undo()
        tokens.get_encoding.cache_clear()


def test_cl100k_differs_from_o200k():
    text = "def refund_amount(amount: Decimal) -> Decimal:"
    assert tokens.get_encoding("cl100k_base").encode_ordinary(text) != tokens.get_encoding(
        "o200k_base"
    ).encode_ordinary(text)
