"""PDF pages that cannot be read are counted in pages_skipped, not passed off as blank pages:
pages_total - pages_skipped is the number of pages whose text was read."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from app.ingestion.extract import Extracted, ExtractionError, Section, extract, extract_isolated
from tests.fixtures.pdfs import (
    BROKEN_PAGE_KINDS,
    blank_page_with_trailing_bytes_pdf,
    broken_page_pdf,
    code_points_as_glyphs_pdf,
    mixed_fonts_pdf,
    slow_pages_pdf,
)

DAMAGED = "the PDF is damaged and could not be read"
UNMAPPED_FONTS = (
    "the PDF's text cannot be read: its fonts map their glyphs to no characters (copying its "
    "text gives gibberish); export it again from the original document"
)
UNMAPPED_KINDS = ("unmapped-glyphs", "shifted-glyphs")
PAGES = ["Page one", "Page two", "Page three"]


@pytest.mark.parametrize("kind", BROKEN_PAGE_KINDS)
async def test_broken_page_is_skipped_and_counted(kind: str) -> None:
    result = await extract_isolated("pdf", broken_page_pdf(PAGES, broken={2}, kind=kind))
    assert result == Extracted(
        title=None,
        sections=[Section("Page one", None, 1), Section("Page three", None, 3)],
        pages_total=3,
        pages_skipped=1,
    )


@pytest.mark.parametrize("kind", [kind for kind in BROKEN_PAGE_KINDS if kind not in UNMAPPED_KINDS])
def test_pdf_whose_every_page_is_broken_is_damaged(kind: str) -> None:
    with pytest.raises(ExtractionError) as caught:
        extract("pdf", broken_page_pdf(PAGES, broken={1, 2, 3}, kind=kind))
    assert str(caught.value) == DAMAGED


@pytest.mark.parametrize("kind", UNMAPPED_KINDS)
async def test_pdf_whose_every_page_shows_unmapped_glyphs_says_so(kind: str) -> None:
    with pytest.raises(ExtractionError) as caught:
        await extract_isolated("pdf", broken_page_pdf(PAGES, broken={1, 2, 3}, kind=kind))
    assert str(caught.value) == UNMAPPED_FONTS


def test_broken_and_capped_pages_are_both_skipped() -> None:
    data = broken_page_pdf([*PAGES, "Page four"], broken={2}, kind="garbage-flate")
    result = extract("pdf", data, max_pages=3)
    assert (result.sections, result.pages_total, result.pages_skipped) == (
        [Section("Page one", None, 1), Section("Page three", None, 3)],
        4,
        2,
    )


def test_stray_bytes_after_a_flate_stream_leave_the_page_blank() -> None:
    # Only a stream that ends early or is not zlib data is broken; bytes after its end are not.
    result = extract("pdf", blank_page_with_trailing_bytes_pdf("Page one"))
    assert (result.sections, result.pages_total, result.pages_skipped) == (
        [Section("Page one", None, 1)],
        2,
        0,
    )


async def test_document_with_a_broken_page_is_ready_with_the_page_skipped(
    client, org, drain_queue, engine
) -> None:
    drained, got = await _ingest(
        client, org, drain_queue, broken_page_pdf(PAGES, broken={2}, kind="truncated-flate")
    )
    assert drained == {"ready": 1}
    async with engine.connect() as conn:
        pages = (
            await conn.execute(
                text("SELECT page FROM chunks WHERE document_id = :d ORDER BY ordinal"), {"d": got["id"]}
            )
        ).scalars()
        chunk_pages = sorted(set(pages))
    assert (got["status"], got["error"], got["pages_total"], got["pages_skipped"], chunk_pages) == (
        "ready",
        None,
        3,
        1,
        [1, 3],
    )


async def test_document_whose_every_page_is_broken_fails_with_the_reason(client, org, drain_queue) -> None:
    drained, got = await _ingest(
        client, org, drain_queue, broken_page_pdf(PAGES, broken={1, 2, 3}, kind="garbage-flate")
    )
    assert (drained, got["status"], got["error"], got["chunk_count"]) == ({"failed": 1}, "failed", DAMAGED, 0)


def test_glyph_codes_that_are_code_points_are_text() -> None:
    result = extract("pdf", code_points_as_glyphs_pdf("Opening hours are nine to five"))
    assert result.sections == [Section("Opening hours are nine to five", None, 1)]


def test_glyph_numbers_of_one_font_are_left_out_of_a_page() -> None:
    # The heading and footer are in a font with a character map, the middle line in one
    # without: its glyph numbers would read "4XDUWHUO\x03UHVXOWV".
    result = extract("pdf", mixed_fonts_pdf("Opening hours", "Quarterly results"))
    assert (result.sections, result.pages_skipped) == ([Section("Opening hours\nOpening hours", None, 1)], 0)


async def test_a_pdf_page_over_the_page_time_is_skipped_by_the_worker(client, app, org, drain_queue) -> None:
    # The second page's 200,000 text operators take pypdf a few seconds: read under the
    # default page time (10 s), skipped under the 1 s set here.
    settings = app.state.settings
    ingestion = settings.ingestion.model_copy(update={"parse_page_timeout_s": 1.0})
    app.state.settings = settings.model_copy(update={"ingestion": ingestion})
    drained, got = await _ingest(
        client, org, drain_queue, slow_pages_pdf(["Page one", None], operators=200_000)
    )
    assert (drained, got["status"], got["pages_total"], got["pages_skipped"]) == ({"ready": 1}, "ready", 2, 1)


async def _ingest(client, org, drain_queue, pdf: bytes) -> tuple[dict[str, int], dict[str, Any]]:
    """Upload ``pdf`` to a new knowledge base and run the worker: what it did, and the document."""
    kb = (await client.post("/api/knowledge", json={"title": "Manuals"}, headers=org.headers)).json()
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": ("manual.pdf", pdf, "application/pdf")},
        headers=org.headers,
    )
    assert r.status_code == 202, r.text
    drained = await drain_queue()
    got = await client.get(f"/api/knowledge/{kb['id']}/documents/{r.json()['id']}", headers=org.headers)
    return drained, got.json()
