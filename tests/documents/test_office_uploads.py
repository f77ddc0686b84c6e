"""Word, PowerPoint, Excel and CSV files uploaded through the API, ingested by the worker
against the real database, and read back as chunks; hostile ones end `failed` with a reason
while the others still get indexed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.office import (
    BILLION_LAUGHS,
    make_docx,
    make_pptx,
    make_xlsx,
    member,
    rezip,
    with_declared_size,
    with_macros,
)
from tests.helpers import create_kb

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


@pytest.fixture
async def kb(client, org):
    # Chunks as large as allowed: one chunk per section keeps the expectations readable.
    return await create_kb(client, org.headers, chunk_tokens=2000)


async def _upload(client, org, kb, name: str, data: bytes, content_type: str = "application/octet-stream"):
    return await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": (name, data, content_type)},
        headers=org.headers,
    )


async def _uploaded(client, org, kb, name: str, data: bytes, content_type: str = "application/octet-stream"):
    r = await _upload(client, org, kb, name, data, content_type)
    assert r.status_code == 202, r.text
    return r.json()


async def _document(client, org, kb, doc_id: str) -> dict[str, Any]:
    r = await client.get(f"/api/knowledge/{kb['id']}/documents/{doc_id}", headers=org.headers)
    assert r.status_code == 200, r.text
    return r.json()


async def _chunks(client, org, kb, doc_id: str) -> list[tuple[str | None, int | None, str]]:
    r = await client.get(f"/api/knowledge/{kb['id']}/documents/{doc_id}/chunks", headers=org.headers)
    assert r.status_code == 200, r.text
    return [(c["section"], c["page"], c["text"]) for c in r.json()["items"]]


async def test_docx_upload_is_chunked_by_its_headings(client, org, kb, drain_queue):
    doc = await _uploaded(client, org, kb, "guide.docx", make_docx(), DOCX_TYPE)
    assert doc["source_kind"] == "docx"
    assert await drain_queue() == {"ready": 1}
    assert await _chunks(client, org, kb, doc["id"]) == [
        (None, None, "Welcome to the Smile Clinic."),
        (
            "Prices",
            None,
            "Our prices include a check-up.\n\nService: whitening; Price: 350 dollars.\n\nService: cleaning.",
        ),
        ("Prices > Whitening", None, "Whitening takes one hour."),
        ("Parking", None, "Park on level two."),
    ]


async def test_pptx_upload_has_a_section_per_slide_with_notes(client, org, kb, drain_queue):
    doc = await _uploaded(client, org, kb, "hours.pptx", make_pptx())
    assert doc["source_kind"] == "pptx"
    assert await drain_queue() == {"ready": 1}
    assert await _chunks(client, org, kb, doc["id"]) == [
        (
            "Opening hours",
            1,
            "Monday to Friday, nine to five.\nSaturday mornings by appointment.\n\nClosed on public holidays.",
        ),
        ("Slide 2", 2, "Service: whitening; Price: 350 dollars.\n\nService: cleaning; Price: 80 dollars."),
    ]


async def test_xlsx_upload_says_each_row_with_its_columns(client, org, kb, drain_queue):
    doc = await _uploaded(client, org, kb, "prices.xlsx", make_xlsx())
    assert doc["source_kind"] == "xlsx"
    assert await drain_queue() == {"ready": 1}
    assert await _chunks(client, org, kb, doc["id"]) == [
        (
            "Prices",
            None,
            "Service: whitening; Price: 350; Since: 12 March 2025; Discount: 15%.\n\n"
            "Service: cleaning; Price: 80.5.\n\n"
            "Service: check-up; Price: 0.3; Since: 2 January 2025 14:30.",
        ),
        ("Staff", None, "Name: Dr Ada Jones; Role: dentist."),
    ]


async def test_csv_upload_by_content_type(client, org, kb, drain_queue):
    doc = await _uploaded(
        client,
        org,
        kb,
        "export",
        b"Service;Price\r\nwhitening;350 dollars\r\ncleaning;80 dollars\r\n",
        "text/csv",
    )
    assert doc["source_kind"] == "csv"
    assert await drain_queue() == {"ready": 1}
    assert await _chunks(client, org, kb, doc["id"]) == [
        (None, None, "Service: whitening; Price: 350 dollars.\n\nService: cleaning; Price: 80 dollars.")
    ]


async def test_a_docx_called_txt_is_read_as_a_docx(client, org, kb, drain_queue):
    doc = await _uploaded(client, org, kb, "guide.txt", make_docx(), "text/plain")
    assert doc["source_kind"] == "docx"
    assert await drain_queue() == {"ready": 1}
    chunks = await _chunks(client, org, kb, doc["id"])
    assert chunks[-1] == ("Parking", None, "Park on level two.")
    assert "PK" not in "".join(text for _, _, text in chunks)


async def test_a_macro_enabled_workbook_gives_its_text_not_its_macros(client, org, kb, drain_queue):
    data = with_macros(make_xlsx(), "xl/workbook.xml", "application/vnd.ms-excel.sheet.macroEnabled.main+xml")
    doc = await _uploaded(client, org, kb, "prices.xlsm", data)
    assert doc["source_kind"] == "xlsx"
    assert await drain_queue() == {"ready": 1}
    text = "".join(text for _, _, text in await _chunks(client, org, kb, doc["id"]))
    assert "Role: dentist." in text
    assert "MACROPAYLOAD" not in text


async def test_legacy_office_files_are_refused_with_advice(client, org, kb):
    r = await _upload(client, org, kb, "prices.xls", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(1000))
    assert r.status_code == 415, r.text
    assert r.json()["detail"] == (
        "the file is a legacy Office file (.doc, .xls or .ppt) or a password-protected one, which "
        "cannot be read; open it in Office and save it as .docx, .xlsx or .pptx without a password"
    )


async def test_unsupported_types_are_refused_with_the_list_of_formats(client, org, kb):
    r = await _upload(client, org, kb, "slides.key", b"keynote")
    assert r.status_code == 415, r.text
    assert r.json()["detail"] == (
        "unsupported file type '.key'; upload .txt, .md, .html, .pdf, .docx, .pptx, .xlsx or .csv"
    )


def _billion_laughs_docx() -> bytes:
    data = make_docx()
    document = member(data, "word/document.xml").decode()
    head, rest = document.split("?>", 1)
    return rezip(data, {"word/document.xml": (head + "?>" + BILLION_LAUGHS + rest).encode()})


async def test_hostile_files_fail_with_reasons_and_the_rest_still_ingests(client, org, kb, drain_queue):
    hostile = {
        "bomb.docx": (
            rezip(make_docx(), add={"word/media/image1.png": b"\0" * (4 * 1024 * 1024)}),
            "the Word document has a part compressed more than 200 to 1, as zip bombs are; it was not read",
        ),
        "laughs.docx": (
            _billion_laughs_docx(),
            "the Word document declares an XML document type, which Office files never do"
            " (it is how entity-expansion attacks start); it was not read",
        ),
        "cut.docx": (make_docx()[:3000], "the Word document is damaged and could not be read"),
        "liar.pptx": (
            with_declared_size(make_pptx(), "ppt/presentation.xml", 10),
            "the presentation is damaged and could not be read",
        ),
        "broken.xlsx": (
            rezip(make_xlsx(), {"xl/worksheets/sheet1.xml": b"<worksheet><sheetData><row>"}),
            "the spreadsheet is damaged and could not be read",
        ),
        "empty.docx": (make_docx(lambda document: None), "no text found"),
    }
    ids = {name: (await _uploaded(client, org, kb, name, data))["id"] for name, (data, _) in hostile.items()}
    good = await _uploaded(client, org, kb, "hours.pptx", make_pptx())
    assert await drain_queue() == {"failed": len(hostile), "ready": 1}
    for name, (_, reason) in hostile.items():
        doc = await _document(client, org, kb, ids[name])
        assert (name, doc["status"], doc["error"], doc["chunk_count"]) == (name, "failed", reason, 0)
    assert (await _document(client, org, kb, good["id"]))["status"] == "ready"


async def test_new_json_content_for_a_word_document_is_read_as_text(client, org, kb, drain_queue):
    doc = await _uploaded(client, org, kb, "guide.docx", make_docx())
    assert await drain_queue() == {"ready": 1}
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}",
        json={"content": "We now open at eight."},
        headers=org.headers,
    )
    assert r.status_code == 200, r.text
    assert r.json()["source_kind"] == "text"
    assert await drain_queue() == {"ready": 1}
    assert await _chunks(client, org, kb, doc["id"]) == [(None, None, "We now open at eight.")]
