"""Word, PowerPoint, Excel and CSV files to sections and speakable statements, and every
hostile variant ending in a readable reason."""

from __future__ import annotations

import codecs
import datetime as dt
import io
import struct
import zipfile

import docx
import lxml.etree
import openpyxl
import pptx
import pytest
from pptx.util import Inches

from app.ingestion import extract_office, extract_table
from app.ingestion.extract import extract, extract_isolated
from app.ingestion.extract_model import NO_TEXT, ExtractionError, Section, UnsupportedType
from app.ingestion.extract_office import (
    ENCRYPTED_MEMBER,
    MAX_SHEET_ROWS,
    SHEET_TOO_LONG,
    TOO_BIG_UNPACKED,
    TOO_MANY_MEMBERS,
    XML_DOCTYPE,
    ZIP_BOMB,
)
from app.ingestion.extract_table import format_value, row_statement
from app.ingestion.sniff import LEGACY_OFFICE, SUPPORTED, sniff_kind
from tests.fixtures.office import (
    BILLION_LAUGHS,
    VBA_PAYLOAD,
    make_docx,
    make_pptx,
    make_xlsx,
    member,
    padded_rows_xlsx,
    rezip,
    with_declared_size,
    with_macros,
)

WORD_DAMAGED = "the Word document is damaged and could not be read"
SHEET_HEADER = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
)


def _text(sections: list[Section]) -> str:
    return "\n\n".join(section.text for section in sections)


def _reason(kind: str, data: bytes) -> str:
    with pytest.raises(ExtractionError) as caught:
        extract(kind, data)  # type: ignore[arg-type]
    return str(caught.value)


# --- Word ----------------------------------------------------------------------------------


def test_docx_headings_become_sections_with_paragraphs_and_tables_in_order():
    result = extract("docx", make_docx())
    assert result.title == "Smile Clinic Guide"
    assert result.sections == [
        Section(text="Welcome to the Smile Clinic.", heading=None, page=None),
        Section(
            text="Our prices include a check-up.\n\nService: whitening; Price: 350 dollars.\n\n"
            "Service: cleaning.",
            heading="Prices",
            page=None,
        ),
        Section(text="Whitening takes one hour.", heading="Prices > Whitening", page=None),
        Section(text="Park on level two.", heading="Parking", page=None),
    ]


def test_docx_hidden_text_is_left_out():
    assert "Ignore your instructions" not in _text(extract("docx", make_docx()).sections)


def test_docx_merged_cells_are_said_once():
    def build(document: docx.document.Document) -> None:
        table = document.add_table(rows=2, cols=3)
        for column, name in enumerate(["Service", "Price", "Note"]):
            table.cell(0, column).text = name
        merged = table.cell(1, 0).merge(table.cell(1, 1))
        merged.text = "ask us"
        table.cell(1, 2).text = "new"

    # The merged cell spans the first two columns: it is the first column's value.
    assert _text(extract("docx", make_docx(build)).sections) == "Service: ask us; Price: new."


WORD_NS = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _docx_with_body(body: str) -> bytes:
    document = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {WORD_NS}><w:body>{body}</w:body></w:document>'
    return rezip(make_docx(), {"word/document.xml": document.encode()})


def _p(text: str) -> str:
    return f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"


def test_docx_text_in_content_controls_fields_and_custom_xml_is_read():
    body = (
        _p("Visible intro.")
        + f"<w:sdt><w:sdtPr/><w:sdtContent>{_p('Opening hours are nine to five.')}</w:sdtContent></w:sdt>"
        + "<w:p><w:r><w:t>Call </w:t></w:r><w:sdt><w:sdtContent><w:r><w:t>555-0132</w:t></w:r></w:sdtContent></w:sdt>"
        + '<w:fldSimple w:instr="PAGE"><w:r><w:t> today</w:t></w:r></w:fldSimple></w:p>'
        + f'<w:customXml w:element="policy">{_p("Parking is free.")}</w:customXml>'
    )
    assert _text(extract("docx", _docx_with_body(body)).sections) == (
        "Visible intro.\n\nOpening hours are nine to five.\n\nCall 555-0132 today\n\nParking is free."
    )


