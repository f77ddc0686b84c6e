"""Word, PowerPoint and Excel files (Office Open XML) to sectioned text.

An OOXML file is a zip of XML parts, and every part of it is untrusted: the archive is
checked before any library opens it (member count, declared sizes, compression ratio, every
member read back under its declared size, no XML document type), and the libraries then
read only what was checked. Macro-enabled files are read for their text: the VBA project is
blanked before the library sees the package, so macro code never becomes text, and nothing
in the file is ever run.

Runs in the extraction child process (app.ingestion.extract_worker), under its memory and
CPU limits, as PDFs do.
"""

from __future__ import annotations

import io
import itertools
import logging
import lzma
import operator
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

from app.ingestion.extract_model import (
    OFFICE_DAMAGED,
    OFFICE_NOUNS,
    Extracted,
    ExtractionError,
    Section,
    SourceKind,
)
from app.ingestion.extract_plain import normalise_newlines, plain_sections, strip_invisible, tidy_lines
from app.ingestion.extract_table import TextBudget, clean_cell, format_value, table_statements

logger = logging.getLogger(__name__)

# Limits on the archive, checked before any library opens it. A real Word or Excel file of
# the 20 MB upload limit unpacks to some 50-250 MB and compresses its parts 5-50 to 1; a zip
# bomb compresses hundreds or a thousand to 1.
MAX_MEMBERS = 10_000
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
MAX_RATIO = 200
_RATIO_FROM_BYTES = 1024 * 1024  # small parts (a repeated style table) may compress further
# Rows read per sheet, empty ones included: past this a sheet is refused, not cut short.
MAX_SHEET_ROWS = 100_000

TOO_MANY_MEMBERS = "the {noun} has more than {limit:,} parts; it is not an ordinary Office file"
TOO_BIG_UNPACKED = "the {noun} unpacks to more than {limit} MB; split it into smaller files"
ZIP_BOMB = "the {noun} has a part compressed more than {ratio} to 1, as zip bombs are; it was not read"
ENCRYPTED_MEMBER = "the {noun} has encrypted parts; save a copy without a password"
XML_DOCTYPE = (
    "the {noun} declares an XML document type, which Office files never do"
    " (it is how entity-expansion attacks start); it was not read"
)
NO_MAIN_PART = "the {noun} has no main part ({part}); it is not a complete Office file"
SHEET_TOO_LONG = "the sheet '{sheet}' has more than {limit:,} rows; split it into smaller files"

# An OOXML package lists its content types and main part by these names: the list of a
# zip's members is enough to tell which kind of file it is.
_CONTENT_TYPES = "[Content_Types].xml"
_MAIN_PARTS: tuple[tuple[str, SourceKind], ...] = (
    ("word/document.xml", "docx"),
    ("ppt/presentation.xml", "pptx"),
    ("xl/workbook.xml", "xlsx"),
)
_EOCD = b"PK\x05\x06"
_EOCD_SIZE = 22
_EOCD_WINDOW = _EOCD_SIZE + 0xFFFF  # the record, and a comment of at most 64 KiB
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_LOCATOR_SIZE = 20
_ZIP64_END = b"PK\x06\x06"
_ZIP64_END_SIZE = 56
_CENTRAL_RECORD = b"PK\x01\x02"
_CENTRAL_RECORD_SIZE = 46
_UTF8_NAMES = 0x800
_READ_BLOCK = 64 * 1024
_DOCTYPES = tuple(
    "<!DOCTYPE".encode(codec) for codec in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")
)
_DOCTYPE_OVERLAP = max(len(pattern) for pattern in _DOCTYPES) - 1
_XML_SUFFIXES = (".xml", ".rels", ".vml")
_VBA_PART = re.compile(r"(?:^|/)vba[^/]*\.bin$", re.IGNORECASE)
_WORD = b"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
_SLIDES = b"application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"
_SHEETS = b"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"
# Macro-enabled files, templates and slide shows differ from documents only in their main
# part's type, which the libraries check (python-docx refuses a .docm or a .dotx): it is
# given the document's type in a copy of the package.
_VARIANT_TYPES = (
    (b"application/vnd.ms-word.document.macroEnabled.main+xml", _WORD),
    (b"application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml", _WORD),
    (b"application/vnd.ms-word.template.macroEnabledTemplate.main+xml", _WORD),
    (b"application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml", _SLIDES),
    (b"application/vnd.openxmlformats-officedocument.presentationml.template.main+xml", _SLIDES),
    (b"application/vnd.ms-powerpoint.template.macroEnabled.main+xml", _SLIDES),
    (b"application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml", _SLIDES),
    (b"application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml", _SLIDES),
    (b"application/vnd.ms-excel.sheet.macroEnabled.main+xml", _SHEETS),
    (b"application/vnd.openxmlformats-officedocument.spreadsheetml.template.main+xml", _SHEETS),
    (b"application/vnd.ms-excel.template.macroEnabled.main+xml", _SHEETS),
)
_HEADING_STYLE = re.compile(r"heading\s*([1-9])$", re.IGNORECASE)
_STYLE_DEPTH = 5  # how far up a style's "based on" chain a heading is looked for
_SHEET_ERRORS = frozenset(
    {"#NULL!", "#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#N/A", "#GETTING_DATA"}
)


