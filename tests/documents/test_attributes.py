"""Documents' tags, attributes and validity window (app/documents/attributes.py): set on
create (JSON and multipart) and on update, validated, shown with their availability, and
moving the KB's content version when they change (migration 0020)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from tests.helpers import create_kb, create_text_doc


@pytest.fixture
async def kb(client, org):
    return await create_kb(client, org.headers)


def _iso(delta: timedelta) -> str:
    return (datetime.now(UTC) + delta).isoformat()


async def _version(engine, kb_id: str) -> int:
    async with engine.connect() as conn:
        return int(
            (
                await conn.execute(
                    text("SELECT content_version FROM knowledge_bases WHERE id = :i"), {"i": kb_id}
                )
            ).scalar_one()
        )


async def test_a_json_document_keeps_its_tags_attributes_and_window(client, org, kb):
    start, end = _iso(timedelta(days=-1)), _iso(timedelta(days=30))
    doc = await create_text_doc(
        client,
        org.headers,
        kb["id"],
        tags=["Returns", " FAQ  Policy ", "returns"],
        attributes={"locale": "en-GB", "product_line": " pro "},
        effective_from=start,
        expires_at=end,
    )
    # Tags in lower case, spaces collapsed, each once in the order given; values stripped.
    assert doc["tags"] == ["returns", "faq policy"]
    assert doc["attributes"] == {"locale": "en-GB", "product_line": "pro"}
    assert datetime.fromisoformat(doc["effective_from"]) == datetime.fromisoformat(start)
    assert datetime.fromisoformat(doc["expires_at"]) == datetime.fromisoformat(end)
    assert doc["availability"] == "active"
    r = await client.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)
    assert r.status_code == 200
    assert {k: r.json()[k] for k in ("tags", "attributes", "availability")} == {
        "tags": ["returns", "faq policy"],
        "attributes": {"locale": "en-GB", "product_line": "pro"},
        "availability": "active",
    }


async def test_a_document_without_them_is_active_with_none(client, org, kb):
    doc = await create_text_doc(client, org.headers, kb["id"])
    assert (doc["tags"], doc["attributes"], doc["effective_from"], doc["expires_at"]) == ([], {}, None, None)
    assert doc["availability"] == "active"


@pytest.mark.parametrize(
    ("window", "availability"),
    [
        ({"expires_at": _iso(timedelta(hours=-1))}, "expired"),
        ({"effective_from": _iso(timedelta(days=-2)), "expires_at": _iso(timedelta(days=-1))}, "expired"),
        ({"effective_from": _iso(timedelta(hours=1))}, "not_yet_effective"),
        ({"effective_from": _iso(timedelta(hours=-1))}, "active"),
        ({"expires_at": _iso(timedelta(hours=1))}, "active"),
    ],
)
async def test_availability_is_computed_from_the_window(client, org, kb, window, availability):
    doc = await create_text_doc(client, org.headers, kb["id"], **window)
    assert doc["availability"] == availability


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"effective_from": "2026-05-01T00:00:00Z", "expires_at": "2026-05-01T00:00:00Z"}, "body"),
        ({"effective_from": "2026-05-02T00:00:00Z", "expires_at": "2026-05-01T00:00:00Z"}, "body"),
        ({"expires_at": "2026-05-01T00:00:00"}, "expires_at"),  # no time zone
        ({"effective_from": 0}, "effective_from"),  # not seconds since 1970
        ({"effective_from": "2026-05-01"}, "effective_from"),  # a date is not an instant
        ({"tags": [f"t{i}" for i in range(21)]}, "tags"),
        ({"tags": ["x" * 51]}, "tags.0"),
        ({"tags": ["   "]}, "tags.0"),
        ({"tags": "returns"}, "tags"),
        ({"attributes": {"Locale": "en"}}, "attributes.Locale.[key]"),
        ({"attributes": {"locale": 5}}, "attributes.locale"),
        ({"attributes": {"locale": ""}}, "attributes.locale"),
        ({"attributes": {f"k{i}": "v" for i in range(21)}}, "attributes"),
        ({"attributes": ["locale"]}, "attributes"),
    ],
)
async def test_bad_attributes_are_refused_and_nothing_is_stored(client, org, kb, engine, extra, field):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={"title": "Hours", "content": "We open at nine.", **extra},
        headers=org.headers,
    )
    assert r.status_code == 422, r.text
    assert field in {e["field"] for e in r.json()["fields"]}
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM documents"))).scalar_one() == 0


async def test_a_window_out_of_order_says_why(client, org, kb):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={
            "title": "Hours",
            "content": "We open at nine.",
            "effective_from": "2026-05-02T00:00:00Z",
            "expires_at": "2026-05-01T00:00:00+00:00",
        },
        headers=org.headers,
    )
    assert r.status_code == 422
    assert [e["message"] for e in r.json()["fields"]] == ["expires_at must be after effective_from"]


# Valid RFC 3339, but past the years 1 to 9999 once in UTC, where the driver sends them.
OUT_OF_RANGE = ["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00"]


@pytest.mark.parametrize("value", OUT_OF_RANGE)
async def test_a_date_past_the_year_9999_in_utc_is_a_422(client, org, kb, engine, value):
    created = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={"title": "Hours", "content": "We open at nine.", "expires_at": value},
        headers=org.headers,
    )
    uploaded = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files=[("file", ("hours.txt", b"We open at nine.", "text/plain")), ("effective_from", (None, value))],
        headers=org.headers,
    )
    expected = "expected a date-time between the years 1 and 9999, once in UTC"
    assert (created.status_code, created.json()["fields"]) == (
        422,
        [{"field": "expires_at", "message": expected}],
    )
    assert (uploaded.status_code, uploaded.json()["fields"]) == (
        422,
        [{"field": "effective_from", "message": expected}],
    )
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM documents"))).scalar_one() == 0


@pytest.mark.parametrize("value", OUT_OF_RANGE)
async def test_an_update_past_the_year_9999_in_utc_is_a_422_and_changes_nothing(client, org, kb, value):
    doc = await create_text_doc(client, org.headers, kb["id"], expires_at="2126-01-01T00:00:00Z")
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}",
        json={"effective_from": value, "tags": ["changed"]},
        headers=org.headers,
    )
    assert (r.status_code, [e["field"] for e in r.json()["fields"]]) == (422, ["effective_from"])
    stored = (
        await client.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)
    ).json()
    assert (stored["tags"], stored["effective_from"], stored["expires_at"]) == (
        doc["tags"],
        None,
        doc["expires_at"],
    )


async def test_a_url_document_takes_them_too(client, org, kb):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={"url": "https://example.com/returns", "tags": ["Returns"], "attributes": {"locale": "en-US"}},
        headers=org.headers,
    )
    assert r.status_code == 202, r.text
    assert (r.json()["tags"], r.json()["attributes"]) == (["returns"], {"locale": "en-US"})


async def test_a_multipart_upload_takes_them_as_form_fields(client, org, kb):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files=[
            ("file", ("returns.txt", b"Returns within 30 days.", "text/plain")),
            ("tags", (None, "Returns, FAQ")),
            ("tags", (None, "policy")),
            ("attributes", (None, '{"locale": "en-GB"}')),
            ("effective_from", (None, "2026-01-01T00:00:00Z")),
            ("expires_at", (None, "2126-01-01T00:00:00+01:00")),
        ],
        headers=org.headers,
    )
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["tags"] == ["returns", "faq", "policy"]
    assert body["attributes"] == {"locale": "en-GB"}
    assert datetime.fromisoformat(body["expires_at"]) == datetime(2125, 12, 31, 23, tzinfo=UTC)
    assert body["availability"] == "active"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ([("attributes", (None, "locale=en-GB"))], "attributes"),
        ([("attributes", (None, "[" * 100_000 + "]" * 100_000))], "attributes"),
        ([("attributes", (None, '{"locale": ["en"]}'))], "attributes.locale"),
        ([("expires_at", (None, "tomorrow"))], "expires_at"),
    ],
)
async def test_bad_form_fields_are_refused(client, org, kb, engine, fields, field):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files=[("file", ("returns.txt", b"Returns within 30 days.", "text/plain")), *fields],
        headers=org.headers,
    )
    assert r.status_code == 422, r.text
    assert field in {e["field"] for e in r.json()["fields"]}
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM documents"))).scalar_one() == 0


async def _put(client, org, kb, doc, body: dict[str, Any]) -> Any:
    return await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}", json=body, headers=org.headers
    )


async def test_an_update_replaces_what_it_names_and_keeps_the_rest(client, org, kb, engine):
    doc = await create_text_doc(
        client,
        org.headers,
        kb["id"],
        tags=["returns"],
        attributes={"locale": "en-GB"},
        expires_at="2126-01-01T00:00:00Z",
    )
    before = await _version(engine, kb["id"])
    r = await _put(client, org, kb, doc, {"tags": ["Shipping"]})
    assert r.status_code == 200, r.text
    assert (r.json()["tags"], r.json()["attributes"]) == (["shipping"], {"locale": "en-GB"})
    assert r.json()["expires_at"] is not None
    # Tags are read by the query path: the KB's content version moves (migration 0020).
    assert await _version(engine, kb["id"]) == before + 1

    r = await _put(client, org, kb, doc, {"attributes": {}, "expires_at": None})
    assert r.status_code == 200, r.text
    assert (r.json()["tags"], r.json()["attributes"], r.json()["expires_at"]) == (["shipping"], {}, None)
    assert await _version(engine, kb["id"]) == before + 2

    # The same values again change nothing the query path reads: no new version.
    r = await _put(client, org, kb, doc, {"tags": ["shipping"], "description": "new words"})
    assert r.status_code == 200
    assert await _version(engine, kb["id"]) == before + 2

    r = await _put(client, org, kb, doc, {"effective_from": _iso(timedelta(days=1))})
    assert r.json()["availability"] == "not_yet_effective"
    assert await _version(engine, kb["id"]) == before + 3


async def test_an_update_is_checked_against_the_stored_window(client, org, kb, engine):
    doc = await create_text_doc(client, org.headers, kb["id"], expires_at="2026-05-01T00:00:00Z")
    before = await _version(engine, kb["id"])
    r = await _put(client, org, kb, doc, {"effective_from": "2026-06-01T00:00:00Z", "title": "Changed"})
    assert r.status_code == 422
    assert r.json()["fields"] == [{"field": "expires_at", "message": "must be after effective_from"}]
    r = await client.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)
    assert (r.json()["title"], r.json()["effective_from"]) == ("Opening hours", None)
    assert await _version(engine, kb["id"]) == before
    # Moving both together is fine.
    r = await _put(
        client,
        org,
        kb,
        doc,
        {"effective_from": "2026-06-01T00:00:00Z", "expires_at": "2026-07-01T00:00:00Z"},
    )
    assert r.status_code == 200, r.text


async def test_another_organisations_document_cannot_be_tagged(client, org, other_org, kb):
    doc = await create_text_doc(client, org.headers, kb["id"], tags=["mine"])
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}",
        json={"tags": ["theirs"]},
        headers=other_org.headers,
    )
    assert r.status_code == 404
    r = await client.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)
    assert r.json()["tags"] == ["mine"]


async def test_the_database_refuses_a_window_out_of_order(engine, client, org, kb):
    """The rule holds for any writer, not only the API (CHECK of migration 0020)."""
    doc = await create_text_doc(client, org.headers, kb["id"])
    async with engine.connect() as conn:
        with pytest.raises(Exception, match="documents_window_check"):
            await conn.execute(
                text(
                    "UPDATE documents SET effective_from = now(), expires_at = now() - interval '1 day' WHERE id = :i"
                ),
                {"i": doc["id"]},
            )
