"""The result types and errors of text extraction, shared by every extractor and the PDF worker;
and how a PDF's pages, read in one worker process or several, make the document.

Kept free of third-party imports so that the PDF worker process starts quickly.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

logger = logging.getLogger(__name__)

SourceKind = Literal["text", "markdown", "html", "pdf", "docx", "pptx", "xlsx", "csv"]
# Parsed in a child process with hard limits (see extract.extract_isolated); large markup too.
ISOLATED_KINDS: frozenset[str] = frozenset({"pdf", "docx", "pptx", "xlsx"})

# User-facing reasons. Tests and callers compare against these exact strings.
NO_TEXT = "no text found"
NO_WORDS = (
    "no text found: the document holds no letters or digits, only marks, symbols or invisible characters"
)
TEXT_UNREADABLE = "the text is unreadable: no character encoding gives readable text"
PDF_ENCRYPTED = "the PDF is encrypted with a password; upload an unprotected copy"
PDF_DAMAGED = "the PDF is damaged and could not be read"
PDF_NO_TEXT_LAYER = "the PDF has no text layer; scanned documents are not supported"
PDF_TOO_SLOW = "the PDF could not be processed within {seconds:g} s"
PDF_PAGE_TOO_SLOW = "no page of the PDF could be read in the {seconds:g} s a page may take"
PDF_TOO_BIG = "the PDF needs more memory than allowed"
PDF_CRASHED = "the PDF could not be processed; the PDF reader stopped unexpectedly"
PDF_UNMAPPED_FONTS = (
    "the PDF's text cannot be read: its fonts map their glyphs to no characters (copying its "
    "text gives gibberish); export it again from the original document"
)
# Office files: {noun} is the kind of file in words, see OFFICE_NOUNS.
OFFICE_NOUNS = {"docx": "Word document", "pptx": "presentation", "xlsx": "spreadsheet"}
# Markup and tables this large are parsed in the child too: their parsers have inputs that
# cost time or memory out of all proportion to their size (a page nesting 100,000 elements
# takes lexbor 15 s; a 2 MB Markdown table, markdown-it 1.5 GB).
LARGE_MARKUP_BYTES = 256 * 1024
MARKUP_NOUNS = {"html": "web page", "markdown": "Markdown document", "csv": "CSV file"}
OFFICE_DAMAGED = "the {noun} is damaged and could not be read"
OFFICE_TOO_SLOW = "the {noun} could not be processed within {seconds:g} s"
OFFICE_TOO_BIG = "the {noun} needs more memory than allowed"
OFFICE_CRASHED = "the {noun} could not be processed; the reader stopped unexpectedly"

DEFAULT_MAX_PAGES = 2000


@dataclass(frozen=True, slots=True)
class Section:
    """A run of text under one heading (markdown, HTML, Word), on one page (PDF), on one slide
    (PowerPoint) or in one sheet (spreadsheet, CSV)."""

    text: str  # plain text, paragraphs separated by "\n\n"
    heading: str | None  # heading path such as "Installation > Linux"; None before the first heading
    page: int | None  # 1-based page number for PDFs, else None


@dataclass(frozen=True, slots=True)
class Extracted:
    """Everything extracted from one upload."""

    title: str | None
    sections: list[Section]  # in document order; never contains empty-text sections
    pages_total: int | None  # PDFs only
    pages_skipped: int  # PDF pages that failed to extract or lay beyond the page cap


# A letter or a digit of any script: what a word needs.
_WORD_CHARACTER = re.compile(r"[^\W_]")


def holds_words(sections: Sequence[Section]) -> bool:
    """Whether some section has a letter or digit. Punctuation, emoji, combining marks,
    private-use glyphs or bidirectional controls alone answer no question: never ready."""
    return any(_WORD_CHARACTER.search(section.text) for section in sections)


class ExtractionError(Exception):
    """Raised with a readable, user-facing reason in str(exc), e.g. 'the PDF is encrypted ...'."""


class UnsupportedType(Exception):
    """The upload is not a kind of file this service reads; str(exc) says so in user-facing words."""


@dataclass(frozen=True, slots=True)
class ChildReasons:
    """What a failed extraction child says, in the words of the kind of file it was reading."""

    too_slow: str  # with {seconds}
    too_big: str
    crashed: str

    @classmethod
    def of(cls, kind: SourceKind) -> ChildReasons:
        if kind == "pdf":
            return cls(PDF_TOO_SLOW, PDF_TOO_BIG, PDF_CRASHED)
        noun = OFFICE_NOUNS.get(kind) or MARKUP_NOUNS[kind]
        return cls(
            OFFICE_TOO_SLOW.replace("{noun}", noun),
            OFFICE_TOO_BIG.format(noun=noun),
            OFFICE_CRASHED.format(noun=noun),
        )


@dataclass(frozen=True, slots=True)
class PdfOutline:
    """What is known of a PDF once it is open. A `repaired` file (one pypdf rejected as
    broken, read by pdfium) is not trusted in part: see `assemble_pdf`."""

    title: str | None
    pages_total: int
    repaired: bool


@dataclass(frozen=True, slots=True)
class PageRead:
    """One page's outcome: its text ("" for a blank page), or None when it could not be read,
    because it needed more memory than allowed, ended the reading process, took longer than a
    page may or was not reached in the file's time (`too_slow`), showed only glyphs its fonts
    map to no character (`unmapped`), or was damaged."""

    index: int
    text: str | None
    out_of_memory: bool = False
    crashed: bool = False
    unmapped: bool = False
    too_slow: bool = False


def assemble_pdf(
    outline: PdfOutline, pages: Sequence[PageRead], *, max_pages: int, too_slow: str = ""
) -> Extracted:
    """The document from its pages' outcomes, in page order, or the reason it has no text
    (`too_slow` when pages ran out of time, which only the worker's parent measures).

    For a `repaired` file a partial read is not trusted: a page that fails, or no text at all,
    makes the whole file damaged.
    """
    sections = [Section(text=p.text, heading=None, page=p.index + 1) for p in pages if p.text]
    failed = [p.index + 1 for p in pages if p.text is None]
    if not sections:
        if any(p.out_of_memory for p in pages):
            raise ExtractionError(PDF_TOO_BIG)
        if any(p.too_slow for p in pages):
            raise ExtractionError(too_slow)
        if any(p.crashed for p in pages):
            raise ExtractionError(PDF_CRASHED)
    if outline.repaired and (failed or not sections):
        raise ExtractionError(PDF_DAMAGED)
    if not sections and any(p.unmapped for p in pages):
        raise ExtractionError(PDF_UNMAPPED_FONTS)
    if not sections:
        read_any = len(failed) < len(pages)
        raise ExtractionError(PDF_NO_TEXT_LAYER if read_any else PDF_DAMAGED)
    if failed:
        # Not a failure of the document: the readable pages are indexed, the rest counted.
        total = outline.pages_total
        logger.warning("%d of %d PDF pages could not be read: pages %s", len(failed), total, _ranges(failed))
    beyond_cap = max(0, outline.pages_total - max_pages)
    return Extracted(
        title=outline.title,
        sections=sections,
        pages_total=outline.pages_total,
        pages_skipped=len(failed) + beyond_cap,
    )


def _ranges(pages: list[int]) -> str:
    """1-based page numbers as "2, 5-7": a log line stays short however many pages failed."""
    runs: list[list[int]] = []
    for page in pages:
        if runs and page == runs[-1][1] + 1:
            runs[-1][1] = page
        else:
            runs.append([page, page])
    return ", ".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)
