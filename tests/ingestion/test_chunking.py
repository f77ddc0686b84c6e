"""Tests for token-based chunking."""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
from dataclasses import dataclass

import pytest
import tiktoken

from app.ingestion.chunking import Chunk, chunk_sections, get_encoding
from tests.conftest import REPO


@dataclass(frozen=True)
class Section:
    text: str
    heading: str | None = None
    page: int | None = None


VOCABULARY_TEXT = """
install configure server database index query latency voice agent knowledge retrieval embedding
vector chunk token paragraph section heading restart billing invoice refund password account login
network firewall certificate upload download schedule
"""
VOCABULARY = VOCABULARY_TEXT.split()


def make_document(seed: int, paragraphs: int, max_sentences: int = 8) -> str:
    """Paragraphs of numbered sentences, so every word is unique and traceable."""
    rng = random.Random(seed)
    out = []
    for p in range(paragraphs):
        sentences = []
        for s in range(rng.randint(1, max_sentences)):
            words = [rng.choice(VOCABULARY) for _ in range(rng.randint(4, 25))]
            sentences.append(f"P{p}s{s} " + " ".join(words) + ".")
        out.append(" ".join(sentences))
    return "\n\n".join(out)


def count(text: str) -> int:
    return len(get_encoding().encode_ordinary(text))


def shared_edge(previous: str, following: str) -> str:
    """Longest prefix of ``following`` that is also a suffix of ``previous``."""
    for size in range(min(len(previous), len(following)), 0, -1):
        if previous.endswith(following[:size]):
            return following[:size]
    return ""


@pytest.mark.parametrize(("chunk_tokens", "overlap_tokens"), [(64, 32), (120, 30), (500, 60), (2000, 0)])
def test_every_chunk_within_budget_with_exact_count(chunk_tokens: int, overlap_tokens: int) -> None:
    sections = [Section(make_document(seed, 40), f"Part {seed}", seed) for seed in range(3)]

    chunks = chunk_sections("Manual", sections, chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)

    assert chunks
    assert all(0 < c.token_count <= chunk_tokens and c.token_count == count(c.text) for c in chunks)


def test_consecutive_chunks_overlap_by_about_overlap_tokens() -> None:
    # Short paragraphs, so the next paragraph always leaves room for the full overlap.
    text = make_document(seed=7, paragraphs=60, max_sentences=2)

    chunks = chunk_sections(None, [Section(text)], chunk_tokens=200, overlap_tokens=40)

    edges = [shared_edge(a.text, b.text) for a, b in itertools.pairwise(chunks)]
    assert len(chunks) > 5
    assert all(20 <= count(edge) <= 40 for edge in edges)


def test_overlap_starts_at_a_sentence_when_whole_sentences_fill_half_of_it() -> None:
    sentence = "The quick brown fox jumps over the lazy dog."  # 10 tokens
    text = "\n\n".join(" ".join([sentence] * 4) for _ in range(20))

    chunks = chunk_sections(None, [Section(text)], chunk_tokens=100, overlap_tokens=25)

    # 20 tokens of overlap (two sentences) plus one 40-token paragraph per chunk after the first.
    assert len(chunks) > 5
    assert all(c.text.startswith("The quick brown fox") for c in chunks)


def test_without_overlap_the_chunks_reproduce_the_text_word_for_word() -> None:
    text = make_document(seed=3, paragraphs=80)

    chunks = chunk_sections(None, [Section(text)], chunk_tokens=100, overlap_tokens=0)

    assert " ".join(c.text for c in chunks).split() == text.split()


def test_no_word_is_lost() -> None:
    text = (
        make_document(seed=11, paragraphs=30)
        + "\n\n"
        + "A line without a full stop\n- a list item\n- another item, with a comma\n\n"
        + "Unicode: café naïve Ünïcödé 東京 emoji 🎉 «quoted» ‘single’.\n\n"
        + "Code: `def f(x): return x * 2` and https://example.com/path?query=1&b=2"
    )

    chunks = chunk_sections("T", [Section(text)], chunk_tokens=64, overlap_tokens=16)

    assert set(text.split()) <= {word for c in chunks for word in c.text.split()}


