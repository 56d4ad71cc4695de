"""Token counting with tiktoken, offline (docs/design.md sections 2 and 4, "Token figures").

Pure module. tiktoken downloads its rank files at run time, which fails without network,
so the project ships ``o200k_base`` and ``cl100k_base`` gzip-compressed in
``journal_app/data/`` and builds the :class:`tiktoken.Encoding` from them, checking the
SHA-256 of the decompressed bytes against tiktoken's published expected hash.
Pattern strings and special tokens are tiktoken's own (``tiktoken_ext.openai_public``).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from functools import lru_cache
from pathlib import Path

import tiktoken

DATA_DIR = Path(__file__).parent / "data"

_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PAT = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""

#: name -> (file, sha256 of decompressed bytes, pattern, special tokens)
ENCODINGS: dict[str, tuple[str, str, str, dict[str, int]]] = {
    "o200k_base": (
        "o200k_base.tiktoken.gz",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PAT,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": (
        "cl100k_base.tiktoken.gz",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PAT,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}


class TokenizerDataError(RuntimeError):
    """The bundled rank file is missing or its hash does not match tiktoken's."""


def _parse_ranks(raw: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@lru_cache(maxsize=4)
def get_encoding(name: str = "o200k_base") -> tiktoken.Encoding:
    """Build (once per process) the named encoding from the bundled file.

    Args:
        name: ``"o200k_base"`` or ``"cl100k_base"``.

    Raises:
        KeyError: unknown encoding name.
        TokenizerDataError: the file is missing or its SHA-256 differs from the expected hash.
    """
    filename, expected, pattern, specials = ENCODINGS[name]
    path = DATA_DIR / filename
    try:
        raw = gzip.decompress(path.read_bytes())
    except OSError as exc:
        raise TokenizerDataError(f"cannot read {path}: {exc}") from exc
    actual = hashlib.sha256(raw).hexdigest()
    if actual != expected:
        raise TokenizerDataError(f"{path}: sha256 {actual} does not match expected {expected}")
    return tiktoken.Encoding(
        name=name, pat_str=pattern, mergeable_ranks=_parse_ranks(raw), special_tokens=specials
    )


def count_tokens(text: str, encoding: str = "o200k_base") -> int:
    """Number of tokens in ``text`` (special-token strings count as ordinary text)."""
    if not text:
        return 0
    return len(get_encoding(encoding).encode_ordinary(text))


def source_label(encoding: str = "o200k_base") -> str:
    """The label stored next to a counted figure: ``"tiktoken:<encoding>"``."""
    return f"tiktoken:{encoding}"