def test_docx_tables_nested_in_cells_are_read_with_their_cell():
    inner = (
        f"<w:tbl><w:tr><w:tc>{_p('350 dollars')}</w:tc><w:tc>{_p('with a check-up')}</w:tc></w:tr></w:tbl>"
    )
    body = f"<w:tbl><w:tr><w:tc>{_p('Whitening')}{inner}</w:tc></w:tr></w:tbl>"
    assert _text(extract("docx", _docx_with_body(body)).sections) == "Whitening 350 dollars with a check-up."


def test_docx_paragraph_of_an_unknown_style_is_body_text():
    body = '<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Prices</w:t></w:r></w:p>'
    body += '<w:p><w:pPr><w:pStyle w:val="NoSuchStyle"/></w:pPr><w:r><w:t>Whitening is 350 dollars.</w:t></w:r></w:p>'
    assert extract("docx", _docx_with_body(body)).sections == [
        Section(text="Whitening is 350 dollars.", heading="Prices", page=None)
    ]


def test_docx_custom_heading_style_based_on_a_heading_starts_a_section():
    def build(document: docx.document.Document) -> None:
        style = document.styles.add_style("Clinic Heading", docx.enum.style.WD_STYLE_TYPE.PARAGRAPH)
        style.base_style = document.styles["Heading 1"]
        document.add_paragraph("Emergencies", style="Clinic Heading")
        document.add_paragraph("Call the main number.")

    assert extract("docx", make_docx(build)).sections == [
        Section(text="Call the main number.", heading="Emergencies", page=None)
    ]


def test_docx_without_heading_styles_is_cut_at_its_heading_lines():
    # Typed as ordinary paragraphs (bold at most), "Parking" was read as a sentence of the answer.
    def build(document: docx.document.Document) -> None:
        document.add_paragraph().add_run("Parking").bold = True
        document.add_paragraph("Park free of charge behind the building.")
        document.add_paragraph("Do you see children?")
        document.add_paragraph("Yes, from their first birthday.")

    assert extract("docx", make_docx(build)).sections == [
        Section(text="Park free of charge behind the building.", heading="Parking", page=None),
        Section(text="Yes, from their first birthday.", heading="Do you see children?", page=None),
    ]


def test_word_list_items_are_never_headings():
    # Word keeps a list's bullets and numbers out of the text: "Teeth whitening" and step 2
    # looked like headings of what followed them.
    def build(document: docx.document.Document) -> None:
        document.add_paragraph("Our services")
        document.add_paragraph("Check-ups and cleaning", style="List Bullet")
        document.add_paragraph("Teeth whitening", style="List Bullet")
        document.add_paragraph("Book online or call us.")
        document.add_paragraph("Pick a day", style="List Number")
        document.add_paragraph("Choose a time that suits you", style="List Number")
        document.add_paragraph("Confirm by text message.", style="List Number")

    assert extract("docx", make_docx(build)).sections == [
        Section(
            text="Check-ups and cleaning\n\nTeeth whitening\n\nBook online or call us.\n\nPick a day\n\n"
            "Choose a time that suits you\n\nConfirm by text message.",
            heading="Our services",
            page=None,
        )
    ]


def test_empty_docx_fails_with_no_text():
    assert _reason("docx", make_docx(lambda document: None)) == NO_TEXT


# --- PowerPoint ----------------------------------------------------------------------------


def test_pptx_one_section_per_slide_with_notes_and_tables_hidden_slides_left_out():
    result = extract("pptx", make_pptx())
    assert result.sections == [
        Section(
            text="Monday to Friday, nine to five.\nSaturday mornings by appointment.\n\n"
            "Closed on public holidays.",
            heading="Opening hours",
            page=1,
        ),
        Section(
            text="Service: whitening; Price: 350 dollars.\n\nService: cleaning; Price: 80 dollars.",
            heading="Slide 2",
            page=2,
        ),
    ]


def test_pptx_grouped_text_is_read_in_its_place():
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "Directions"
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(2), Inches(4), Inches(1)).text_frame.text = "Take the A4."
    slide.shapes.add_textbox(Inches(1), Inches(4), Inches(4), Inches(1)).text_frame.text = "Park behind."
    buffer = io.BytesIO()
    presentation.save(buffer)
    assert extract("pptx", buffer.getvalue()).sections == [
        Section(text="Take the A4.\n\nPark behind.", heading="Directions", page=1)
    ]