def test_small_paragraphs_are_packed_whole() -> None:
    paragraphs = [f"Paragraph {i} says something short but complete." for i in range(30)]

    chunks = chunk_sections(None, [Section("\n\n".join(paragraphs))], chunk_tokens=80, overlap_tokens=0)

    assert [p for c in chunks for p in c.text.split("\n\n")] == paragraphs


def test_long_paragraph_is_split_at_sentence_boundaries() -> None:
    paragraph = " ".join(f"Sentence number {i} explains one more detail of the setup." for i in range(60))

    chunks = chunk_sections(None, [Section(paragraph)], chunk_tokens=64, overlap_tokens=0)

    assert len(chunks) > 1
    assert all(c.text.startswith("Sentence number") and c.text.endswith("setup.") for c in chunks)


def test_long_sentence_is_split_at_word_boundaries() -> None:
    words = [f"word{i}" for i in range(1500)]

    chunks = chunk_sections(None, [Section(" ".join(words))], chunk_tokens=64, overlap_tokens=8)

    assert len(chunks) > 10
    assert all(c.token_count <= 64 and set(c.text.split()) <= set(words) for c in chunks)


def test_long_word_is_split_at_token_boundaries_without_losing_characters() -> None:
    word = "".join(f"{i:x}é東🎉" for i in range(2000))  # multi-byte characters straddle tokens

    chunks = chunk_sections(None, [Section(word)], chunk_tokens=64, overlap_tokens=0)

    assert len(chunks) > 10
    assert all(c.token_count <= 64 for c in chunks)
    assert "".join(c.text for c in chunks) == word


BSD_DISCLAIMER = (
    'THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND ANY EXPRESS OR IMPLIED '
    "WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A "
    "PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR "
    "ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT "
    "LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS "
    "INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR "
    "TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF "
    "ADVISED OF THE POSSIBILITY OF SUCH DAMAGE."
)


def test_budget_holds_where_summed_piece_counts_undershoot() -> None:
    # In this text, words counted one by one add up to fewer tokens than the joined chunk has,
    # so the exact recount has to move words on to the next chunk.
    chunks = chunk_sections(None, [Section(BSD_DISCLAIMER)], chunk_tokens=64, overlap_tokens=0)

    assert all(c.token_count == count(c.text) <= 64 for c in chunks)
    assert " ".join(c.text for c in chunks).split() == BSD_DISCLAIMER.split()


def test_sections_are_never_merged_and_carry_heading_and_page() -> None:
    sections = [
        Section("Tiny one.", "Intro", 1),
        Section("Tiny two.", "Intro > Details", 1),
        Section("Tiny three.", None, 2),
    ]

    chunks = chunk_sections("Guide", sections)

    assert chunks == [
        Chunk(0, "Tiny one.", "Intro", 1, count("Tiny one."), "Guide\nIntro\n\nTiny one."),
        Chunk(
            1, "Tiny two.", "Intro > Details", 1, count("Tiny two."), "Guide\nIntro > Details\n\nTiny two."
        ),
        Chunk(2, "Tiny three.", None, 2, count("Tiny three."), "Guide\n\nTiny three."),
    ]


def test_ordinals_run_across_sections_and_each_chunk_keeps_its_section() -> None:
    sections = [Section(make_document(seed, 15), f"S{seed}", seed) for seed in range(4)]

    chunks = chunk_sections(None, sections, chunk_tokens=100, overlap_tokens=20)

    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert [c.section for c in chunks] == sorted(c.section for c in chunks)
    assert all(c.page == int(c.section[1:]) for c in chunks if c.section)


@pytest.mark.parametrize(
    ("title", "heading", "expected"),
    [
        ("Guide", "Setup", "Guide\nSetup\n\nBody text."),
        ("Guide", None, "Guide\n\nBody text."),
        (None, "Setup", "Setup\n\nBody text."),
        (None, None, "Body text."),
        ("  ", "", "Body text."),
    ],
)
def test_embed_text_prefixes_title_and_section(title: str | None, heading: str | None, expected: str) -> None:
    (chunk,) = chunk_sections(title, [Section("Body text.", heading)])

    assert chunk.embed_text == expected


