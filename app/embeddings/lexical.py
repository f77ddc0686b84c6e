"""Offline default embedder: hashed bag of stemmed words.

This is *lexical*, not semantic: texts are close when they share (stemmed) words, so "reset my
password" finds "how to reset a password" but not "recover your login credentials". It needs no
model download, no network and no GPU, is deterministic across processes and machines, and embeds
thousands of chunks per second, which makes it the default for offline installs and tests.

Tokenisation is tuned for English (stop words, suffix stripping); other languages still work by
exact word match. Scripts written without spaces (Chinese, Japanese) become one term per run of
characters and match poorly.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from hashlib import blake2b

import numpy as np
import numpy.typing as npt

from app.embeddings.base import MAX_INDEXABLE_DIMENSIONS, normalise_rows

MIN_DIMENSIONS = 16

# Bigrams add a little phrase sensitivity ("reset password" vs. the two words far apart) without
# drowning the unigrams that carry most of the signal.
_BIGRAM_WEIGHT = 0.5
# Above this many texts, embed in a worker thread so a big ingestion batch does not stall the
# event loop that also serves queries.
_THREAD_THRESHOLD = 64

_STOP_WORD_LIST = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that thats the their theirs them themselves then
    there theres these they theyre this those through to too under until up very was we were what
    whats when where which while who whom why will with would you youre your yours yourself
    yourselves im ive youve youll weve hes shes
"""
_STOP_WORDS = frozenset(_STOP_WORD_LIST.split())

_TERM = re.compile(r"[^\W_]+")
# The same words in case-folded ASCII text (most text): every byte but a letter or a digit
# becomes a space and the text is split there: 17 µs for a 1,200-character passage, case
# folding included, against 33 µs with a regex.
_ASCII_SPACES = bytes(c if chr(c) in "abcdefghijklmnopqrstuvwxyz0123456789" else 32 for c in range(256))
_ASCII_APOSTROPHES = b"'`"
# Apostrophes are removed before splitting so that "don't" and "user's" stay one term.
_APOSTROPHES = re.compile(r"['’ʼ`´]")
# Combining marks left by NFKD: stripping them makes "café" and "cafe" the same term, which
# matters for speech transcripts that never carry accents.
_COMBINING_MARKS = re.compile(
    "[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f\u3099\u309a]"
)
_NO_UNDOUBLE = frozenset("lsz")
_VOWELS = frozenset("aeiouy")


def lexical_terms(text: str) -> list[str]:
    """Normalised, stop-word-free, stemmed words of ``text`` in order.

    Lower-cased (case-folded), accents removed, punctuation dropped, English stop words dropped,
    plural/-ing/-ed/-ly suffixes stripped.
    """
    return [_stem(term) for term in _words(text) if term not in _STOP_WORDS]


@lru_cache(maxsize=2048)
def term_set(text: str) -> frozenset[str]:
    """The distinct terms of ``lexical_terms(text)``, cached: the query path reads the same
    passages' terms for its confidence and its attribution, and the same chunks come back
    for many calls to one knowledge base (about 0.1 ms a 300-word passage uncached; a full
    cache of 300-word passages holds about 25 MB, as the attribution's own cache did)."""
    return frozenset(map(_stem, set(_words(text)).difference(_STOP_WORDS)))


def _words(text: str) -> list[str]:
    text = text.casefold()
    if not text.isascii():
        text = _APOSTROPHES.sub("", text)
        text = unicodedata.normalize("NFC", _COMBINING_MARKS.sub("", unicodedata.normalize("NFKD", text)))
        if not text.isascii():
            return _TERM.findall(text)
    return text.encode().translate(_ASCII_SPACES, _ASCII_APOSTROPHES).decode().split()


