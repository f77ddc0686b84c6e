"""What a file is, decided by its bytes as well as its name.

A name or a content type is a claim; the bytes settle it. A PDF is read as a PDF whatever it
is called (a PDF renamed .txt was once indexed as raw bytes, and a caller was read its
"/Filter [/ASCII85Decode /FlateDecode]"), an HTML document sent as .txt is read as HTML, and
binary data is never read as text. A Word, PowerPoint or Excel file is a zip, and which
one it is is told by its members, not its name; a zip that is none of them stays binary.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import PurePath

from app.ingestion.extract_model import OFFICE_NOUNS, SourceKind, UnsupportedType
from app.ingestion.extract_office import DamagedArchive, ooxml_kind
from app.ingestion.extract_plain import has_wide_bom, reads_after_bom

_EXTENSIONS: dict[str, SourceKind] = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
    ".docm": "docx",
    ".dotx": "docx",
    ".dotm": "docx",
    ".pptx": "pptx",
    ".pptm": "pptx",
    ".potx": "pptx",
    ".potm": "pptx",
    ".ppsx": "pptx",
    ".ppsm": "pptx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".xltx": "xlsx",
    ".xltm": "xlsx",
    ".csv": "csv",
}
_LEGACY_EXTENSIONS = frozenset({".doc", ".dot", ".xls", ".xlt", ".ppt", ".pot", ".pps"})
_CONTENT_TYPES: dict[str, SourceKind] = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-word.document.macroenabled.12": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.ms-powerpoint.presentation.macroenabled.12": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.ms-excel.sheet.macroenabled.12": "xlsx",
    "text/csv": "csv",
}
SUPPORTED = "upload .txt, .md, .html, .pdf, .docx, .pptx, .xlsx or .csv"
# Word 97-2003 and kin, and any password-protected Office file: both are OLE compound files.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
LEGACY_OFFICE = (
    "the file is a legacy Office file (.doc, .xls or .ppt) or a password-protected one, which "
    "cannot be read; open it in Office and save it as .docx, .xlsx or .pptx without a password"
)
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
# What `vk sync` picks up from a folder: the files an upload can be by their name alone.
SUPPORTED_EXTENSIONS = frozenset(_EXTENSIONS)
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
    if data.startswith(_OLE_MAGIC) or (kind is None and extension in _LEGACY_EXTENSIONS):
        raise UnsupportedType(LEGACY_OFFICE)
    if kind is None and data.startswith(_ZIP_MAGIC):
        # An Office file under an unknown name (or none) is still what its members say.
        with contextlib.suppress(DamagedArchive):
            kind = ooxml_kind(data)
    if kind is None:
        if extension:
            raise UnsupportedType(f"unsupported file type '{extension}'; {SUPPORTED}")
        if media_type:
            raise UnsupportedType(f"unsupported file type '{media_type}'; {SUPPORTED}")
        raise UnsupportedType(f"the file type could not be recognised; {SUPPORTED}")
    return content_kind(kind, data)


def content_kind(claimed: SourceKind, data: bytes, *, refuse_control_bytes: bool = True) -> SourceKind:
    """What the bytes are, given what they claim to be: a PDF is a PDF, a Word, PowerPoint or
    Excel file is what its zip members say, a whole HTML document sent as text is HTML, and
    anything else keeps its claimed kind if its bytes can be text.

    Raises UnsupportedType for a claimed PDF without a PDF header, a claimed Office file that
    is no zip, a legacy (OLE) Office file, and binary data: a known binary format (a zip that
    is no Office file included), or (with `refuse_control_bytes`, for files) NUL and other
    control bytes. Text that came as a JSON string may hold a NUL; decoding drops it.
    """
    if claimed == "pdf":
        if b"%PDF" not in data[:_PDF_MAGIC_WINDOW]:
            raise UnsupportedType(f"the file is not a PDF (it has no PDF header); {SUPPORTED}")
        return "pdf"
    if data.startswith(_OLE_MAGIC):
        raise UnsupportedType(LEGACY_OFFICE)
    if data.startswith(_ZIP_MAGIC):
        try:
            office = ooxml_kind(data)
        except DamagedArchive:
            if claimed in OFFICE_NOUNS:
                return claimed  # reading it says what is wrong with it, as a failed document
            office = None
        if office is not None:
            return office
    if _PDF_START.match(data):
        return "pdf"
    if claimed in OFFICE_NOUNS:
        raise UnsupportedType(
            f"the file is not a {OFFICE_NOUNS[claimed]} (it is no Office Open XML file); {SUPPORTED}"
        )
    if has_wide_bom(data):
        # UTF-16/32 text has NUL bytes too: with a BOM it is text if it reads as such.
        if reads_after_bom(data[:_PROBE], complete=len(data) <= _PROBE) is not None:
            return claimed
        raise UnsupportedType(f"the file is binary, not {claimed}; {SUPPORTED}")
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
