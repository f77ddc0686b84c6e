"""Plain-text decoding and the whitespace and character clean-up shared by all extractors."""

from __future__ import annotations

import codecs
import re
import unicodedata

from app.ingestion.extract_model import Extracted, Section

# UTF-32 first: its little-endian BOM starts with the UTF-16 one.
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

# C0/C1 controls other than tab and newline never carry meaning in extracted text, and
# zero-width characters can hide words from a reader (e.g. "ig\u200bnore" in an injection).
# ZWJ/ZWNJ stay: several scripts and emoji need them. Lone surrogates (PDF fonts produce them)
# and noncharacters cannot be stored as UTF-8.
_INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u2060\ufeff\ud800-\udfff\ufffe\uffff]")
_HSPACE = re.compile(r"[^\S\n]+")
_BLANK_LINES = re.compile(r"\n{3,}")


def has_bom(data: bytes) -> bool:
    """Whether the bytes start with a Unicode byte-order mark."""
    return any(data.startswith(bom) for bom, _ in _BOMS)


def decode_text(data: bytes) -> str:
    """Decode uploaded text: BOM if present, else UTF-8, else cp1252, else Latin-1 (which never fails)."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return data.decode(codec, errors="replace")
    for codec in ("utf-8", "cp1252"):
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")


def normalise_newlines(text: str) -> str:
    """Turn CRLF and lone CR into LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def strip_invisible(text: str) -> str:
    """Remove control and zero-width characters."""
    return _INVISIBLE.sub("", text)


def tidy_lines(text: str) -> str:
    """Collapse horizontal whitespace, trim lines and keep at most one blank line between paragraphs.

    Expects LF newlines. The result is NFC-normalised so that equal words compare equal in search.
    """
    lines = [_HSPACE.sub(" ", line).strip() for line in text.split("\n")]
    joined = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    return unicodedata.normalize("NFC", joined)


def extract_plain_text(data: bytes) -> Extracted:
    """Plain text is one section; splitting it up is the chunker's job."""
    text = tidy_lines(strip_invisible(normalise_newlines(decode_text(data))))
    sections = [Section(text=text, heading=None, page=None)] if text else []
    return Extracted(title=None, sections=sections, pages_total=None, pages_skipped=0)