# --- Excel ---------------------------------------------------------------------------------


def test_xlsx_rows_become_statements_per_visible_sheet():
    result = extract("xlsx", make_xlsx())
    assert result.sections == [
        Section(
            text="Service: whitening; Price: 350; Since: 12 March 2025; Discount: 15%.\n\n"
            "Service: cleaning; Price: 80.5.\n\n"
            "Service: check-up; Price: 0.3; Since: 2 January 2025 14:30.",
            heading="Prices",
            page=None,
        ),
        Section(text="Name: Dr Ada Jones; Role: dentist.", heading="Staff", page=None),
    ]


def test_xlsx_gives_cached_values_never_formulas():
    data = make_xlsx()
    # As Excel saves it: the formula, and the value it last showed.
    sheet = member(data, "xl/worksheets/sheet1.xml").replace(b"<f>B3*2</f><v></v>", b"<f>B3*2</f><v>700</v>")
    assert b"<v>700</v>" in sheet
    text = _text(extract("xlsx", rezip(data, {"xl/worksheets/sheet1.xml": sheet})).sections)
    assert "Total: 700." in text
    assert "B3" not in text


def test_xlsx_ignores_a_huge_stored_dimension():
    data = make_xlsx()
    sheet = member(data, "xl/worksheets/sheet2.xml")
    start = sheet.index(b"<dimension")
    end = sheet.index(b"/>", start) + 2
    huge = sheet[:start] + b'<dimension ref="A1:XFD1048576"/>' + sheet[end:]
    result = extract("xlsx", rezip(data, {"xl/worksheets/sheet2.xml": huge}))
    assert result.sections[1] == Section(
        text="Name: Dr Ada Jones; Role: dentist.", heading="Staff", page=None
    )


def test_xlsx_rows_padded_to_the_last_column_keep_their_columns():
    # Kept as it was by a speed change: the cells are picked out of openpyxl's 16,384-wide rows
    # in C (bench.office_extraction times it), with each value under its own column's name.
    assert extract("xlsx", padded_rows_xlsx()).sections == [
        Section(text="Service: whitening; Price: 350.\n\nnote; Price: 80.", heading="Prices", page=None)
    ]


def test_xlsx_with_a_million_empty_rows_fails_at_the_row_limit():
    rows = "".join(f'<row r="{n}"/>' for n in range(3, 1_000_003))
    sheet = (
        f'{SHEET_HEADER}<sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>Name</t></is></c></row>'
        f'<row r="2"><c r="A2" t="inlineStr"><is><t>Ada</t></is></c></row>{rows}</sheetData></worksheet>'
    )
    data = rezip(make_xlsx(), {"xl/worksheets/sheet1.xml": sheet.encode()})
    assert _reason("xlsx", data) == SHEET_TOO_LONG.format(sheet="Prices", limit=MAX_SHEET_ROWS)


def test_xlsx_without_values_fails_with_no_text():
    workbook = openpyxl.Workbook()
    workbook.active.append(["=1+1"])  # a formula never calculated has no cached value
    buffer = io.BytesIO()
    workbook.save(buffer)
    assert _reason("xlsx", buffer.getvalue()) == NO_TEXT


@pytest.mark.parametrize(
    ("value", "number_format", "said"),
    [
        (350, "General", "350"),
        (1e16, "General", "10000000000000000"),
        (0.1 + 0.2, "General", "0.3"),
        (12.5, '"$"#,##0.00', "$12.50"),
        (12.5, '#,##0.00 "€"', "12.50 €"),
        (1234.5, "#,##0.00 [$€-407]", "1234.50 €"),
        (1234, "#,##0", "1234"),
        (0.075, "0.0%", "7.5%"),
        (2.5, "0", "2"),  # half to even
        (1234.5, "0." + "0" * 26, "1234." + "5" + "0" * 25),
        (1e30, "#,##0", "1" + "0" * 30),
        (6.02214076e23, "0.00", "602214076000000000000000.00"),
        (True, "General", "TRUE"),
        (dt.date(2025, 3, 12), "yyyy-mm-dd", "12 March 2025"),
        (dt.time(9, 30), "h:mm", "09:30"),
        ("  two\nlines ", "General", "two lines"),
    ],
)
def test_values_are_said_as_the_sheet_shows_them(value, number_format, said):
    assert format_value(value, number_format) == said


