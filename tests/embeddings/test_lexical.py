"""Tests for the offline lexical embedder."""

from __future__ import annotations

import math
import re

import pytest

from app.embeddings import LexicalEmbedder, lexical_terms
from app.embeddings.lexical import _words, term_set


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("Running installs; configured POLICIES quickly!", ["run", "install", "configur", "policy", "quick"]),
        ("The Café’s résumé — isn’t it naïve? Straße", ["caf", "resum", "isnt", "naiv", "strass"]),
        ("Reset your password: 3 steps (v2.1)", ["reset", "password", "3", "step", "v2", "1"]),
        ("the of and to is", []),
        ("", []),
    ],
)
def test_lexical_terms_normalise_drop_stop_words_and_stem(text: str, terms: list[str]) -> None:
    assert lexical_terms(text) == terms


@pytest.mark.parametrize(
    "forms",
    [
        ["configure", "configured", "configuring", "configures"],
        ["policy", "policies"],
        ["supply", "supplies", "supplied"],
        ["box", "boxes"],
        ["stop", "stopped", "stopping", "stops"],
        ["install", "installed", "installing", "installs"],
        ["cafe", "café", "CAFÉ"],
    ],
)
def test_inflections_share_one_term(forms: list[str]) -> None:
    assert len({tuple(lexical_terms(form)) for form in forms}) == 1


async def test_inflected_texts_get_the_same_vector() -> None:
    embedder = LexicalEmbedder()

    first, second = await embedder.embed_documents(["Configure the servers", "configuring a server!"])

    assert first == second


async def test_vectors_are_unit_length_and_sized() -> None:
    embedder = LexicalEmbedder(dimensions=256)

    vectors = await embedder.embed_documents(["one short text", "another, longer text " * 50, "x"])

    assert [(len(v), round(norm(v), 12)) for v in vectors] == [(256, 1.0)] * 3


async def test_same_text_same_vector_across_instances() -> None:
    text = "How do I reset my voicemail PIN?"

    first = await LexicalEmbedder().embed_query(text, timeout=0.1)
    second = (await LexicalEmbedder().embed_documents([text]))[0]

    assert first == second


async def test_vectors_match_the_stored_reference() -> None:
    # Vectors are stored, so they must not change between processes (Python salts str hashes),
    # machines or releases. If this fails on purpose, bump the "lexical-v1" model key.
    vector = await LexicalEmbedder(64).embed_query("billing refund policy", timeout=0.1)

    unit, half = 1 / math.sqrt(3.5), 0.5 / math.sqrt(3.5)  # three unigrams, two half-weight bigrams
    assert {i: x for i, x in enumerate(vector) if x} == pytest.approx(
        {23: half, 47: unit, 51: half, 57: -unit, 63: -unit}
    )


async def test_similar_texts_are_closer_than_unrelated_ones() -> None:
    embedder = LexicalEmbedder()
    query, related, unrelated = await embedder.embed_documents(
        [
            "how do I reset my password",
            "To reset a password, open Settings and choose Reset password.",
            "Our offices are closed on public holidays and weekends.",
        ]
    )

    assert cosine(query, related) > 0.3 > cosine(query, unrelated)


async def test_word_order_matters_a_little_through_bigrams() -> None:
    embedder = LexicalEmbedder()
    text, same_phrase, reversed_words = await embedder.embed_documents(
        ["reset password now", "please reset password", "password reset please"]
    )

    assert cosine(text, same_phrase) > cosine(text, reversed_words)


@pytest.mark.parametrize("blank", ["", "   ", "?!…", "the and of"])
async def test_text_without_terms_gets_a_fixed_unit_vector(blank: str) -> None:
    embedder = LexicalEmbedder(dimensions=64)

    vector = await embedder.embed_query(blank, timeout=0.1)

    assert sorted(vector) == [0.0] * 63 + [1.0]
    assert vector == (await embedder.embed_documents([""]))[0]


async def test_large_batches_match_single_embeddings() -> None:
    embedder = LexicalEmbedder()
    texts = [f"document number {i} about topic {i % 7}" for i in range(200)]  # runs in a thread

    batch = await embedder.embed_documents(texts)

    assert batch == [await embedder.embed_query(t, timeout=0.1) for t in texts]


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        # Plain ASCII, the fast path (a final e is stripped: free -> fre).
        ("Free PARKING behind the building; parking is free.", {"fre", "park", "behind", "build"}),
        # Case-folding makes ASCII of it ("ﬁ" is two letters); the same terms as typed plainly.
        ("ﬁle FILES", {"fil"}),
        # Accents stripped to ASCII: the same terms as the plain spelling.
        ("Café crème, CAFES", {"caf", "crem"}),
        # Still not ASCII after the accents go: words of any script, punctuation dropped.
        ("Straße — 東京 x_y 3rd", {"strass", "東京", "x", "y", "3rd"}),
    ],
)
def test_term_set_is_the_distinct_lexical_terms(text: str, terms: set[str]) -> None:
    assert term_set(text) == frozenset(lexical_terms(text)) == terms


def test_ascii_text_splits_as_the_general_rule_does() -> None:
    # The byte-table splitter for ASCII text against the rule for any script: a word is a run
    # of letters and digits, apostrophes are dropped. Every ASCII character between words.
    text = "".join(f"ab{chr(c)}Cd9" for c in range(128))
    expected = re.findall(r"[^\W_]+", re.sub(r"['`]", "", text.casefold()))
    assert len(expected) == 65  # 62 letters and digits and 2 apostrophes join; 64 split
    assert _words(text) == expected


def test_model_key_and_dimensions() -> None:
    embedder = LexicalEmbedder(dimensions=384)

    assert (embedder.model_key, embedder.dimensions) == ("lexical-v1:384", 384)


@pytest.mark.parametrize("dimensions", [0, 15, 2001])
def test_out_of_range_dimensions_are_rejected(dimensions: int) -> None:
    with pytest.raises(ValueError, match="dimensions must be between 16 and 2000"):
        LexicalEmbedder(dimensions=dimensions)
