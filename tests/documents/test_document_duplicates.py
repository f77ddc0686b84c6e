"""Content a knowledge base already holds is refused with a 409 naming the document that
holds it, unless the request says ``allow_duplicate=true``; concurrent copies are in
test_documents_races.py."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import PUBLIC_IP
from tests.helpers import create_kb, create_text_doc

HOURS = "We open at nine."


@pytest.fixture
async def kb(client, org):
    return await create_kb(client, org.headers)


def _documents(kb_id: str) -> str:
    return f"/api/knowledge/{kb_id}/documents"


async def _titles(client, org, kb_id: str) -> list[str]:
    r = await client.get(f"/api/knowledge/{kb_id}", headers=org.headers)
    return [d["title"] for d in r.json()["documents"]]


def _refusal(existing: dict, what: str = "with this content") -> dict:
    return {
        "error": "duplicate_document",
        "detail": f"this knowledge base already holds a document {what}: {existing['id']} "
        f"('{existing['title']}', {existing['status']}); send allow_duplicate=true to add it anyway",
        "existing_document": {"id": existing["id"], "title": existing["title"], "status": existing["status"]},
    }


async def test_the_same_text_again_is_409_naming_the_document(client, org, kb):
    first = await create_text_doc(client, org.headers, kb["id"], content=HOURS)
    r = await client.post(
        _documents(kb["id"]), json={"title": "Hours again", "content": HOURS}, headers=org.headers
    )
    assert (r.status_code, r.json()) == (409, _refusal(first))
    assert await _titles(client, org, kb["id"]) == ["Opening hours"]


async def test_allow_duplicate_adds_it_all_the_same(client, org, kb):
    await create_text_doc(client, org.headers, kb["id"], content=HOURS)
    again = {"title": "Hours again", "content": HOURS}
    r = await client.post(_documents(kb["id"]), json=again, headers=org.headers)
    assert r.status_code == 409
    r = await client.post(f"{_documents(kb['id'])}?allow_duplicate=true", json=again, headers=org.headers)
    assert r.status_code == 202, r.text
    assert await _titles(client, org, kb["id"]) == ["Opening hours", "Hours again"]


async def test_allow_duplicate_false_is_the_default(client, org, kb):
    first = await create_text_doc(client, org.headers, kb["id"], content=HOURS)
    r = await client.post(
        f"{_documents(kb['id'])}?allow_duplicate=false",
        json={"title": "Hours again", "content": HOURS},
        headers=org.headers,
    )
    assert (r.status_code, r.json()) == (409, _refusal(first))


async def test_an_uploaded_file_with_the_same_bytes_is_a_duplicate(client, org, kb):
    first = await create_text_doc(client, org.headers, kb["id"], content=HOURS)
    upload = {"file": ("hours.txt", HOURS.encode(), "text/plain")}
    r = await client.post(_documents(kb["id"]), files=upload, headers=org.headers)
    assert (r.status_code, r.json()) == (409, _refusal(first))
    r = await client.post(f"{_documents(kb['id'])}?allow_duplicate=true", files=upload, headers=org.headers)
    assert r.status_code == 202, r.text
    assert await _titles(client, org, kb["id"]) == ["Opening hours", "hours"]


async def test_the_same_file_twice_is_a_duplicate(client, org, kb):
    upload = {"file": ("hours.md", b"# Hours\n\nWe open at nine.", "text/markdown")}
    r = await client.post(_documents(kb["id"]), files=upload, headers=org.headers)
    assert r.status_code == 202, r.text
    first = r.json()
    r = await client.post(_documents(kb["id"]), files=upload, data={"title": "Other"}, headers=org.headers)
    assert (r.status_code, r.json()) == (409, _refusal(first))


async def test_a_url_already_in_the_kb_is_a_duplicate(client, org, kb):
    r = await client.post(
        _documents(kb["id"]), json={"url": "https://docs.example.com/faq"}, headers=org.headers
    )
    assert r.status_code == 202, r.text
    first = r.json()
    again = {"url": "https://docs.example.com/faq", "title": "FAQ"}
    r = await client.post(_documents(kb["id"]), json=again, headers=org.headers)
    assert (r.status_code, r.json()) == (409, _refusal(first, "from this URL"))
    r = await client.post(f"{_documents(kb['id'])}?allow_duplicate=true", json=again, headers=org.headers)
    assert r.status_code == 202, r.text


async def test_a_github_blob_url_is_the_raw_url_already_stored(client, org, kb):
    raw = {"url": "https://raw.githubusercontent.com/acme/docs/main/README.md"}
    r = await client.post(_documents(kb["id"]), json=raw, headers=org.headers)
    first = r.json()
    blob = {"url": "https://github.com/acme/docs/blob/main/README.md"}
    r = await client.post(_documents(kb["id"]), json=blob, headers=org.headers)
    assert (r.status_code, r.json()) == (409, _refusal(first, "from this URL"))


async def test_the_bytes_of_a_fetched_page_are_a_duplicate_of_its_url_document(
    client, org, kb, drain_queue, respx_mock
):
    page = b"Lockers are on every floor."
    respx_mock.get(f"https://{PUBLIC_IP}/lockers").mock(
        return_value=httpx.Response(200, content=page, headers={"Content-Type": "text/plain"})
    )
    r = await client.post(
        _documents(kb["id"]),
        json={"url": "https://help.example.com/lockers", "title": "Lockers"},
        headers=org.headers,
    )
    first = r.json()
    assert await drain_queue() == {"ready": 1}
    upload = {"file": ("lockers.txt", page, "text/plain")}
    r = await client.post(_documents(kb["id"]), files=upload, headers=org.headers)
    assert (r.status_code, r.json()) == (409, _refusal({**first, "status": "ready"}))


async def test_other_content_and_other_urls_are_not_duplicates(client, org, kb):
    await create_text_doc(client, org.headers, kb["id"], content=HOURS)
    await create_text_doc(client, org.headers, kb["id"], content="We open at ten.")
    for url in ("https://docs.example.com/faq", "https://docs.example.com/faq/"):
        r = await client.post(_documents(kb["id"]), json={"url": url}, headers=org.headers)
        assert r.status_code == 202, r.text
    assert len(await _titles(client, org, kb["id"])) == 4
    # ...while each of them again is one.
    r = await client.post(_documents(kb["id"]), json={"title": "t", "content": HOURS}, headers=org.headers)
    assert r.status_code == 409
    r = await client.post(
        _documents(kb["id"]), json={"url": "https://docs.example.com/faq/"}, headers=org.headers
    )
    assert r.status_code == 409


async def test_duplicates_are_per_knowledge_base_and_organisation(client, org, other_org, kb):
    # The older copies elsewhere are neither a reason to refuse nor the document named.
    theirs = await create_kb(client, other_org.headers, "Theirs")
    await create_text_doc(client, other_org.headers, theirs["id"], content=HOURS, title="Theirs")
    other_kb = await create_kb(client, org.headers, "Other")
    await create_text_doc(client, org.headers, other_kb["id"], content=HOURS, title="Other")
    mine = await create_text_doc(client, org.headers, kb["id"], content=HOURS)
    r = await client.post(_documents(kb["id"]), json={"title": "t", "content": HOURS}, headers=org.headers)
    assert (r.status_code, r.json()) == (409, _refusal(mine))


async def test_once_deleted_the_content_can_come_back(client, org, kb):
    first = await create_text_doc(client, org.headers, kb["id"], content=HOURS)
    r = await client.post(_documents(kb["id"]), json={"title": "t", "content": HOURS}, headers=org.headers)
    assert r.status_code == 409
    r = await client.delete(f"{_documents(kb['id'])}/{first['id']}", headers=org.headers)
    assert r.status_code == 204
    await create_text_doc(client, org.headers, kb["id"], content=HOURS)


async def test_a_failed_document_is_named_with_its_status(client, org, kb, drain_queue):
    page = "<html><body><script>x()</script></body></html>"
    first = await create_text_doc(client, org.headers, kb["id"], content=page, content_type="html")
    assert await drain_queue() == {"failed": 1}
    r = await client.post(
        _documents(kb["id"]),
        json={"title": "t", "content": page, "content_type": "html"},
        headers=org.headers,
    )
    assert (r.status_code, r.json()) == (409, _refusal({**first, "status": "failed"}))


async def test_allow_duplicate_must_be_a_boolean(client, org, kb):
    r = await client.post(
        f"{_documents(kb['id'])}?allow_duplicate=maybe",
        json={"title": "t", "content": HOURS},
        headers=org.headers,
    )
    assert (r.status_code, r.json()["detail"]) == (400, "invalid parameters: allow_duplicate")
    assert await _titles(client, org, kb["id"]) == []


async def test_the_flag_and_the_409_are_in_the_openapi_document(client):
    schema = (await client.get("/schema/openapi.json")).json()
    operation = schema["paths"]["/api/knowledge/{kb_id}/documents"]["post"]
    [flag] = [p for p in operation["parameters"] if p["name"] == "allow_duplicate"]
    assert (flag["in"], flag["required"], flag["schema"]["type"]) == ("query", False, "boolean")
    assert "409" in operation["responses"]
    assert "`existing_document`" in operation["description"]