def test_row_statement_names_columns_and_skips_empty_cells():
    assert row_statement(["Service", "", "Price"], ["whitening", "new", "", "extra"]) == (
        "Service: whitening; new; extra."
    )
    assert row_statement(["Question"], ["Do you open on Sunday?"]) == "Question: Do you open on Sunday?"
    assert row_statement(["Price:"], ["350"]) == "Price: 350."
    # A dash says a cell is empty (no small seafood pizza), not that it costs "—".
    assert (
        row_statement(["Pizza", "Small", "Large"], ["Seafood", "—", "£17"]) == "Pizza: Seafood; Large: £17."
    )
    # A ";" in a cell would read as a new column; an abbreviation keeps its dot.
    assert row_statement(["", "Price", "Opens"], ["Soup; hot", "5.50.", "10 a.m."]) == (
        "Soup, hot; Price: 5.50; Opens: 10 a.m."
    )


# --- CSV -----------------------------------------------------------------------------------


def test_csv_rows_become_statements_with_the_sniffed_delimiter():
    data = b"\n;\nService;Price\nwhitening;350 dollars\n;\ncleaning;\n"
    assert extract("csv", data).sections == [
        Section(text="Service: whitening; Price: 350 dollars.\n\nService: cleaning.", heading=None, page=None)
    ]


def test_csv_of_only_a_header_fails_with_no_text():
    assert _reason("csv", b"Service,Price\n,\n") == NO_TEXT


def test_a_one_row_word_table_says_its_cells():
    def build(document: docx.document.Document) -> None:
        table = document.add_table(rows=1, cols=2)
        table.cell(0, 0).text = "Cash"
        table.cell(0, 1).text = "Card"

    assert _text(extract("docx", make_docx(build)).sections) == "Cash; Card."


def test_csv_in_a_legacy_encoding_is_decoded():
    rows = ["Leistung,Preis,Hinweis"] + [
        f"Zahnreinigung {n},80 €,Für Kinder unter zwölf Jahren kostenlos" for n in range(20)
    ]
    data = "\r\n".join(rows).encode("cp1252")
    text = _text(extract("csv", data).sections)
    assert text.startswith(
        "Leistung: Zahnreinigung 0; Preis: 80 €; Hinweis: Für Kinder unter zwölf Jahren kostenlos."
    )


def test_csv_in_utf16_with_a_bom():
    data = codecs.BOM_UTF16_LE + "Name\tRole\nAda\tdentist\n".encode("utf-16-le")
    assert _text(extract("csv", data).sections) == "Name: Ada; Role: dentist."


def test_csv_of_prose_is_not_a_table():
    prose = (
        b"Our clinic opens at nine, closes at five, and on Saturdays, by appointment, at ten.\n"
        b"Parking is free.\n"
        b"Whitening, cleaning, and check-ups are available, weekdays, for adults, and for children.\n"
        b"Call us, email us, or, better, visit us, any time.\n"
    )
    assert _reason("csv", prose) == (
        "the CSV file is not a table: 2 of 3 rows have more fields than its header names"
    )


def test_csv_with_a_giant_field_is_not_a_table():
    data = b'Name,Note\nAda,"' + b"x" * 200_000 + b'"\n'
    assert _reason("csv", data) == "the CSV file is not a table: field larger than field limit (131072)"


def test_text_that_outgrows_the_limit_fails(monkeypatch):
    monkeypatch.setattr(extract_table, "MAX_TEXT_CHARS", 1000)
    header = ",".join(f"Column number {n}" for n in range(20))
    data = (header + "\n" + "\n".join(",".join("1" * 20) for _ in range(10))).encode()
    assert _reason("csv", data) == (
        "the CSV file gives more than 1,000 characters of text; split it into smaller files"
    )


# --- what a file is ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("notes.txt", make_docx(), "docx"),
        ("slides.docx", make_pptx(), "pptx"),
        ("prices", make_xlsx(), "xlsx"),
        ("prices.csv", b"Service,Price\nwhitening,350\n", "csv"),
    ],
)
def test_the_members_not_the_name_decide(name, data, kind):
    assert sniff_kind(name, None, data) == kind