@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """A deliberately small suffix stripper: consistent rather than linguistically right.

    Each step works on the previous step's result, so inflections of one word meet at the same
    stem (supplies / supplied / supply -> "supp", configure / configuring -> "configur").
    """
    if len(word) <= 2 or not word.isalpha():
        return word
    # Plurals.
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "ches", "shes")) or (
        word.endswith("es") and len(word) > 3 and word[-3] in "sxz"
    ):
        word = word[:-2]
    elif word.endswith("s") and len(word) > 3 and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    # Verb endings; "eed" words (need, speed, proceed) keep their ending.
    if word.endswith("ied") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("ing") and _has_vowel(word[:-3]):
        word = _undouble(word[:-3])
    elif word.endswith("ed") and not word.endswith("eed") and _has_vowel(word[:-2]):
        word = _undouble(word[:-2])
    # Adverbs; the length guard keeps apply, reply, early.
    if word.endswith("ly") and len(word) >= 6:
        word = word[:-2]
    # Silent final e.
    if word.endswith("e") and len(word) > 2 and _has_vowel(word[:-1]):
        word = word[:-1]
    return word


def _has_vowel(stem: str) -> bool:
    return len(stem) >= 2 and any(c in _VOWELS for c in stem)


def _undouble(stem: str) -> str:
    if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in _VOWELS and stem[-1] not in _NO_UNDOUBLE:
        return stem[:-1]
    return stem


@lru_cache(maxsize=1 << 18)
def _hash64(feature: str) -> int:
    # blake2b, not hash(): Python's str hash is salted per process, and vectors are stored.
    return int.from_bytes(blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")


class LexicalEmbedder:
    """Deterministic feature-hashing embedder over :func:`lexical_terms` (lexical, not semantic).

    Each unigram, and each bigram at half weight, is hashed into one of ``dimensions`` buckets
    with a hash-derived sign (so collisions cancel out on average instead of piling up), weighted
    by sublinear term frequency ``1 + ln(tf)``, and the vector is L2-normalised. A text without
    any term (empty, punctuation, stop words only) gets a fixed unit vector instead of zeros,
    because cosine similarity with a zero vector is NaN in pgvector.
    """

    def __init__(self, dimensions: int = 512) -> None:
        if not MIN_DIMENSIONS <= dimensions <= MAX_INDEXABLE_DIMENSIONS:
            raise ValueError(
                f"dimensions must be between {MIN_DIMENSIONS} and {MAX_INDEXABLE_DIMENSIONS}, "
                f"got {dimensions}"
            )
        self._dimensions = dimensions
        self._empty_bucket = (_hash64("\x00empty") >> 1) % dimensions

    @property
    def model_key(self) -> str:
        """``lexical-v1:{dimensions}``; bump the version whenever tokenising or hashing changes."""
        return f"lexical-v1:{self._dimensions}"

    @property
    def dimensions(self) -> int:
        """Length of every returned vector."""
        return self._dimensions

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts in order; large batches run in a worker thread."""
        if len(texts) > _THREAD_THRESHOLD:
            return await asyncio.to_thread(self._embed, texts)
        return self._embed(texts)

    async def embed_query(self, text: str, *, timeout: float) -> list[float]:
        """Embed one text; it takes microseconds, so ``timeout`` is not needed."""
        return self._embed([text])[0]

    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        matrix = np.zeros((len(texts), self._dimensions), dtype=np.float64)
        for row, text in enumerate(texts):
            self._fill(matrix[row], text)
        return normalise_rows(matrix, source="lexical embedder")

    def _fill(self, row: npt.NDArray[np.float64], text: str) -> None:
        terms = lexical_terms(text)
        features: list[tuple[str, float]] = [
            (term, 1.0 + math.log(tf)) for term, tf in Counter(terms).items()
        ]
        features.extend(
            (f"{first} {second}", _BIGRAM_WEIGHT * (1.0 + math.log(tf)))
            for (first, second), tf in Counter(itertools.pairwise(terms)).items()
        )
        buckets: list[int] = []
        values: list[float] = []
        dimensions = self._dimensions
        for feature, weight in features:
            digest = _hash64(feature)
            buckets.append((digest >> 1) % dimensions)
            values.append(weight if digest & 1 else -weight)
        np.add.at(row, buckets, values)
        # Also covers the unlucky case where colliding terms cancel each other out exactly.
        if not row.any():
            row[self._empty_bucket] = 1.0
