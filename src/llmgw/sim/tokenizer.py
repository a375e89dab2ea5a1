"""A deterministic, cheap tokenizer, so that every count the sim reports is exact.

Text is cut into word pieces: runs of up to six word characters, or one punctuation
mark, each carrying the whitespace before it, plus trailing whitespace on its own. The
cut is lossless (joining the pieces gives the text back) and the same text always gives
the same pieces. A piece's id is a CRC-32 of its bytes folded into the vocabulary, the
same in every process, so prefix-cache block hashes agree across replicas the way a
real model's do. Usage counts, `/tokenize` and KV-block arithmetic all use this class.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

_PIECE = re.compile(r"\s*(?:\w{1,6}|[^\w\s])|\s+")
# Ids below this are reserved for special tokens, as real vocabularies do.
_FIRST_ID = 256
# Bounds the memo so a long-running sim fed random text does not grow without limit.
_MEMO_LIMIT = 1 << 20


class Tokenizer:
    """Encodes text to token ids and back; one per engine, memoising pieces it has seen."""

    def __init__(self, vocab_size: int) -> None:
        if vocab_size <= _FIRST_ID:
            raise ValueError(f"vocab_size must exceed {_FIRST_ID}")
        self.vocab_size = vocab_size
        self._span = vocab_size - _FIRST_ID
        self._ids: dict[str, int] = {}
        self._pieces: dict[int, str] = {}

    @staticmethod
    def pieces(text: str) -> list[str]:
        """The word pieces of `text`, in order; `"".join(pieces(t)) == t`."""
        return _PIECE.findall(text)

    def piece_id(self, piece: str) -> int:
        """The id of one piece (stable across processes and runs)."""
        found = self._ids.get(piece)
        if found is not None:
            return found
        token = _FIRST_ID + zlib.crc32(piece.encode()) % self._span
        if len(self._ids) >= _MEMO_LIMIT:
            self._ids.clear()
            self._pieces.clear()
        self._ids[piece] = token
        self._pieces.setdefault(token, piece)
        return token

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`."""
        ids = self._ids
        out: list[int] = []
        append = out.append
        for piece in _PIECE.findall(text):
            token = ids.get(piece)
            append(token if token is not None else self.piece_id(piece))
        return out

    def count(self, text: str) -> int:
        """How many tokens `text` is, without building the id list."""
        return len(_PIECE.findall(text))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids this tokenizer has produced; an id it never made reads as `<unk>`."""
        pieces = self._pieces
        return "".join(pieces.get(token, "<unk>") for token in ids)