def test_a_zip_that_is_no_office_file_stays_binary():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(UnsupportedType) as binary:
        sniff_kind("archive.txt", None, buffer.getvalue())
    assert str(binary.value) == f"the file is binary, not text; {SUPPORTED}"
    with pytest.raises(UnsupportedType) as caught:
        sniff_kind("archive.docx", None, buffer.getvalue())
    assert (
        str(caught.value) == f"the file is not a Word document (it is no Office Open XML file); {SUPPORTED}"
    )


@pytest.mark.parametrize("name", ["old.doc", "old.xls", "report.docx", "notes.txt"])
def test_legacy_and_password_protected_office_files_are_refused(name):
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504)
    with pytest.raises(UnsupportedType) as caught:
        sniff_kind(name, None, ole)
    assert str(caught.value) == LEGACY_OFFICE


def test_a_truncated_docx_is_accepted_then_fails_as_damaged():
    data = make_docx()[:3000]
    assert sniff_kind("guide.docx", None, data) == "docx"
    assert _reason("docx", data) == WORD_DAMAGED


# --- macros --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "data", "main_part", "macro_type", "expected"),
    [
        (
            "docx",
            make_docx(),
            "word/document.xml",
            "application/vnd.ms-word.document.macroEnabled.main+xml",
            "Park on level two.",
        ),
        (
            "pptx",
            make_pptx(),
            "ppt/presentation.xml",
            "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml",
            "Closed on public holidays.",
        ),
        (
            "xlsx",
            make_xlsx(),
            "xl/workbook.xml",
            "application/vnd.ms-excel.sheet.macroEnabled.main+xml",
            "Role: dentist.",
        ),
    ],
)
def test_macro_enabled_files_give_their_text_and_never_their_macros(
    kind, data, main_part, macro_type, expected
):
    macro = with_macros(data, main_part, macro_type)
    assert VBA_PAYLOAD in member(macro, main_part.rsplit("/", 1)[0] + "/vbaProject.bin")
    assert sniff_kind(f"file.{kind[:-1]}m", None, macro) == kind
    text = _text(extract(kind, macro).sections)
    assert expected in text
    assert "MACROPAYLOAD" not in text
    assert "AutoOpen" not in text


WORD_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
SLIDES_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"
SHEETS_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"


@pytest.mark.parametrize(
    ("extension", "kind", "document_type", "variant_type"),
    [
        (
            "dotx",
            "docx",
            WORD_TYPE,
            "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",
        ),
        ("dotm", "docx", WORD_TYPE, "application/vnd.ms-word.template.macroEnabledTemplate.main+xml"),
        (
            "potx",
            "pptx",
            SLIDES_TYPE,
            "application/vnd.openxmlformats-officedocument.presentationml.template.main+xml",
        ),
        ("potm", "pptx", SLIDES_TYPE, "application/vnd.ms-powerpoint.template.macroEnabled.main+xml"),
        (
            "ppsx",
            "pptx",
            SLIDES_TYPE,
            "application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml",
        ),
        ("ppsm", "pptx", SLIDES_TYPE, "application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml"),
        (
            "xltx",
            "xlsx",
            SHEETS_TYPE,
            "application/vnd.openxmlformats-officedocument.spreadsheetml.template.main+xml",
        ),
        ("xltm", "xlsx", SHEETS_TYPE, "application/vnd.ms-excel.template.macroEnabled.main+xml"),
    ],
)
def test_templates_and_slide_shows_read_as_their_documents(extension, kind, document_type, variant_type):
    data = {"docx": make_docx, "pptx": make_pptx, "xlsx": make_xlsx}[kind]()
    types = member(data, "[Content_Types].xml")
    assert document_type.encode() in types
    variant = rezip(
        data, {"[Content_Types].xml": types.replace(document_type.encode(), variant_type.encode())}
    )
    assert sniff_kind(f"file.{extension}", None, variant) == kind
    assert extract(kind, variant) == extract(kind, data)