class DamagedArchive(Exception):
    """The bytes start like a zip but are not a readable one."""


class TooManyMembers(DamagedArchive):
    """The zip lists more than MAX_MEMBERS members."""


def ooxml_kind(data: bytes) -> SourceKind | None:
    """What Office file a zip is, told by its members; None for a zip that is none of them.

    Runs where uploads are received, so it reads only the zip's central directory, itself
    and by its own bounds: zipfile would build an object for every entry of a directory that
    claims a few and holds hundreds of thousands. Raises DamagedArchive for a zip that cannot
    be listed (cut short, corrupt) and TooManyMembers past MAX_MEMBERS.
    """
    names = set(_member_names(data))
    if _CONTENT_TYPES not in names:
        return None
    return next((kind for part, kind in _MAIN_PARTS if part in names), None)


def _member_names(data: bytes) -> list[str]:
    """The names in the zip's central directory, read record by record up to MAX_MEMBERS."""
    end = data.rfind(_EOCD, max(0, len(data) - _EOCD_WINDOW))
    if end < 0 or end + _EOCD_SIZE > len(data):
        raise DamagedArchive("no end of central directory record")
    record = end - _ZIP64_LOCATOR_SIZE - _ZIP64_END_SIZE
    if record >= 0 and data[end - _ZIP64_LOCATOR_SIZE : end - _ZIP64_LOCATOR_SIZE + 4] == _ZIP64_LOCATOR:
        # A zip64 end record (written for large archives, or always by some writers) holds
        # the real counts and sits between the directory and the classic record, as zipfile
        # reads it.
        if data[record : record + 4] != _ZIP64_END:
            raise DamagedArchive("the zip64 end of central directory record is missing")
        count, directory_size = struct.unpack_from("<QQ", data, record + 32)
        end = record
    else:
        count, directory_size = struct.unpack_from("<HI", data, end + 10)
    if count > MAX_MEMBERS:
        raise TooManyMembers(count)
    # Measured back from the end record, as zipfile does: data prepended to the zip (a
    # self-extracting stub) shifts the stored offset, not this.
    position = end - directory_size
    if position < 0:
        raise DamagedArchive("the central directory lies before the file")
    names: list[str] = []
    while position < end:
        if data[position : position + 4] != _CENTRAL_RECORD or position + _CENTRAL_RECORD_SIZE > end:
            raise DamagedArchive("a central directory record is broken")
        if len(names) == MAX_MEMBERS:
            raise TooManyMembers(len(names) + 1)
        flags = struct.unpack_from("<H", data, position + 8)[0]
        name_length, extra_length, comment_length = struct.unpack_from("<HHH", data, position + 28)
        raw = data[position + _CENTRAL_RECORD_SIZE : position + _CENTRAL_RECORD_SIZE + name_length]
        names.append(raw.decode("utf-8" if flags & _UTF8_NAMES else "cp437", errors="replace"))
        position += _CENTRAL_RECORD_SIZE + name_length + extra_length + comment_length
    return names


