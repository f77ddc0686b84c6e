"""A file's kind is decided by its bytes: a PDF called text is a PDF, binary is never text."""

import codecs
import random

import pytest
from sqlalchemy import text

from app.ingestion.extract import ExtractionError, UnsupportedType, kind_of_bytes, sniff_kind
from tests.fixtures.pdfs import make_pdf
from tests.helpers import create_kb, create_text_doc

PDF_TEXT = "Park on level two; the lift is next to the ticket machine."
BINARY_NOT_TEXT = "the file is binary, not text; upload .txt, .md, .html, .pdf, .docx, .pptx, .xlsx or .csv"


def _ascii_pdf() -> str:
    # An all-ASCII PDF, which can even be pasted as a JSON string.
    return make_pdf([PDF_TEXT]).replace(b"%\xe2\xe3\xcf\xd3\n", b"").decode("ascii")


@pytest.mark.parametrize(
    ("filename", "content_type"),
    [
        ("notes.txt", "text/plain"),
        ("notes.md", "text/markdown"),
        ("page.html", "text/html"),
        (None, "text/plain"),
    ],
)
def test_a_pdf_is_a_pdf_whatever_it_is_called(filename: str | None, content_type: str) -> None:
    assert sniff_kind(filename, content_type, make_pdf([PDF_TEXT])) == "pdf"
    assert sniff_kind(filename, content_type, b"\n  " + _ascii_pdf().encode()) == "pdf"


def test_text_that_mentions_the_pdf_header_stays_text() -> None:
    assert sniff_kind("notes.txt", "text/plain", b"Files start with %PDF-1.7 and end with %%EOF.") == "text"


@pytest.mark.parametrize(
    "page",
    [
        b"<!DOCTYPE html><html><body><p>x</p></body></html>",
        b"\n<!-- saved -->\n<HTML lang=en><p>x</p></HTML>",
    ],
)
def test_a_whole_html_document_called_text_is_html(page: bytes) -> None:
    assert sniff_kind("page.txt", "text/plain", page) == "html"


def test_text_with_a_tag_in_it_stays_text() -> None:
    assert sniff_kind("notes.txt", "text/plain", b"Type <html> to start a page.") == "text"


def test_text_with_a_form_feed_and_an_escape_stays_text() -> None:
    assert sniff_kind("log.txt", "text/plain", b"page one\x0cpage two \x1b[1mbold\x1b[0m\n" * 20) == "text"


@pytest.mark.parametrize(
    "data",
    [
        b"PK\x03\x04\x14\x00\x06\x00word/document.xml",
        b"\x1f\x8b\x08\x08compressed",
        b"\x89PNG\r\n\x1a\n",
        b"\xff\xd8\xff\xe0JFIF",
        bytes(byte or 1 for byte in random.Random(0).randbytes(3000)),
        codecs.BOM_UTF16_LE + random.Random(0).randbytes(4000),
        codecs.BOM_UTF16_BE + b"\x89PNG\r\n\x1a\n" + random.Random(1).randbytes(12000),
        codecs.BOM_UTF32_LE + random.Random(2).randbytes(400),
    ],
    # OLE files (legacy Office) have their own reason: tests/ingestion/test_extract_office.py.
    ids=[
        "zip",
        "gzip",
        "png",
        "jpeg",
        "noise-without-nul",
        "utf-16-bom-noise",
        "utf-16-bom-png",
        "utf-32-bom-noise",
    ],
)
def test_binary_is_never_text(data: bytes) -> None:
    with pytest.raises(UnsupportedType) as caught:
        sniff_kind("notes.txt", "text/plain", data)
    assert str(caught.value) == BINARY_NOT_TEXT


@pytest.mark.parametrize("bom", [codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE])
def test_text_behind_a_wide_bom_is_text(bom: bytes) -> None:
    codec = {
        codecs.BOM_UTF16_LE: "utf-16-le",
        codecs.BOM_UTF16_BE: "utf-16-be",
        codecs.BOM_UTF32_LE: "utf-32-le",
    }[bom]
    # Longer than the probe, so the probe ends inside a character.
    data = bom + ("Öffnungszeiten: 9 bis 17 Uhr. 営業時間 " * 400).encode(codec)
    assert sniff_kind("notes.txt", "text/plain", data) == "text"


def test_stored_text_that_is_a_pdf_is_read_as_one() -> None:
    assert kind_of_bytes("text", _ascii_pdf().encode()) == "pdf"


def test_stored_text_that_is_an_archive_fails_with_a_reason() -> None:
    with pytest.raises(ExtractionError) as caught:
        kind_of_bytes("text", b"PK\x03\x04\x14\x00\x06\x00word/document.xml")
    assert str(caught.value) == BINARY_NOT_TEXT


async def _chunk_texts(engine, doc_id):
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT text FROM chunks WHERE document_id = :d ORDER BY ordinal"), {"d": doc_id}
        )
        return [r.text for r in rows]


async def test_a_pdf_uploaded_as_txt_is_indexed_as_a_pdf(client, app, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": ("parking.txt", make_pdf([PDF_TEXT]), "text/plain")},
        headers=org.headers,
    )
    assert (r.status_code, r.json()["source_kind"]) == (202, "pdf")
    assert await drain_queue() == {"ready": 1}
    assert await _chunk_texts(engine, r.json()["id"]) == [PDF_TEXT]


async def test_a_pdf_sent_as_text_content_is_indexed_as_a_pdf(client, app, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content=_ascii_pdf(), content_type="text")
    assert await drain_queue() == {"ready": 1}
    assert await _chunk_texts(engine, doc["id"]) == [PDF_TEXT]


async def test_an_archive_uploaded_as_txt_is_415(client, app, org):
    kb = await create_kb(client, org.headers)
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": ("notes.txt", b"PK\x03\x04\x14\x00\x06\x00word/document.xml", "text/plain")},
        headers=org.headers,
    )
    assert r.status_code == 415
    assert r.json()["detail"] == BINARY_NOT_TEXT