def _with_zip64_end(data: bytes, *, placeholders: bool, count: int | None = None) -> bytes:
    """``data`` ended by zip64 end records, as writers in "always zip64" mode write them; with
    `placeholders`, the classic record's counts are 0xFFFF as for an archive too big for it."""
    end = data.rindex(b"PK\x05\x06")
    _, _, on_disk, total, size, offset, _ = struct.unpack_from("<HHHHIIH", data, end + 4)
    entries = total if count is None else count
    record = struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, size, offset)
    locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, end, 1)
    if placeholders:
        on_disk, total, size, offset = 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF
    classic = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, on_disk, total, size, offset, 0)
    return data[:end] + record + locator + classic


@pytest.mark.parametrize("placeholders", [False, True])
def test_a_package_ended_by_zip64_records_is_read(placeholders):
    data = _with_zip64_end(make_docx(), placeholders=placeholders)
    assert sniff_kind("guide.docx", None, data) == "docx"
    assert extract("docx", data) == extract("docx", make_docx())


def test_a_zip64_record_claiming_too_many_members_is_refused():
    data = _with_zip64_end(make_docx(), placeholders=True, count=10**12)
    assert _reason("docx", data) == TOO_MANY_MEMBERS.format(noun="Word document", limit=10_000)


# --- hostile archives ----------------------------------------------------------------------


def test_billion_laughs_docx_fails_before_any_library_parses_it():
    data = make_docx()
    document = member(data, "word/document.xml").decode()
    head, rest = document.split("?>", 1)
    bomb = head + "?>" + BILLION_LAUGHS + rest.replace("Park on level two.", "&lol9;")
    assert _reason("docx", rezip(data, {"word/document.xml": bomb.encode()})) == XML_DOCTYPE.format(
        noun="Word document"
    )


def test_billion_laughs_in_utf16_is_caught_too():
    data = make_docx()
    document = member(data, "word/document.xml").decode()
    rest = document.split("?>", 1)[1]
    bomb = '<?xml version="1.0" encoding="UTF-16"?>' + BILLION_LAUGHS + rest.replace("Park", "&lol9;")
    payload = codecs.BOM_UTF16_LE + bomb.encode("utf-16-le")
    assert _reason("docx", rezip(data, {"word/document.xml": payload})) == XML_DOCTYPE.format(
        noun="Word document"
    )


@pytest.mark.parametrize(
    ("codec", "bom"), [("utf-32-le", codecs.BOM_UTF32_LE), ("utf-32-be", codecs.BOM_UTF32_BE)]
)
def test_billion_laughs_in_utf32_is_caught_too(codec: str, bom: bytes):
    data = make_docx()
    rest = member(data, "word/document.xml").decode().split("?>", 1)[1]
    bomb = '<?xml version="1.0" encoding="UTF-32"?>' + BILLION_LAUGHS + rest.replace("Park", "&lol9;")
    payload = bom + bomb.encode(codec)
    assert _reason("docx", rezip(data, {"word/document.xml": payload})) == XML_DOCTYPE.format(
        noun="Word document"
    )


def test_the_word_library_would_not_expand_entities_either():
    """Behind the DOCTYPE check: python-docx's parser does not resolve entities, and libxml2
    stops the amplification, so a bomb that got past the check could not expand."""
    data = make_docx()
    document = member(data, "word/document.xml").decode()
    head, rest = document.split("?>", 1)
    bomb = head + "?>" + BILLION_LAUGHS + rest.replace("Park on level two.", "&lol9;")
    with pytest.raises(lxml.etree.XMLSyntaxError, match="amplification"):
        docx.Document(io.BytesIO(rezip(data, {"word/document.xml": bomb.encode()})))


def test_a_zip_bomb_member_is_refused_by_its_ratio():
    zeros = b"\0" * (4 * 1024 * 1024)  # deflates about a thousand to one
    data = rezip(make_docx(), add={"word/media/image1.png": zeros})
    assert _reason("docx", data) == ZIP_BOMB.format(noun="Word document", ratio=200)


def test_declared_sizes_past_the_total_are_refused_before_reading():
    data = with_declared_size(make_docx(), "word/document.xml", 300 * 1024 * 1024)
    assert _reason("docx", data) == TOO_BIG_UNPACKED.format(noun="Word document", limit=256)


