"""GET .../documents/{doc_id}/chunks: what a document was indexed as, page by page, and only
for the organisation that owns it."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.fixtures.pdfs import make_pdf
from tests.helpers import create_kb, create_text_doc

MARKDOWN = "# Hours\n\nWe open at nine.\n\n# Parking\n\nPark on level two.\n\n# Pets\n\nDogs are welcome."


@pytest.fixture
async def kb(client, org):
    return await create_kb(client, org.headers)


def _chunks_path(kb_id: str, doc_id: str) -> str:
    return f"/api/knowledge/{kb_id}/documents/{doc_id}/chunks"


async def _stored_chunks(engine, doc_id: str) -> list[dict[str, object]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT ordinal, text, section, page, token_count FROM chunks"
                " WHERE document_id = :d ORDER BY ordinal"
            ),
            {"d": doc_id},
        )
        return [dict(r._mapping) for r in rows]


async def test_chunks_of_a_ready_document_in_order(client, org, kb, drain_queue, engine):
    doc = await create_text_doc(client, org.headers, kb["id"], content=MARKDOWN, content_type="markdown")
    assert await drain_queue() == {"ready": 1}
    r = await client.get(_chunks_path(kb["id"], doc["id"]), headers=org.headers)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "items": [
            {"ordinal": 0, "text": "We open at nine.", "section": "Hours", "page": None, "token_count": 5},
            {
                "ordinal": 1,
                "text": "Park on level two.",
                "section": "Parking",
                "page": None,
                "token_count": 5,
            },
            {"ordinal": 2, "text": "Dogs are welcome.", "section": "Pets", "page": None, "token_count": 5},
        ],
        "total": 3,
        "limit": 50,
        "offset": 0,
    }
    assert r.json()["items"] == await _stored_chunks(engine, doc["id"])


async def test_chunks_are_paginated(client, org, kb, drain_queue):
    doc = await create_text_doc(client, org.headers, kb["id"], content=MARKDOWN, content_type="markdown")
    assert await drain_queue() == {"ready": 1}
    r = await client.get(f"{_chunks_path(kb['id'], doc['id'])}?limit=1&offset=1", headers=org.headers)
    assert r.status_code == 200, r.text
    page = r.json()
    assert (page["total"], page["limit"], page["offset"]) == (3, 1, 1)
    assert [(c["ordinal"], c["section"]) for c in page["items"]] == [(1, "Parking")]
    r = await client.get(f"{_chunks_path(kb['id'], doc['id'])}?offset=3", headers=org.headers)
    assert (r.json()["items"], r.json()["total"]) == ([], 3)


async def test_chunks_of_a_pdf_name_their_pages(client, org, kb, drain_queue):
    pdf = make_pdf(["The front desk opens at nine.", "The car park closes at ten."], title="Guide")
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": ("guide.pdf", pdf, "application/pdf")},
        headers=org.headers,
    )
    assert r.status_code == 202, r.text
    assert await drain_queue() == {"ready": 1}
    r = await client.get(_chunks_path(kb["id"], r.json()["id"]), headers=org.headers)
    assert [(c["page"], c["text"]) for c in r.json()["items"]] == [
        (1, "The front desk opens at nine."),
        (2, "The car park closes at ten."),
    ]


async def test_a_document_not_yet_indexed_has_no_chunks(client, org, kb):
    doc = await create_text_doc(client, org.headers, kb["id"])
    r = await client.get(_chunks_path(kb["id"], doc["id"]), headers=org.headers)
    assert (r.status_code, r.json()) == (200, {"items": [], "total": 0, "limit": 50, "offset": 0})


async def test_chunks_of_another_organisations_document_are_404(client, org, other_org, drain_queue):
    theirs = await create_kb(client, other_org.headers, "Theirs")
    doc = await create_text_doc(
        client, other_org.headers, theirs["id"], content=MARKDOWN, content_type="markdown"
    )
    assert await drain_queue() == {"ready": 1}
    r = await client.get(_chunks_path(theirs["id"], doc["id"]), headers=org.headers)
    assert (r.status_code, r.json()) == (404, {"error": "not_found", "detail": "document not found"})
    # The owner reads them through the same route: the 404 is the scoping.
    assert (await client.get(_chunks_path(theirs["id"], doc["id"]), headers=other_org.headers)).json()[
        "total"
    ] == 3


async def test_chunks_through_another_kb_of_the_organisation_are_404(client, org, kb, drain_queue):
    other = await create_kb(client, org.headers, "Other")
    doc = await create_text_doc(client, org.headers, kb["id"], content=MARKDOWN, content_type="markdown")
    assert await drain_queue() == {"ready": 1}
    r = await client.get(_chunks_path(other["id"], doc["id"]), headers=org.headers)
    assert (r.status_code, r.json()) == (404, {"error": "not_found", "detail": "document not found"})


@pytest.mark.parametrize(
    ("query", "name"), [("limit=0", "limit"), ("limit=201", "limit"), ("offset=-1", "offset")]
)
async def test_bad_page_parameters_are_400(client, org, kb, query, name):
    doc = await create_text_doc(client, org.headers, kb["id"])
    r = await client.get(f"{_chunks_path(kb['id'], doc['id'])}?{query}", headers=org.headers)
    assert (r.status_code, r.json()["error"], r.json()["detail"]) == (
        400,
        "bad_request",
        f"invalid parameters: {name}",
    )


async def test_the_route_is_in_the_openapi_document(client, org):
    schema = (await client.get("/schema/openapi.json")).json()
    operation = schema["paths"]["/api/knowledge/{kb_id}/documents/{doc_id}/chunks"]["get"]
    assert sorted(p["name"] for p in operation["parameters"]) == ["doc_id", "kb_id", "limit", "offset"]
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    page = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert sorted(page["properties"]) == ["items", "limit", "offset", "total"]
    item = schema["components"]["schemas"][page["properties"]["items"]["items"]["$ref"].rsplit("/", 1)[1]]
    assert sorted(item["properties"]) == ["ordinal", "page", "section", "text", "token_count"]
