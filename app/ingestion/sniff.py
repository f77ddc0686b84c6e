"""What a file is, decided by its bytes as well as its name.

A name or a content type is a claim; the bytes settle it. A PDF is read as a PDF whatever it
is called (a PDF renamed .txt was once indexed as raw bytes, and a caller was read its
"/Filter [/ASCII85Decode /FlateDecode]"), an HTML document sent as .txt is read as HTML, and
binary data is never read as text.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from app.ingestion.extract_model import SourceKind, UnsupportedType
from app.ingestion.extract_plain import has_bom

_EXTENSIONS: dict[str, SourceKind] = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
_CONTENT_TYPES: dict[str, SourceKind] = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
}
# What `vk sync` picks up from a folder: the files an upload can be by their name alone.
SUPPORTED_EXTENSIONS = frozenset(_EXTENSIONS)
SUPPORTED = "upload .txt, .md, .html or .pdf"
_PDF_MAGIC_WINDOW = 1024  # PDF readers accept the header anywhere in the first KiB
# A file that does not claim to be a PDF is one only if it starts like one.
_PDF_START = re.compile(rb"\s*%PDF-\d")
_HTML_START = re.compile(rb"\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html)[\s>]", re.IGNORECASE | re.DOTALL)
_PROBE = 8192
# Formats that are binary without necessarily holding a NUL byte early on.
_BINARY_MAGIC = (
    b"PK\x03\x04",  # zip: docx, xlsx, pptx, odt, epub, jar
    b"PK\x05\x06",
    b"\x1f\x8b",  # gzip
    b"BZh",
    b"\xfd7zXZ\x00",
    b"7z\xbc\xaf\x27\x1c",
    b"Rar!\x1a\x07",
    b"\x28\xb5\x2f\xfd",  # zstd
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",  # OLE: doc, xls, ppt, msg
    b"\x7fELF",
    b"\x89PNG",
    b"\xff\xd8\xff",  # JPEG
    b"GIF87a",
    b"GIF89a",
    b"RIFF",  # WAV, AVI, WebP
    b"ID3",  # MP3
    b"OggS",
    b"fLaC",
    b"wOFF",
    b"wOF2",
    b"SQLite format 3\x00",
)
# Control bytes that text never holds (tab, newlines, form feed and escape excepted).
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_CONTROL_SHARE = 0.02


def sniff_kind(filename: str | None, content_type: str | None, data: bytes) -> SourceKind:
    """Decide what an upload is: its extension, else its content type, says what it claims to be,
    then content_kind checks that against its bytes.

    Raises UnsupportedType for anything else, and for bytes that are not what is claimed
    and not anything readable (binary data called text, a ".pdf" without a PDF header).
    """
    extension = PurePath(filename).suffix.lower() if filename else ""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    kind = _EXTENSIONS.get(extension) or _CONTENT_TYPES.get(media_type)
    if kind is None:
        if extension:
            raise UnsupportedType(f"unsupported file type '{extension}'; {SUPPORTED}")
        if media_type:
            raise UnsupportedType(f"unsupported file type '{media_type}'; {SUPPORTED}")
        raise UnsupportedType(f"the file type could not be recognised; {SUPPORTED}")
    return content_kind(kind, data)


def content_kind(claimed: SourceKind, data: bytes, *, refuse_control_bytes: bool = True) -> SourceKind:
    """What the bytes are, given what they claim to be: a PDF is a PDF, a whole HTML document
    sent as text is HTML, and anything else keeps its claimed kind if its bytes can be text.

    Raises UnsupportedType for a claimed PDF without a PDF header and for binary data: a known
    binary format, or (with `refuse_control_bytes`, for files) NUL and other control bytes.
    Text that came as a JSON string may hold a NUL; decoding drops it.
    """
    if claimed == "pdf":
        if b"%PDF" not in data[:_PDF_MAGIC_WINDOW]:
            raise UnsupportedType(f"the file is not a PDF (it has no PDF header); {SUPPORTED}")
        return "pdf"
    if _PDF_START.match(data):
        return "pdf"
    if has_bom(data):
        # UTF-16/32 text has NUL bytes too; with a BOM it is text.
        return claimed
    if _is_binary(data[:_PROBE], refuse_control_bytes=refuse_control_bytes):
        raise UnsupportedType(f"the file is binary, not {claimed}; {SUPPORTED}")
    if claimed == "text" and _HTML_START.match(data):
        return "html"
    return claimed


def _is_binary(probe: bytes, *, refuse_control_bytes: bool) -> bool:
    if probe.startswith(_BINARY_MAGIC):
        return True
    if not refuse_control_bytes:
        return False
    return b"\x00" in probe or len(_CONTROL_BYTES.findall(probe)) > _CONTROL_SHARE * len(probe)
