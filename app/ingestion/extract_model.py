"""The result types and errors of text extraction, shared by every extractor and the PDF worker.

Kept free of third-party imports so that the PDF worker process starts quickly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SourceKind = Literal["text", "markdown", "html", "pdf", "docx", "pptx", "xlsx", "csv"]
# Parsed in a child process with hard limits (see extract.extract_isolated).
ISOLATED_KINDS: frozenset[str] = frozenset({"pdf", "docx", "pptx", "xlsx"})

# User-facing reasons. Tests and callers compare against these exact strings.
NO_TEXT = "no text found"
TEXT_UNREADABLE = "the text is unreadable: no character encoding gives readable text"
PDF_ENCRYPTED = "the PDF is encrypted with a password; upload an unprotected copy"
PDF_DAMAGED = "the PDF is damaged and could not be read"
PDF_NO_TEXT_LAYER = "the PDF has no text layer; scanned documents are not supported"
PDF_TOO_SLOW = "the PDF could not be processed within {seconds:g} s"
PDF_TOO_BIG = "the PDF needs more memory than allowed"
PDF_CRASHED = "the PDF could not be processed; the PDF reader stopped unexpectedly"
# Office files: {noun} is the kind of file in words, see OFFICE_NOUNS.
OFFICE_NOUNS = {"docx": "Word document", "pptx": "presentation", "xlsx": "spreadsheet"}
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


class ExtractionError(Exception):
    """Raised with a readable, user-facing reason in str(exc), e.g. 'the PDF is encrypted ...'."""


class UnsupportedType(Exception):
    """The upload is not a kind of file this service reads; str(exc) says so in user-facing words."""
