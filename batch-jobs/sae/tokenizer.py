"""The local language model's tokenizer: frequent word pieces, with UTF-8 bytes for the rest.

Text is cut into pieces by one regular expression (a word with its leading space, one digit, one
punctuation mark with its leading space, a newline, a run of other white space), the way GPT-2's
pre-tokenizer cuts it. The `vocab_size - 257` pieces seen most often in the training text (at
least twice; ties broken by the piece's text, so the same corpus always gives the same
vocabulary) are tokens of their own; any other piece is spelled as its UTF-8 bytes, each a token.
So every text encodes, nothing is ever unknown, and decode(encode(text)) == text.

Why not byte-pair encoding: the features a sparse autoencoder finds are read by people and, in
the non-LLM explainer, matched token by token; whole words make both legible ("fires on ' def'"),
where BPE's fragments of a 4,000-token vocabulary would not. No tokenizer library is available to
the jobs here (Debian carries none); this one is 100 lines and deterministic.

Ids: 0 begins every sequence, 1-256 are the bytes 0-255, 257 on are the pieces in vocabulary
order. Saved as tokenizer.json: {"format": "sae-tokenizer-v1", "pieces": [...]}.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Iterable

TOKENIZER_FORMAT = "sae-tokenizer-v1"
BOS = 0
BYTE_BASE = 1
PIECE_BASE = 257
# A word (letters) with its leading space; one digit; one other mark with its leading space; an
# underscore; a newline; any other run of white space.
PIECE = re.compile(r" ?[^\W\d_]+| ?\d| ?[^\w\s]| ?_|\n|[^\S\n]+")


class TokenizerError(ValueError):
    """A tokenizer file or setting is invalid."""


def pieces_of(text: str) -> list[str]:
    """The pieces of a text, in order; joined they give the text back."""
    return PIECE.findall(text)


class Tokenizer:
    bos = BOS

    def __init__(self, pieces: list[str]):
        if len(set(pieces)) != len(pieces):
            raise TokenizerError("pieces: must hold each piece once")
        self.pieces = list(pieces)
        self.index = {p: PIECE_BASE + i for i, p in enumerate(self.pieces)}

    @property
    def vocab_size(self) -> int:
        return PIECE_BASE + len(self.pieces)

    @staticmethod
    def train(texts: Iterable[str], vocab_size: int) -> "Tokenizer":
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < PIECE_BASE:
            raise TokenizerError(f"vocab_size: must be an integer of at least {PIECE_BASE} (got {vocab_size!r})")
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(pieces_of(text))
        frequent = sorted((p for p, c in counts.items() if c >= 2 and len(p.encode()) > 1), key=lambda p: (-counts[p], p))
        return Tokenizer(frequent[: vocab_size - PIECE_BASE])

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in pieces_of(text):
            known = self.index.get(piece)
            if known is not None:
                ids.append(known)
            else:
                ids.extend(BYTE_BASE + b for b in piece.encode("utf-8"))
        return ids

    def token_bytes(self, token: int) -> bytes:
        if token == BOS:
            return b""
        if BYTE_BASE <= token < PIECE_BASE:
            return bytes([token - BYTE_BASE])
        if PIECE_BASE <= token < self.vocab_size:
            return self.pieces[token - PIECE_BASE].encode("utf-8")
        raise TokenizerError(f"token: {token} is outside the vocabulary of {self.vocab_size}")

    def decode(self, ids: Iterable[int]) -> str:
        return b"".join(self.token_bytes(t) for t in ids).decode("utf-8", errors="replace")

    def token_text(self, token: int) -> str:
        """One token as a person reads it: a piece as itself, a byte as its character when it is
        printable ASCII, else as <0xNN> (a byte of a longer UTF-8 character)."""
        if BYTE_BASE <= token < PIECE_BASE:
            byte = token - BYTE_BASE
            return chr(byte) if 32 <= byte < 127 or byte in (9, 10) else f"<0x{byte:02X}>"
        return self.token_bytes(token).decode("utf-8", errors="replace")

    def to_json(self) -> dict:
        return {"format": TOKENIZER_FORMAT, "pieces": self.pieces}

    @staticmethod
    def from_json(data: object) -> "Tokenizer":
        if not isinstance(data, dict) or data.get("format") != TOKENIZER_FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise TokenizerError(f"tokenizer.json: format must be {TOKENIZER_FORMAT!r} (got {found!r})")
        pieces = data.get("pieces")
        if not isinstance(pieces, list) or not all(isinstance(p, str) and p for p in pieces):
            raise TokenizerError("tokenizer.json: pieces must be a list of non-empty strings")
        return Tokenizer(pieces)

    def save(self, path: str) -> None:
        with open(path, "w") as out:
            json.dump(self.to_json(), out, ensure_ascii=False)

    @staticmethod
    def load(path: str) -> "Tokenizer":
        with open(path) as source:
            return Tokenizer.from_json(json.load(source))
