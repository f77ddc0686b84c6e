"""Token-based chunking of extracted document sections.

Chunks are sized in tokens (tiktoken) because both the embedding limits and the prompt budget of
the answering model are counted in tokens, not characters.

Guarantees of :func:`chunk_sections`:

* a chunk never spans two sections, so it has exactly one heading and one page;
* whole paragraphs are packed up to ``chunk_tokens``; only a paragraph that does not fit in an
  empty chunk is split, at sentence boundaries, then word boundaries, then token boundaries;
* consecutive chunks of one section overlap by up to ``overlap_tokens`` of whole sentences taken
  from the end of the previous chunk (whole words when whole sentences would give less than half
  of the overlap);
* ``token_count`` is the exact token count of ``text`` and never exceeds ``chunk_tokens``: there
  is no tolerance. Packing works on the sum of the pieces' token counts, which is an upper bound
  in practice (pieces are cut at the tokenizer's pre-token boundaries); every finished chunk is
  encoded once more to get its exact count, and in the rare case where BPE merges across a seam
  push it over the limit, trailing pieces are moved on to the next chunk;
* no chunk is empty and no chunk consists of overlap only; the last chunk of a section may be
  small, because merging it into a neighbouring section would lose its heading.

Each paragraph is encoded once; the growing chunk is never re-encoded while packing, which keeps
throughput at several MB of text per second on one core.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Protocol

import tiktoken

MIN_CHUNK_TOKENS = 64
MAX_CHUNK_TOKENS = 2000

# "\n\n" is a single cl100k/o200k token; counting it as one when joining paragraphs is exact or an
# overestimate when the preceding punctuation merges with it.
_PARAGRAPH_SEPARATOR = "\n\n"
_SEPARATOR_TOKENS = 1

_PARAGRAPH_SPLIT = re.compile(r"\n\s*\n")
# Zero-width boundaries placed *before* whitespace, so every piece after the first keeps its leading
# whitespace: that is where the tokenizer's pre-tokens start, so the pieces' token counts add up.
_SENTENCE_BOUNDARY = re.compile(r"(?<=[.!?…。！？])(?=\s)|(?<=[.!?…][\"'”’)\]])(?=\s)|(?=\n)")
_WORD = re.compile(r"\s*\S+")

_PARAGRAPH, _SENTENCE, _WORD_LEVEL, _TOKENS = 0, 1, 2, 3


class SectionLike(Protocol):
    """What the chunker needs from an extracted section (``app.ingestion.extract.Section``)."""

    @property
    def text(self) -> str:
        """Plain text, paragraphs separated by blank lines."""
        ...

    @property
    def heading(self) -> str | None:
        """Heading path such as ``"Installation > Linux"``."""
        ...

    @property
    def page(self) -> int | None:
        """Page the section starts on, for paged formats."""
        ...


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrievable piece of a document.

    ``text`` is what is shown or spoken; ``embed_text`` prefixes it with the document title and the
    section heading so that a chunk which never names its subject is still found by it.
    """

    ordinal: int
    text: str
    section: str | None
    page: int | None
    token_count: int
    embed_text: str


class _Piece(NamedTuple):
    text: str  # leading whitespace kept for pieces that continue a paragraph
    tokens: int  # tokens of ``text`` encoded on its own
    para_start: bool  # a paragraph separator goes before it unless it opens the chunk
    level: int  # _PARAGRAPH, _SENTENCE, _WORD_LEVEL or _TOKENS: how far it may still be split


@lru_cache(maxsize=8)
def get_encoding(name: str = "cl100k_base") -> tiktoken.Encoding:
    """Return the named tiktoken encoding, loaded once per process."""
    return tiktoken.get_encoding(name)


_ITEM_MARK_RE = re.compile(r"^- ", re.MULTILINE)


def embed_text(title: str | None, heading: str | None, text: str) -> str:
    """What is embedded for a chunk: its text under its document title and section heading,
    less the "- " marks of list items, which carry no meaning (and which extraction adds to
    HTML and markdown lists, whose vectors stay as they were). A call rebuilds it from a
    passage to find the passage's sentences read in it."""
    header = "\n".join(part for part in (title, heading) if part)
    text = _ITEM_MARK_RE.sub("", text)
    return f"{header}\n\n{text}" if header else text