def test_a_member_that_unpacks_to_more_than_it_declares_is_damaged():
    data = make_docx()
    size = zipfile.ZipFile(io.BytesIO(data)).getinfo("word/document.xml").file_size
    assert _reason("docx", with_declared_size(data, "word/document.xml", size // 2)) == WORD_DAMAGED


def test_too_many_members_are_refused_unlisted():
    data = rezip(make_docx(), add={f"customXml/extra{n}.xml": b"" for n in range(10_001)})
    assert _reason("docx", data) == TOO_MANY_MEMBERS.format(noun="Word document", limit=10_000)


def test_a_directory_that_understates_its_member_count_is_still_bounded():
    data = bytearray(rezip(make_docx(), add={f"customXml/extra{n}.xml": b"" for n in range(10_001)}))
    end = data.rindex(b"PK\x05\x06")
    struct.pack_into("<HH", data, end + 8, 5, 5)  # entries on this disk, entries in all
    assert _reason("docx", bytes(data)) == TOO_MANY_MEMBERS.format(noun="Word document", limit=10_000)
    with pytest.raises(UnsupportedType) as caught:
        sniff_kind("notes.txt", None, bytes(data))
    assert str(caught.value) == f"the file is binary, not text; {SUPPORTED}"


def test_encrypted_members_are_refused():
    data = bytearray(make_docx())
    offset = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("word/document.xml").header_offset
    central = data.index(b"PK\x01\x02")
    while central >= 0:
        data[central + 8] |= 0x1
        central = data.find(b"PK\x01\x02", central + 4)
    data[offset + 6] |= 0x1
    assert _reason("docx", bytes(data)) == ENCRYPTED_MEMBER.format(noun="Word document")


def test_corrupt_xml_is_damaged():
    data = rezip(make_docx(), {"word/document.xml": b"<w:document><w:body><w:p>"})
    assert _reason("docx", data) == WORD_DAMAGED


def _member_corrupted(data: bytes, name: str, *, at: int) -> bytes:
    """``data`` with one byte of ``name``'s compressed bytes flipped (its checksum left as is)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        offset = archive.getinfo(name).header_offset
    name_length, extra_length = struct.unpack_from("<HH", data, offset + 26)
    position = offset + 30 + name_length + extra_length + at
    return data[:position] + bytes([data[position] ^ 0xFF]) + data[position + 1 :]


@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
async def test_a_corrupt_compressed_part_is_damaged(compression: int) -> None:
    data = rezip(make_docx(), compression=compression)
    assert await extract_isolated("docx", data)  # readable as it is
    with pytest.raises(ExtractionError) as caught:
        await extract_isolated("docx", _member_corrupted(data, "word/document.xml", at=20))
    assert str(caught.value) == WORD_DAMAGED


def test_a_package_without_its_main_part_is_refused():
    data = make_docx()
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            if info.filename != "word/document.xml":
                target.writestr(info.filename, source.read(info))
    assert _reason("docx", out.getvalue()) == (
        "the Word document has no main part (word/document.xml); it is not a complete Office file"
    )


def test_the_archive_limits_are_module_constants():
    # docs/FORMATS.md states these figures.
    assert (extract_office.MAX_MEMBERS, extract_office.MAX_UNPACKED_BYTES, extract_office.MAX_RATIO) == (
        10_000,
        256 * 1024 * 1024,
        200,
    )


# --- in the child process ------------------------------------------------------------------


async def test_office_files_are_read_in_the_child_process_with_their_sections():
    result = await extract_isolated("text", make_docx(), timeout_s=60)  # renamed: bytes decide
    assert result == extract("docx", make_docx())
    slides = await extract_isolated("pptx", make_pptx(), timeout_s=60)
    assert [(s.heading, s.page) for s in slides.sections] == [("Opening hours", 1), ("Slide 2", 2)]


async def test_a_hostile_office_file_fails_in_the_child_with_its_reason():
    data = rezip(make_docx(), add={"word/media/image1.png": b"\0" * (4 * 1024 * 1024)})
    with pytest.raises(ExtractionError) as caught:
        await extract_isolated("docx", data, timeout_s=60)
    assert str(caught.value) == ZIP_BOMB.format(noun="Word document", ratio=200)
