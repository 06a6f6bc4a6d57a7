"""Hashed word features of a document, the input of the refinery's quality classifier.

THE SHARED DEFINITION (v2). shared/refinery/features.ts computes the same thing for the Lambdas
that score documents; both files carry this text, and test/unit/refinery-classifier.test.ts checks
that both give identical indices and weights for the same texts.

1. Normalise: Unicode NFKC, then lower case by Unicode's default full case mapping with no locale
   (Python's str.lower, JavaScript's String.prototype.toLowerCase).
2. Tokens: the maximal runs of code points whose General Category is a letter (L*), a mark (M*)
   or a number (N*); every other code point separates tokens. Marks belong to words so that
   scripts with vowel signs (Devanagari, Thai) are not cut inside every word. Only the first
   `max_tokens` tokens are used.
3. Words: every token (unigram) of the first `max_tokens` tokens; no bigrams.
4. Bucket: FNV-1a 32-bit (offset basis 0x811C9DC5, prime 0x01000193) over the word's UTF-8
   bytes, modulo `buckets`. Tokens never hold a surrogate, so the UTF-8 is always well defined.
5. Weights: presence. Every bucket that at least one word falls in has weight 1.0 (exact in
   float32 in both languages), however often its words occur. A document is its (bucket, 1.0)
   pairs in ascending bucket order; a document without tokens has none.

Why presence of unigrams (v1 was unigrams + bigrams weighted by their frequency, count / total):
the model's weighted sum is then a sum over the distinct words a document holds, so evidence that
a document is educational (one more subject word, one more "for example") adds to the score
instead of being diluted by every other word of the page, as a frequency (a mean) does. Repeating
a word adds nothing, so stuffing a page with one keyword does not raise it. Bigrams doubled the
features a few hundred labels must pin down and, measured on the smoke run's labels, lowered
held-out agreement (model.py's header has the figures). The sum grows with the number of distinct
words, which `max_tokens` bounds; the labeler scores a fixed-size extract, so that is the length
the model is trained and applied at.

Unicode versions: Python 3.11's database is Unicode 14.0, Node 22's is newer. For every code point
assigned in Unicode 14.0 the two agree on the category, the lower case and the NFKC form (checked
over the whole code space when this was written); a character assigned later can be a token
character in one language and a separator in the other. Such characters are a vanishing part of
web text, and a difference only moves a few words of the documents that hold them.

Speed: FNV-1a is inherently byte-serial, so hashing runs over all words of a document at once
with numpy, one step per byte position; the rare word longer than VECTOR_STEPS bytes finishes in
plain Python. `fnv1a32` is the naive reference the tests compare against.
"""
from __future__ import annotations

import json
import math
import re
import sys
import unicodedata
from dataclasses import dataclass

import numpy as np

FNV_OFFSET_BASIS = 0x811C9DC5
FNV_PRIME = 0x01000193
MAX_BUCKETS = 1 << 22
"""The most buckets allowed: 2^22 rows of a 16-wide float32 table is already 256 MiB."""
MAX_TOKENS_LIMIT = 100_000
VECTOR_STEPS = 64
"""Byte positions hashed with numpy; longer words (long URLs, base64 runs) finish in Python."""

DEFAULT_BUCKETS = 1 << 18
DEFAULT_MAX_TOKENS = 2000