def chunk_sections(
    title: str | None,
    sections: Sequence[SectionLike],
    *,
    chunk_tokens: int = 500,
    overlap_tokens: int = 60,
    encoding: tiktoken.Encoding | None = None,
) -> list[Chunk]:
    """Split a document's sections into token-bounded, overlapping chunks in document order.

    Raises ``ValueError`` unless ``64 <= chunk_tokens <= 2000`` and
    ``0 <= overlap_tokens <= chunk_tokens // 2``.
    """
    if not MIN_CHUNK_TOKENS <= chunk_tokens <= MAX_CHUNK_TOKENS:
        raise ValueError(
            f"chunk_tokens must be between {MIN_CHUNK_TOKENS} and {MAX_CHUNK_TOKENS}, got {chunk_tokens}"
        )
    if not 0 <= overlap_tokens <= chunk_tokens // 2:
        raise ValueError(
            f"overlap_tokens must be between 0 and chunk_tokens // 2 ({chunk_tokens // 2}), "
            f"got {overlap_tokens}"
        )
    chunker = _Chunker(encoding or get_encoding(), chunk_tokens, overlap_tokens)
    title = title.strip() if title else None
    chunks: list[Chunk] = []
    for section in sections:
        heading = section.heading.strip() if section.heading else None
        for text, count in chunker.chunk_text(section.text):
            chunks.append(
                Chunk(
                    ordinal=len(chunks),
                    text=text,
                    section=heading or None,
                    page=section.page,
                    token_count=count,
                    embed_text=embed_text(title, heading, text),
                )
            )
    return chunks