def checked_package(data: bytes, kind: SourceKind) -> bytes:
    """The package a library may open: the same bytes once every limit is checked, or for a
    macro-enabled file, a template or a slide show a copy typed as a document, its VBA
    project blanked.

    Raises ExtractionError with the reason for anything over the limits or damaged.
    """
    noun = OFFICE_NOUNS[kind]
    try:
        _member_names(data)
        archive = zipfile.ZipFile(io.BytesIO(data))
    except TooManyMembers as exc:
        raise ExtractionError(TOO_MANY_MEMBERS.format(noun=noun, limit=MAX_MEMBERS)) from exc
    except (DamagedArchive, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise ExtractionError(OFFICE_DAMAGED.format(noun=noun)) from exc
    with archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:  # zipfile may read a directory differently from us
            raise ExtractionError(TOO_MANY_MEMBERS.format(noun=noun, limit=MAX_MEMBERS))
        _check_sizes(members, noun)
        main = next(part for part, main_kind in _MAIN_PARTS if main_kind == kind)
        names = {member.filename for member in members}
        if main not in names or _CONTENT_TYPES not in names:
            raise ExtractionError(NO_MAIN_PART.format(noun=noun, part=main))
        macros = False
        for member in members:
            if _VBA_PART.search(member.filename):
                macros = True  # never read, not even to check: it is blanked below
                continue
            _read_checked(archive, member, noun)
        content_types = archive.read(_CONTENT_TYPES)
        if not macros and not any(variant in content_types for variant, _ in _VARIANT_TYPES):
            return data
        return _as_document(archive, members)


def _check_sizes(members: Sequence[zipfile.ZipInfo], noun: str) -> None:
    total = 0
    for member in members:
        if member.flag_bits & 0x1:
            raise ExtractionError(ENCRYPTED_MEMBER.format(noun=noun))
        total += member.file_size
        if total > MAX_UNPACKED_BYTES:
            raise ExtractionError(TOO_BIG_UNPACKED.format(noun=noun, limit=MAX_UNPACKED_BYTES // 1024**2))
        if member.file_size > _RATIO_FROM_BYTES and member.file_size > MAX_RATIO * max(
            1, member.compress_size
        ):
            raise ExtractionError(ZIP_BOMB.format(noun=noun, ratio=MAX_RATIO))


def _read_checked(archive: zipfile.ZipFile, member: zipfile.ZipInfo, noun: str) -> None:
    """Inflate one member in blocks, never past its declared size (zipfile stops there too,
    and then finds the checksum wrong), and look for an XML document type in XML parts."""
    is_xml = member.filename.lower().endswith(_XML_SUFFIXES) or member.filename == _CONTENT_TYPES
    size = 0
    tail = b""
    try:
        with archive.open(member) as stream:
            while block := stream.read(_READ_BLOCK):
                size += len(block)
                if size > member.file_size:
                    raise ExtractionError(OFFICE_DAMAGED.format(noun=noun))
                if is_xml:
                    window = tail + block
                    if any(pattern in window for pattern in _DOCTYPES):
                        raise ExtractionError(XML_DOCTYPE.format(noun=noun))
                    tail = window[-_DOCTYPE_OVERLAP:]
    except ExtractionError:
        raise
    except (
        zipfile.BadZipFile,
        zlib.error,
        lzma.LZMAError,
        EOFError,
        OSError,
        NotImplementedError,
        RuntimeError,
    ) as exc:
        # A wrong checksum, a cut-short or corrupt stream, an unknown compression method.
        logger.debug("member %r of the %s is unreadable: %s", member.filename, noun, exc)
        raise ExtractionError(OFFICE_DAMAGED.format(noun=noun)) from exc


def _as_document(archive: zipfile.ZipFile, members: Sequence[zipfile.ZipInfo]) -> bytes:
    """A copy of the package with every VBA project emptied (its relationships still resolve)
    and its main part typed as a plain document's."""
    copy = io.BytesIO()
    with zipfile.ZipFile(copy, "w", zipfile.ZIP_STORED) as out:
        for member in members:
            if _VBA_PART.search(member.filename):
                out.writestr(member.filename, b"")
                continue
            content = archive.read(member)
            if member.filename == _CONTENT_TYPES:
                for variant_type, document_type in _VARIANT_TYPES:
                    content = content.replace(variant_type, document_type)
            out.writestr(member.filename, content)
    return copy.getvalue()


def extract_office(kind: SourceKind, data: bytes) -> Extracted:
    """Read a checked Word, PowerPoint or Excel file; ExtractionError with the reason otherwise."""
    noun = OFFICE_NOUNS[kind]
    package = checked_package(data, kind)
    reader = {"docx": _read_docx, "pptx": _read_pptx, "xlsx": _read_xlsx}[kind]
    try:
        return reader(io.BytesIO(package), TextBudget(noun))
    except (ExtractionError, MemoryError):
        raise
    except Exception as exc:  # the libraries raise many types on malformed XML and parts
        logger.debug("the %s could not be read", noun, exc_info=True)
        raise ExtractionError(OFFICE_DAMAGED.format(noun=noun)) from exc


# --- Word ---------------------------------------------------------------------------------


def _read_docx(package: io.BytesIO, budget: TextBudget) -> Extracted:
    """Body paragraphs and tables in order; "Heading N" paragraphs (and styles based on them)
    start sections, the first "Title" paragraph is the title. Headers, footers, comments and
    hidden text are left out."""
    import docx  # noqa: PLC0415 - only in the extraction process
    from docx.table import Table  # noqa: PLC0415

    document = docx.Document(package)
    title: str | None = None
    writer = _SectionWriter()
    heading_level = _HeadingLevels(document.styles.element)
    for block in _docx_blocks(document.element.body, document):
        if isinstance(block, Table):
            for statement in table_statements(_docx_rows(block)):
                writer.paragraph(budget.spend(statement))
            continue
        text = budget.spend(_paragraph_text(block))
        if not text:
            continue
        level, is_title = heading_level(block._p.style)
        if is_title and title is None:
            title = clean_cell(text)
        elif level:
            writer.heading(level, clean_cell(text))  # a line break in a heading is a space
        else:
            writer.paragraph(text, item=_is_list_item(block))
    if title is None:
        title = clean_cell(document.core_properties.title or "") or None
    return Extracted(title=title, sections=writer.finish(), pages_total=None, pages_skipped=0)


def _is_list_item(paragraph: Any) -> bool:
    """Numbered or bulleted: its numbering (w:numPr) or a list style ("List Bullet"); Word
    keeps the bullet out of the text."""
    element = paragraph._p
    numbered = element.pPr is not None and element.pPr.numPr is not None
    return numbered or (element.style or "").lower().startswith("list")


def _docx_blocks(container: Any, parent: Any) -> Iterator[Any]:
    """The paragraphs and tables of a body or table cell in order, also those inside content
    controls (w:sdt) and custom XML, which python-docx's own iteration passes over."""
    from docx.oxml.ns import qn  # noqa: PLC0415
    from docx.table import Table  # noqa: PLC0415
    from docx.text.paragraph import Paragraph  # noqa: PLC0415

    for element in container.iterchildren():
        if element.tag == qn("w:p"):
            yield Paragraph(element, parent)
        elif element.tag == qn("w:tbl"):
            yield Table(element, parent)
        elif element.tag == qn("w:sdt"):
            content = element.find(qn("w:sdtContent"))
            if content is not None:
                yield from _docx_blocks(content, parent)
        elif element.tag == qn("w:customXml"):
            yield from _docx_blocks(element, parent)


# Runs directly in the paragraph, or inside links, insertions, smart tags, inline content
# controls, simple fields and custom XML; not deleted or moved-away runs.
_PARAGRAPH_RUNS = (
    "./w:r | ./w:hyperlink/w:r | ./w:ins/w:r | ./w:smartTag/w:r | ./w:sdt/w:sdtContent/w:r"
    " | ./w:fldSimple/w:r | ./w:customXml/w:r"
)


def _paragraph_text(paragraph: Any) -> str:
    """The paragraph's visible text: runs marked hidden (w:vanish) are dropped, as hidden
    HTML is, since text no reader sees is where injected instructions hide."""
    from docx.text.run import Run  # noqa: PLC0415

    parts: list[str] = []
    for element in paragraph._p.xpath(_PARAGRAPH_RUNS):
        run = Run(element, paragraph)
        if run.font.hidden:
            continue
        parts.append(run.text)
    return tidy_lines(strip_invisible(normalise_newlines("".join(parts))))


class _HeadingLevels:
    """A paragraph style's heading level (0 for none) and whether it is the title style, by
    style id, each found once: python-docx's `paragraph.style` scans every style of the
    document for every paragraph (a millisecond each with Word's 160 built-in styles)."""

    def __init__(self, styles: Any) -> None:
        from docx.oxml.ns import qn  # noqa: PLC0415

        self._qn = qn
        self._styles: dict[str, Any] = {}
        self._default: str | None = None
        for style in styles.iterchildren(qn("w:style")):
            if style.get(qn("w:type")) != "paragraph":
                continue
            style_id = style.get(qn("w:styleId"))
            self._styles.setdefault(style_id, style)
            if self._default is None and style.get(qn("w:default")) in ("1", "true", "on"):
                self._default = style_id
        self._levels: dict[str | None, tuple[int, bool]] = {}

    def __call__(self, style_id: str | None) -> tuple[int, bool]:
        if style_id not in self._levels:
            self._levels[style_id] = self._find(style_id if style_id in self._styles else self._default)
        return self._levels[style_id]

    def _find(self, style_id: str | None) -> tuple[int, bool]:
        qn = self._qn
        for _ in range(_STYLE_DEPTH):  # up the "based on" chain
            style = self._styles.get(style_id) if style_id is not None else None
            if style is None:
                break
            name_element = style.find(qn("w:name"))
            name = (name_element.get(qn("w:val")) if name_element is not None else None) or ""
            if name.strip().lower() == "title":
                return 0, True
            match = _HEADING_STYLE.match(name.strip())
            if match:
                return int(match.group(1)), False
            based_on = style.find(qn("w:basedOn"))
            style_id = based_on.get(qn("w:val")) if based_on is not None else None
        return 0, False


def _docx_rows(table: Any) -> Iterator[list[str]]:
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells:
            # A cell merged across columns comes once per column it spans.
            if previous is not None and cell._tc is previous:
                continue
            previous = cell._tc
            cells.append(clean_cell(_cell_text(cell)))
        yield cells


def _cell_text(cell: Any) -> str:
    """A cell's paragraphs, and the cells of tables nested in it, as one line."""
    from docx.table import Table  # noqa: PLC0415

    parts: list[str] = []
    for block in _docx_blocks(cell._tc, cell):
        if isinstance(block, Table):
            parts.extend(text for row in _docx_rows(block) for text in row if text)
        else:
            parts.append(_paragraph_text(block))
    return " ".join(parts)


# --- PowerPoint ---------------------------------------------------------------------------


def _read_pptx(package: io.BytesIO, budget: TextBudget) -> Extracted:
    """One section per visible slide, headed by its title (else "Slide N", N its number),
    holding its text boxes and tables in order, then its speaker notes."""
    import pptx  # noqa: PLC0415 - only in the extraction process

    presentation = pptx.Presentation(package)
    sections: list[Section] = []
    for number, slide in enumerate(presentation.slides, start=1):
        if slide._element.get("show") in ("0", "false"):
            continue  # a hidden slide is not shown to anyone: not spoken either
        title_shape = slide.shapes.title
        title = clean_cell(title_shape.text_frame.text) if title_shape is not None else ""
        paragraphs: list[str] = []
        for shape in _shapes(slide.shapes):
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            paragraphs.extend(budget.spend(text) for text in _shape_texts(shape))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None:
                paragraphs.append(budget.spend(tidy_lines(strip_invisible(normalise_newlines(notes.text)))))
        body = tidy_lines("\n\n".join(text for text in paragraphs if text))
        if body:
            sections.append(Section(text=body, heading=title or f"Slide {number}", page=number))
        elif title:
            sections.append(Section(text=title, heading=f"Slide {number}", page=number))
    name = clean_cell(presentation.core_properties.title or "") or None
    return Extracted(title=name, sections=sections, pages_total=None, pages_skipped=0)


def _shapes(shapes: Any) -> Iterator[Any]:
    """Shapes in order, the members of groups in their place (nesting bounded by the XML)."""
    from pptx.shapes.group import GroupShape  # noqa: PLC0415

    stack: list[Iterator[Any]] = [iter(shapes)]
    while stack:
        shape = next(stack[-1], None)
        if shape is None:
            stack.pop()
        elif isinstance(shape, GroupShape):
            stack.append(iter(shape.shapes))
        else:
            yield shape


def _shape_texts(shape: Any) -> Iterator[str]:
    if shape.has_table:
        rows = ([clean_cell(cell.text) for cell in row.cells] for row in shape.table.rows)
        yield from table_statements(rows)
    elif shape.has_text_frame:
        yield tidy_lines(strip_invisible(normalise_newlines(shape.text_frame.text)))


# --- Excel --------------------------------------------------------------------------------


def _read_xlsx(package: io.BytesIO, budget: TextBudget) -> Extracted:
    """One section per visible worksheet, named after it: its rows as statements, the first
    non-empty row being the header. Values are the ones the sheet last showed (cached
    results, never formulas); charts and hidden sheets are left out."""
    # openpyxl ships no type hints.
    import openpyxl  # type: ignore[import-untyped]  # noqa: PLC0415 - only in the extraction process

    # read_only streams rows instead of building every cell; data_only gives cached values.
    # openpyxl parses with defusedxml when it is installed, as it is here.
    workbook = openpyxl.load_workbook(package, read_only=True, data_only=True)
    try:
        sections: list[Section] = []
        for sheet in workbook.worksheets:
            if sheet.sheet_state != "visible":
                continue
            # The stored dimension may claim A1:XFD1048576; only the rows present are read.
            sheet.reset_dimensions()
            statements = [budget.spend(s) for s in table_statements(_sheet_rows(sheet), lone_row=False)]
            if statements:
                heading = clean_cell(sheet.title) or None
                sections.append(Section(text="\n\n".join(statements), heading=heading, page=None))
        title = clean_cell(workbook.properties.title or "") or None
    finally:
        workbook.close()
    return Extracted(title=title, sections=sections, pages_total=None, pages_skipped=0)


def _sheet_rows(sheet: Any) -> Iterator[list[str]]:
    """Each row's cells as text, up to its last cell with a value."""
    from openpyxl.cell.read_only import EMPTY_CELL  # type: ignore[import-untyped]  # noqa: PLC0415

    for count, row in enumerate(sheet.iter_rows(), start=1):
        if count > MAX_SHEET_ROWS:
            raise ExtractionError(SHEET_TOO_LONG.format(sheet=clean_cell(sheet.title), limit=MAX_SHEET_ROWS))
        # openpyxl pads a row to its last cell with one shared empty cell, 16,384 wide for a row
        # with a formatted cell in column XFD: the cells it read are picked out in C, not by a
        # Python loop over every column.
        read = itertools.compress(row, map(operator.is_not, row, itertools.repeat(EMPTY_CELL)))
        cells: list[str] = []
        for cell in read:
            value = cell.value
            if value is None or (isinstance(value, str) and value in _SHEET_ERRORS):
                continue
            cells += [""] * (cell.column - 1 - len(cells))
            cells.append(format_value(value, getattr(cell, "number_format", "General") or "General"))
        yield cells


class _SectionWriter:
    """Paragraphs under a heading path such as "Prices > Whitening", as markdown gets them."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []
        self._heading: str | None = None
        self._paragraphs: list[str] = []
        self._items: set[str] = set()  # the first lines of list items
        self._sections: list[Section] = []

    def heading(self, level: int, text: str) -> None:
        self._flush()
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, text))
        self._heading = " > ".join(part for _, part in self._stack)

    def paragraph(self, text: str, *, item: bool = False) -> None:
        if text:
            self._paragraphs.append(text)
            if item:
                self._items.add(text.split("\n", 1)[0])

    def _flush(self) -> None:
        body = tidy_lines("\n\n".join(self._paragraphs))
        if body:
            self._sections.append(Section(text=body, heading=self._heading, page=None))
        self._paragraphs = []

    def finish(self) -> list[Section]:
        """The sections; in a document with no heading style at all, cut at the paragraphs
        that read as headings (a short line typed as a title), as plain
        text is."""
        self._flush()
        if not self._stack and len(self._sections) == 1:
            return plain_sections(self._sections[0].text, items=self._items)
        return self._sections