def _positive_int(name: str, value: object, upper: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= upper:
        raise ValueError(f"{name}: must be an integer from 1 to {upper} (got {value!r})")
    return int(value)


@dataclass(frozen=True)
class FeatureSettings:
    """What turns a text into features. A model is only valid with the settings it was trained
    with; the job writes them next to the model."""

    buckets: int = DEFAULT_BUCKETS
    """Hash buckets (rows of the model's embedding table), 2 to 2^22."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    """Tokens read from the start of each document, 1 to 100,000."""

    def __post_init__(self) -> None:
        _positive_int("buckets", self.buckets, MAX_BUCKETS)
        if self.buckets < 2:
            raise ValueError(f"buckets: must be an integer from 2 to {MAX_BUCKETS} (got {self.buckets!r})")
        _positive_int("maxTokens", self.max_tokens, MAX_TOKENS_LIMIT)

    def to_dict(self) -> dict:
        """The camelCase form the job writes and shared/refinery/features.ts reads."""
        return {"buckets": self.buckets, "maxTokens": self.max_tokens}


def fnv1a32(data: bytes) -> int:
    """FNV-1a, 32 bits, of `data` (the naive reference, one byte at a time)."""
    h = FNV_OFFSET_BASIS
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFF
    return h


_token_patterns: tuple[re.Pattern[str], re.Pattern[str]] | None = None


def _class_ranges(low: int, high: int) -> str:
    """The code points of [low, high) whose category is L*, M* or N*, as a character-class body."""
    category = unicodedata.category
    parts: list[str] = []
    start = -1
    for cp in range(low, high + 1):
        inside = cp < high and category(chr(cp))[0] in "LMN"
        if inside and start < 0:
            start = cp
        elif not inside and start >= 0:
            end = cp - 1
            parts.append(re.escape(chr(start)) if start == end else f"{re.escape(chr(start))}-{re.escape(chr(end))}")
            start = -1
    return "".join(parts)


def _token_res() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Patterns for runs of L*, M* and N* code points: (Basic Multilingual Plane only, all).

    Python's re has no \\p{...} classes, so the class is listed as ranges, built once from
    unicodedata on first use (about 0.1 s). The BMP-only pattern is compiled to a bitmap and
    runs about 3x faster than the full one, which is kept for texts with astral characters.
    """
    global _token_patterns
    if _token_patterns is None:
        bmp = _class_ranges(0, 0x10000)
        astral = _class_ranges(0x10000, 0x110000)
        _token_patterns = (re.compile(f"[{bmp}]+"), re.compile(f"[{bmp}{astral}]+"))
    return _token_patterns


def normalize(text: str) -> str:
    """Step 1: NFKC, then lower case."""
    return unicodedata.normalize("NFKC", text).lower()


def tokenize(text: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> list[str]:
    """Steps 1 and 2: the first `max_tokens` tokens of `text`."""
    if max_tokens < 1:
        return []
    normalized = normalize(text)
    bmp, full = _token_res()
    pattern = full if normalized and max(normalized) > "\uffff" else bmp
    # Scan a growing prefix so a huge document costs what its first tokens cost. Once the
    # prefix holds more than max_tokens tokens, the first max_tokens of them are whole: another
    # token starts after them, so none can continue past the cut.
    limit = 16 * max_tokens
    while True:
        tokens = pattern.findall(normalized, 0, limit)
        if len(tokens) > max_tokens or limit >= len(normalized):
            return tokens[:max_tokens]
        limit *= 4


def words(tokens: list[str]) -> list[str]:
    """Step 3: the words whose buckets are the features: the tokens themselves."""
    return list(tokens)


def _fnv1a32_spans(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """FNV-1a of buf[starts[i] : starts[i] + lengths[i]] for every i, as uint32."""
    count = len(starts)
    if count == 0:
        return np.zeros(0, dtype=np.uint32)
    # Longest first: at byte position k the spans still running are a prefix of the order.
    order = np.argsort(-lengths, kind="stable")
    s = starts[order]
    n = lengths[order]
    h = np.full(count, FNV_OFFSET_BASIS, dtype=np.uint32)
    prime = np.uint32(FNV_PRIME)
    longest = int(n[0])
    running = np.searchsorted(-n, -np.arange(min(longest, VECTOR_STEPS)), side="left")
    for k, m in enumerate(running.tolist()):
        # uint32 arithmetic wraps modulo 2^32, which is exactly FNV's arithmetic.
        h[:m] = (h[:m] ^ buf[s[:m] + k]) * prime
    for i in range(int(running[-1]) if longest > VECTOR_STEPS else 0):
        if n[i] <= VECTOR_STEPS:
            break
        value = int(h[i])
        for byte in buf[s[i] + VECTOR_STEPS: s[i] + n[i]].tobytes():
            value = ((value ^ byte) * FNV_PRIME) & 0xFFFFFFFF
        h[i] = value
    out = np.empty(count, dtype=np.uint32)
    out[order] = h
    return out


def word_hashes(tokens: list[str]) -> np.ndarray:
    """Step 4 before the modulo: FNV-1a of every word of `tokens`, in order."""
    n = len(tokens)
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    # One UTF-8 buffer "t0 t1 t2 ...": word i is the span of token i.
    lengths = np.fromiter((len(t.encode("utf-8")) for t in tokens), dtype=np.int64, count=n)
    buf = np.frombuffer(" ".join(tokens).encode("utf-8"), dtype=np.uint8)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1] + 1, out=starts[1:])
    return _fnv1a32_spans(buf, starts, lengths)


def document_features(text: str, settings: FeatureSettings = FeatureSettings()) -> tuple[np.ndarray, np.ndarray]:
    """(indices int64, weights float32) of `text`: its distinct buckets in ascending order, each
    with weight 1.0 (steps 1-5). Both are empty for a text without tokens."""
    hashes = word_hashes(tokenize(text, settings.max_tokens))
    indices = np.unique(hashes.astype(np.int64) % settings.buckets)
    return indices, np.ones(len(indices), dtype=np.float32)


def document_features_naive(text: str, settings: FeatureSettings = FeatureSettings()) -> tuple[list[int], list[float]]:
    """The same as document_features, one word and one byte at a time: the tests' reference."""
    buckets = {fnv1a32(word.encode("utf-8")) % settings.buckets for word in words(tokenize(text, settings.max_tokens))}
    indices = sorted(buckets)
    return indices, [1.0] * len(indices)


def pad_batch(features: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Documents' features as the model's inputs: indices int64 [batch, L] and weights float32
    [batch, L], L the most pairs of any document (at least 1), padded with index 0 and weight 0,
    which adds nothing to the weighted sum."""
    width = max([1] + [len(ix) for ix, _ in features])
    indices = np.zeros((len(features), width), dtype=np.int64)
    weights = np.zeros((len(features), width), dtype=np.float32)
    for row, (ix, w) in enumerate(features):
        indices[row, : len(ix)] = ix
        weights[row, : len(w)] = w
    return indices, weights


def main(argv: list[str]) -> int:
    """CLI: reads {"texts": [...], "buckets": int, "maxTokens": int} as JSON on stdin and writes
    [{"tokens": [...], "indices": [...], "weights": [...]}, ...] as JSON on stdout (weights as the
    float32 values, exactly). Used by the cross-language test."""
    if argv:
        print("usage: features.py < {\"texts\": [...], \"buckets\": N, \"maxTokens\": N}", file=sys.stderr)
        return 2
    request = json.load(sys.stdin)
    settings = FeatureSettings(buckets=request.get("buckets", DEFAULT_BUCKETS),
                               max_tokens=request.get("maxTokens", DEFAULT_MAX_TOKENS))
    out = []
    for text in request["texts"]:
        indices, weights = document_features(text, settings)
        out.append({"tokens": tokenize(text, settings.max_tokens), "indices": indices.tolist(),
                    "weights": [float(w) for w in weights]})
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