def test_list_marks_are_not_embedded() -> None:
    # A list read from HTML or markdown is embedded as it was before it kept its marks.
    (chunk,) = chunk_sections(
        "Guide", [Section("Bring:\n- your card\n- a photo ID\nNo - not cash.", "Joining")]
    )
    assert chunk.text == "Bring:\n- your card\n- a photo ID\nNo - not cash."
    assert chunk.embed_text == "Guide\nJoining\n\nBring:\nyour card\na photo ID\nNo - not cash."


def test_blank_sections_give_no_chunks() -> None:
    sections = [Section(""), Section("  \n\n \t\n"), Section("", "Heading only", 4)]

    assert chunk_sections("T", sections) == []


def test_special_token_text_is_treated_as_plain_text() -> None:
    (chunk,) = chunk_sections(None, [Section("Models end with <|endoftext|> markers.")])

    assert chunk.text == "Models end with <|endoftext|> markers."


def test_other_encodings_are_accepted() -> None:
    # One token per byte, far from cl100k_base's counts: a chunker that counted with its
    # default would overrun the budget. Built here because the service ships cl100k_base only.
    encoding = tiktoken.Encoding(
        name="bytes",
        pat_str=r"\S+|\s+",
        mergeable_ranks={bytes([b]): b for b in range(256)},
        special_tokens={},
    )
    text = make_document(seed=5, paragraphs=20)

    chunks = chunk_sections(None, [Section(text)], chunk_tokens=100, overlap_tokens=10, encoding=encoding)

    assert all(c.token_count == len(encoding.encode_ordinary(c.text)) <= 100 for c in chunks)


@pytest.mark.parametrize(
    ("chunk_tokens", "overlap_tokens"),
    [(63, 0), (2001, 0), (500, -1), (500, 251), (64, 33)],
)
def test_out_of_range_sizes_are_rejected(chunk_tokens: int, overlap_tokens: int) -> None:
    with pytest.raises(ValueError, match="_tokens must be between"):
        chunk_sections(None, [Section("text")], chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)


@pytest.mark.parametrize(("chunk_tokens", "overlap_tokens"), [(64, 32), (2000, 1000), (2000, 0)])
def test_boundary_sizes_are_accepted(chunk_tokens: int, overlap_tokens: int) -> None:
    chunks = chunk_sections(None, [Section("text")], chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)

    assert [c.text for c in chunks] == ["text"]


def test_chunking_is_deterministic() -> None:
    sections = [Section(make_document(seed, 25), f"S{seed}", seed) for seed in range(3)]

    first = chunk_sections("Doc", sections, chunk_tokens=90, overlap_tokens=30)
    second = chunk_sections("Doc", sections, chunk_tokens=90, overlap_tokens=30)

    assert first == second


def test_get_encoding_is_cached() -> None:
    assert get_encoding() is get_encoding("cl100k_base")


def test_the_encoding_is_read_from_the_copy_the_service_ships() -> None:
    # A fresh process, without TIKTOKEN_CACHE_DIR and with tiktoken's download replaced by an
    # error: importing the app must be all it takes to load cl100k_base on a machine offline.
    code = (
        "import os, tiktoken.load\n"
        "def offline(url): raise OSError('tiktoken tried to download ' + url)\n"
        "tiktoken.load.read_file = offline\n"
        "from app.ingestion.chunking import get_encoding\n"
        "print(os.environ['TIKTOKEN_CACHE_DIR'])\n"
        "print(get_encoding().encode_ordinary('hello world'))\n"
    )
    env = {name: value for name, value in os.environ.items() if name != "TIKTOKEN_CACHE_DIR"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stdout.splitlines(), result.stderr) == (
        0,
        [str(REPO / "app" / "resources" / "tiktoken"), "[15339, 1917]"],
        "",
    )