class _Chunker:
    def __init__(self, encoding: tiktoken.Encoding, budget: int, overlap: int) -> None:
        # encode_ordinary: documents may legitimately contain strings such as "<|endoftext|>",
        # which encode() would reject as special tokens.
        self._encode = encoding.encode_ordinary
        self._encoding = encoding
        self._budget = budget
        self._overlap = overlap

    def chunk_text(self, text: str) -> Iterator[tuple[str, int]]:
        """Yield ``(chunk text, exact token count)`` for one section's text."""
        queue: deque[_Piece] = deque(self._pieces(text))
        budget = self._budget
        chunk: list[_Piece] = []
        n_overlap = 0
        estimate = 0
        previous: list[_Piece] = []
        while queue or chunk:
            if not queue:
                emitted, pushed_back, text_out, count = self._finish(chunk, n_overlap)
                yield text_out, count
                queue.extendleft(reversed(pushed_back))
                previous, chunk, n_overlap, estimate = emitted, [], 0, 0
                continue
            piece = queue.popleft()
            if not chunk:
                if previous and self._overlap:
                    limit = min(self._overlap, budget - piece.tokens - _SEPARATOR_TOKENS)
                    if limit > 0:
                        chunk = self._tail(reversed(previous), limit)[::-1]
                n_overlap = len(chunk)
                estimate = _estimate(chunk)
            cost = piece.tokens + (_SEPARATOR_TOKENS if piece.para_start and chunk else 0)
            if estimate + cost <= budget or len(chunk) == n_overlap:
                chunk.append(piece)
                estimate += cost
                continue
            emitted, pushed_back, text_out, count = self._finish(chunk, n_overlap)
            yield text_out, count
            queue.appendleft(piece)
            queue.extendleft(reversed(pushed_back))
            previous, chunk, n_overlap, estimate = emitted, [], 0, 0

    def _finish(self, chunk: list[_Piece], n_overlap: int) -> tuple[list[_Piece], list[_Piece], str, int]:
        """Render a chunk and count it exactly; shed pieces while BPE seams push it over budget."""
        pushed_back: list[_Piece] = []
        start = 0
        text = _render(chunk)
        count = len(self._encode(text))
        while count > self._budget:
            if len(chunk) - max(start, n_overlap) > 1:
                pushed_back.insert(0, chunk.pop())
            elif start < n_overlap:
                start += 1
            else:
                break  # a single piece is at most the budget on its own; nothing left to shed
            text = _render(chunk[start:])
            count = len(self._encode(text))
        return chunk[start:], pushed_back, text, count

    def _pieces(self, text: str) -> Iterator[_Piece]:
        for raw in _PARAGRAPH_SPLIT.split(text):
            paragraph = raw.strip()
            if not paragraph:
                continue
            count = len(self._encode(paragraph))
            if count <= self._budget:
                yield _Piece(paragraph, count, True, _PARAGRAPH)
            else:
                yield from self._explode(paragraph)

    def _explode(self, paragraph: str) -> Iterator[_Piece]:
        """Split an oversized paragraph into pieces of at most the budget, finest level last."""
        first = True
        for sentence in _split_sentences(paragraph):
            count = len(self._encode(sentence))
            if count <= self._budget:
                yield _Piece(sentence, count, first, _SENTENCE)
                first = False
                continue
            for word in _WORD.findall(sentence):
                count = len(self._encode(word))
                if count <= self._budget:
                    yield _Piece(word, count, first, _WORD_LEVEL)
                    first = False
                    continue
                for part, part_count in self._split_tokens(word):
                    yield _Piece(part, part_count, first, _TOKENS)
                    first = False

    def _split_tokens(self, word: str) -> Iterator[tuple[str, int]]:
        """Cut a word longer than the budget at token boundaries that fall between characters."""
        tokens = self._encode(word)
        _, offsets = self._encoding.decode_with_offsets(tokens)
        offsets.append(len(word))
        i = 0
        while i < len(tokens):
            step = self._budget
            while True:
                j = min(i + step, len(tokens))
                # A token starting inside a multi-byte character maps to that character's start;
                # move on until the cut really advances.
                while j < len(tokens) and offsets[j] <= offsets[i]:
                    j += 1
                part = word[offsets[i] : offsets[j]]
                count = len(self._encode(part))
                if count <= self._budget or step <= 1:
                    break
                step = max(1, step - (count - self._budget) - 1)
            yield part, count
            i = j

    def _tail(self, reversed_pieces: Iterator[_Piece], limit: int) -> list[_Piece]:
        """Pieces from the end of a chunk worth at most ``limit`` tokens, last piece first."""
        picked: list[_Piece] = []
        total = 0
        for piece in reversed_pieces:
            # Conservative: the separator is counted even if the piece ends up opening the chunk.
            cost = piece.tokens + (_SEPARATOR_TOKENS if piece.para_start else 0)
            if total + cost <= limit:
                picked.append(piece)
                total += cost
                continue
            if 2 * total < limit and piece.level < _WORD_LEVEL:
                picked.extend(self._tail(self._finer_reversed(piece), limit - total))
            break
        return picked

    def _finer_reversed(self, piece: _Piece) -> Iterator[_Piece]:
        """Split a piece one level finer, yielding from the end and encoding only what is asked for."""
        if piece.level == _PARAGRAPH:
            parts, level = _split_sentences(piece.text), _SENTENCE
        else:
            parts, level = _WORD.findall(piece.text), _WORD_LEVEL
        for index in range(len(parts) - 1, -1, -1):
            part = parts[index]
            yield _Piece(part, len(self._encode(part)), piece.para_start and index == 0, level)


def _split_sentences(paragraph: str) -> list[str]:
    return [part for part in _SENTENCE_BOUNDARY.split(paragraph) if part and not part.isspace()]


def _estimate(pieces: list[_Piece]) -> int:
    return sum(p.tokens for p in pieces) + sum(_SEPARATOR_TOKENS for p in pieces[1:] if p.para_start)


def _render(pieces: Sequence[_Piece]) -> str:
    parts: list[str] = []
    for index, piece in enumerate(pieces):
        if index and piece.para_start:
            parts.append(_PARAGRAPH_SEPARATOR)
        parts.append(piece.text)
    return "".join(parts).strip()
