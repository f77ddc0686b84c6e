"""Ingestion end to end: the declared charset reaches the extractor, unreadable text fails."""

import random

import httpx
from sqlalchemy import text

from app.ingestion.extract_model import TEXT_UNREADABLE
from tests.conftest import PUBLIC_IP
from tests.helpers import create_kb

GERMAN = "Die Größe der Bäckerei überrascht: Übermaß an Brötchen, süße Teilchen und Käsekuchen."
# The same bytes read differently as windows-1250 (the meta tag) and iso-8859-2 (the header).
POLISH = "Źródło: Świętokrzyskie ślady. Właściwie każda osoba ma prawo do pomocy, gdy jest źle."


async def _chunk_texts(engine, doc_id):
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT text FROM chunks WHERE document_id = :d ORDER BY ordinal"), {"d": doc_id}
        )
        return [r.text for r in rows]


async def _doc(client, org, kb_id, doc_id):
    r = await client.get(f"/api/knowledge/{kb_id}/documents/{doc_id}", headers=org.headers)
    assert r.status_code == 200
    return r.json()


async def test_url_page_is_read_in_the_charset_of_its_http_header(
    client, app, org, drain_queue, engine, respx_mock
):
    page = f'<html><head><meta charset="windows-1250"></head><body><p>{POLISH}</p></body></html>'
    route = respx_mock.get(f"https://{PUBLIC_IP}/zrodla").mock(
        return_value=httpx.Response(
            200,
            content=page.encode("iso-8859-2"),
            headers={"Content-Type": "text/html; charset=ISO-8859-2"},
        )
    )
    kb = await create_kb(client, org.headers)
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={"url": "https://help.example.com/zrodla"},
        headers=org.headers,
    )
    assert r.status_code == 202
    assert await drain_queue() == {"ready": 1}
    assert route.calls[0].request.headers["Host"] == "help.example.com"
    assert await _chunk_texts(engine, r.json()["id"]) == [POLISH]


async def test_undeclared_latin1_upload_is_indexed_readable(client, app, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": ("bakery.html", f"<p>{GERMAN}</p>".encode("latin-1"), "text/html")},
        headers=org.headers,
    )
    assert r.status_code == 202
    assert await drain_queue() == {"ready": 1}
    assert await _chunk_texts(engine, r.json()["id"]) == [GERMAN]


async def test_unreadable_page_fails_with_a_reason_and_is_never_ready(
    client, app, org, drain_queue, engine, respx_mock
):
    noise = bytes(byte or 1 for byte in random.Random(0).randbytes(3000))
    respx_mock.get(f"https://{PUBLIC_IP}/noise").mock(
        return_value=httpx.Response(200, content=noise, headers={"Content-Type": "text/html"})
    )
    kb = await create_kb(client, org.headers)
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={"url": "https://help.example.com/noise"},
        headers=org.headers,
    )
    assert r.status_code == 202
    assert await drain_queue() == {"failed": 1}
    got = await _doc(client, org, kb["id"], r.json()["id"])
    assert (got["status"], got["error"]) == ("failed", TEXT_UNREADABLE)
    assert await _chunk_texts(engine, r.json()["id"]) == []


async def test_unreadable_upload_is_refused(client, app, org):
    noise = bytes(byte or 1 for byte in random.Random(0).randbytes(3000))
    kb = await create_kb(client, org.headers)
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": ("page.html", noise, "text/html")},
        headers=org.headers,
    )
    assert (r.status_code, r.json()["detail"]) == (
        415,
        "the file is binary, not html; upload .txt, .md, .html, .pdf, .docx, .pptx, .xlsx or .csv",
    )
