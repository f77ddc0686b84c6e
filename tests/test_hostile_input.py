"""Malformed, hostile or foreign request bodies: every JSON (and the multipart) endpoint
answers them with the right 4xx and a readable message, never a 500, and nothing already
stored changes. query_knowledge included: a caller's stray control character is dropped and
the question still answered."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers import bearer, create_kb, create_key, create_text_doc

NUL = "must not contain NUL characters"


def error(detail: str, code: str = "bad_request") -> dict[str, Any]:
    return {"error": code, "detail": detail}


def nul_error(field: str) -> dict[str, Any]:
    return {
        "error": "validation_error",
        "detail": f"invalid request body: {field}",
        "fields": [{"field": field, "message": NUL}],
    }


async def snapshot(client, org) -> dict[str, Any]:
    """Everything the organisation has stored that a hostile write could touch."""
    kbs = (await client.get("/api/knowledge", headers=org.headers)).json()
    details = [
        (await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).json() for kb in kbs["items"]
    ]
    keys = (await client.get("/api/keys", headers=org.headers)).json()
    return {"kbs": kbs, "details": details, "keys": keys}


@pytest.fixture
async def stored(client, org, drain_queue) -> dict[str, Any]:
    """A KB with one indexed document, assigned to an agent, and a query key."""
    kb = await create_kb(client, org.headers, "Front desk", description="Opening hours")
    doc = await create_text_doc(
        client, org.headers, kb["id"], content="# Opening hours\nWe are open from nine to five on weekdays."
    )
    agent = str(uuid.uuid4())
    r = await client.put(
        f"/api/knowledge/{kb['id']}/agents", json={"agent_ids": [agent]}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    assert await drain_queue() == {"ready": 1}
    key = await create_key(client, org.headers, "query")
    return {"kb": kb["id"], "doc": doc["id"], "agent": agent, "query_key": key["key"]}


def json_routes(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(method, path, a body field) for every route taking a JSON body."""
    kb, doc, agent = s["kb"], s["doc"], s["agent"]
    return [
        ("POST", "/api/knowledge", "title"),
        ("PUT", f"/api/knowledge/{kb}", "title"),
        ("PUT", f"/api/knowledge/{kb}/agents", "agent_ids"),
        ("POST", f"/api/knowledge/{kb}/documents", "title"),
        ("PUT", f"/api/knowledge/{kb}/documents/{doc}", "title"),
        ("POST", "/api/keys", "name"),
        ("PUT", f"/api/agents/{agent}/settings", "prompt_variant"),
        ("POST", f"/api/agents/{agent}/query_knowledge", "query"),
        ("POST", f"/api/agents/{agent}/playground", "query"),
    ]


async def send_to_every_json_route(
    client, org, stored, body: bytes | Callable[[str], bytes] | None, content_type: str | None
):
    """Send `body` (or `body(field)`, a body built around the route's field) to every JSON
    route; (method, path, status, JSON answer) per route, in json_routes' order. Nothing
    stored may change."""
    before = await snapshot(client, org)
    answers = []
    for method, path, field in json_routes(stored):
        headers = dict(org.headers)
        if content_type is not None:
            headers["Content-Type"] = content_type
        content = body(field) if callable(body) else body
        r = await client.request(method, path, content=content, headers=headers)
        answers.append((method, path, r.status_code, r.json()))
    assert await snapshot(client, org) == before
    return answers


# 1. NUL in a stored short text field: PostgreSQL text cannot hold it (asyncpg
# CharacterNotInRepertoireError, a 500). Refused with a 422 naming the field.


@pytest.mark.parametrize("field", ["title", "description"])
async def test_nul_in_kb_text_is_422_on_create_and_update(client, org, stored, field):
    before = await snapshot(client, org)
    body = {"title": "Valid", field: "a\u0000b"}
    r = await client.post("/api/knowledge", json=body, headers=org.headers)
    assert (r.status_code, r.json()) == (422, nul_error(field))
    r = await client.put(f"/api/knowledge/{stored['kb']}", json={field: "a\u0000b"}, headers=org.headers)
    assert (r.status_code, r.json()) == (422, nul_error(field))
    assert await snapshot(client, org) == before


@pytest.mark.parametrize("field", ["title", "description"])
async def test_nul_in_document_text_is_422_on_create_and_update(client, org, stored, field):
    before = await snapshot(client, org)
    path = f"/api/knowledge/{stored['kb']}/documents"
    body = {"title": "Valid", "content": "Text.", field: "a\u0000b"}
    r = await client.post(path, json=body, headers=org.headers)
    assert (r.status_code, r.json()) == (422, nul_error(field))
    r = await client.post(
        path, json={"url": "https://example.com/faq", field: "a\u0000b"}, headers=org.headers
    )
    assert (r.status_code, r.json()) == (422, nul_error(field))
    r = await client.put(f"{path}/{stored['doc']}", json={field: "a\u0000b"}, headers=org.headers)
    assert (r.status_code, r.json()) == (422, nul_error(field))
    assert await snapshot(client, org) == before


async def test_nul_in_document_url_is_422(client, org, stored):
    before = await snapshot(client, org)
    r = await client.post(
        f"/api/knowledge/{stored['kb']}/documents",
        json={"url": "https://example.com/\u0000faq"},
        headers=org.headers,
    )
    assert (r.status_code, r.json()) == (422, nul_error("url"))
    assert await snapshot(client, org) == before


async def test_nul_in_key_name_is_422(client, org, stored):
    before = await snapshot(client, org)
    r = await client.post("/api/keys", json={"role": "query", "name": "a\u0000b"}, headers=org.headers)
    assert (r.status_code, r.json()) == (422, nul_error("name"))
    assert await snapshot(client, org) == before


def multipart(parts: list[tuple[str, str | None, bytes]], boundary: str = "QQ") -> tuple[bytes, str]:
    """A multipart body written by hand: raw NUL and invalid UTF-8 pass through untouched."""
    body = b""
    for name, filename, value in parts:
        disposition = f'form-data; name="{name}"'.encode()
        if filename is not None:
            disposition += b'; filename="' + filename.encode("utf-8", "surrogateescape") + b'"'
        body += b"--" + boundary.encode() + b"\r\nContent-Disposition: " + disposition + b"\r\n\r\n"
        body += value + b"\r\n"
    body += b"--" + boundary.encode() + b"--\r\n"
    return body, f"multipart/form-data; boundary={boundary}"


@pytest.mark.parametrize("field", ["title", "description"])
async def test_nul_in_multipart_text_is_422(client, org, stored, field):
    before = await snapshot(client, org)
    body, ctype = multipart([("file", "a.txt", b"hello"), (field, None, b"a\x00b")])
    r = await client.post(
        f"/api/knowledge/{stored['kb']}/documents",
        content=body,
        headers={**org.headers, "Content-Type": ctype},
    )
    assert (r.status_code, r.json()) == (422, nul_error(field))
    assert await snapshot(client, org) == before


async def test_nul_in_uploaded_file_name_is_422(client, org, stored):
    before = await snapshot(client, org)
    body, ctype = multipart([("file", "a\x00b.txt", b"hello")])
    r = await client.post(
        f"/api/knowledge/{stored['kb']}/documents",
        content=body,
        headers={**org.headers, "Content-Type": ctype},
    )
    assert r.status_code == 422
    assert r.json() == {
        "error": "validation_error",
        "detail": "invalid request body: file",
        "fields": [{"field": "file", "message": "the file name must not contain NUL characters"}],
    }
    assert await snapshot(client, org) == before


async def test_nul_inside_document_content_is_still_accepted(client, org, stored, drain_queue):
    doc = await create_text_doc(client, org.headers, stored["kb"], content="Closed on\u0000 Sundays.")
    assert await drain_queue() == {"ready": 1}
    r = await client.get(f"/api/knowledge/{stored['kb']}/documents/{doc['id']}", headers=org.headers)
    assert r.json()["status"] == "ready"


# 2. A body nested ~1,000 levels deep: msgspec (and json.loads for document creation)
# raised RecursionError, a 500 on every JSON route.


def nested(field: str, depth: int) -> bytes:
    return f'{{"{field}":{"[" * depth}{"]" * depth}}}'.encode()


@pytest.mark.parametrize("depth", [1_000, 100_000])
async def test_deeply_nested_json_is_400_everywhere(client, org, stored, depth):
    answers = await send_to_every_json_route(
        client, org, stored, lambda field: nested(field, depth), "application/json"
    )
    for method, path, status, body in answers:
        assert (method, path, status, body) == (
            method,
            path,
            400,
            error("the request body is nested too deeply"),
        )


# Where decoding stops depends on how deep the stack already is when it starts (about 990
# here), so the depths below stay well clear of it: there the body decodes, and validation
# names the field that holds a list instead of text.
@pytest.mark.parametrize("depth", [200, 500, 900])
async def test_deep_but_decodable_nesting_is_422_naming_the_field(client, org, stored, depth):
    answers = await send_to_every_json_route(
        client, org, stored, lambda field: nested(field, depth), "application/json"
    )
    for (method, path, field), (_, _, status, body) in zip(json_routes(stored), answers, strict=True):
        # agent_ids takes a list, so its first item is the one named.
        named = {f["field"].removesuffix(".0") for f in body.get("fields", [])}
        assert (method, path, status, field in named) == (method, path, 422, True), body


# 3. Invalid UTF-8: msgspec raised UnicodeDecodeError (a 500) on every JSON route but
# document creation, and Litestar's multipart parser did for a form field.


async def test_invalid_utf8_json_is_400_everywhere(client, org, stored):
    answers = await send_to_every_json_route(
        client, org, stored, lambda field: b'{"%s":"\xff"}' % field.encode(), "application/json"
    )
    for method, path, status, body in answers:
        assert (method, path, status, body) == (
            method,
            path,
            400,
            error("the request body is not valid UTF-8"),
        )


async def test_invalid_utf8_in_a_multipart_field_is_400(client, org, stored):
    before = await snapshot(client, org)
    body, ctype = multipart([("file", "a.txt", b"hello"), ("description", None, b"caf\xe9")])
    r = await client.post(
        f"/api/knowledge/{stored['kb']}/documents",
        content=body,
        headers={**org.headers, "Content-Type": ctype},
    )
    assert r.status_code == 400
    assert r.json() == error("the request body is not valid UTF-8 (in a form field)")
    assert await snapshot(client, org) == before


# 4. query_knowledge with a NUL in the question: the answer came back "unavailable" and
# the call was not logged (both statements failed on the NUL).


async def test_control_characters_in_a_question_are_dropped_and_it_is_answered(client, stored):
    agent, key = stored["agent"], bearer(stored["query_key"])
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge",
        json={"query": "When are you\u0001 open?\u0000\r"},
        headers=key,
    )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "answered"
    assert r.json()["answer"] == "We are open from nine to five on weekdays."
    # Tab and newline are kept (and surrounding whitespace stripped) as before.
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": "When are\tyou\nopen?\u0000"}, headers=key
    )
    assert r.json()["status"] == "answered"


async def test_a_question_cleaned_of_control_characters_is_logged(client, org, stored):
    agent = stored["agent"]
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge",
        json={"query": "When are you open?\u0000"},
        headers=bearer(stored["query_key"]),
    )
    assert r.status_code == 200
    logged = (await client.get(f"/api/agents/{agent}/queries", headers=org.headers)).json()
    assert [(q["query"], q["status"]) for q in logged["items"]] == [("When are you open?", "answered")]


async def test_a_question_of_control_characters_only_is_422_as_an_empty_one(client, stored):
    path = f"/api/agents/{stored['agent']}/query_knowledge"
    key = bearer(stored["query_key"])
    empty = await client.post(path, json={"query": "  "}, headers=key)
    controls = await client.post(path, json={"query": "\u0000\u0001 \u001f"}, headers=key)
    assert empty.status_code == controls.status_code == 422
    assert controls.json() == empty.json()
    assert controls.json()["fields"][0]["field"] == "query"


# 5. Content-Type was not enforced: text/plain or none was parsed as JSON and stored;
# XML or a form was answered 400 "JSON is malformed". README promises 415.


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/xml", "application/x-www-form-urlencoded", "application/jsonx"],
)
async def test_json_routes_refuse_other_media_types_with_415(client, org, stored, content_type):
    answers = await send_to_every_json_route(
        client, org, stored, b'{"title": "x", "role": "query", "query": "hours"}', content_type
    )
    expected = error("Content-Type must be application/json", "unsupported_media_type")
    for method, path, status, body in answers:
        if path.endswith("/documents") and method == "POST":
            # Document creation takes multipart too and says so.
            assert (status, body["detail"]) == (415, "send application/json or multipart/form-data")
        else:
            assert (method, path, status, body) == (method, path, 415, expected)


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "Application/JSON", "application/merge-patch+json"]
)
async def test_json_with_parameters_or_a_json_suffix_is_accepted(client, org, content_type):
    r = await client.post(
        "/api/keys",
        content=b'{"role": "query", "name": "runtime"}',
        headers={**org.headers, "Content-Type": content_type},
    )
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "runtime"


async def test_bodyless_and_multipart_routes_are_unaffected(client, org, stored):
    assert (await client.get("/api/knowledge", headers=org.headers)).status_code == 200
    body, ctype = multipart([("file", "hours.txt", b"We open at nine.")])
    r = await client.post(
        f"/api/knowledge/{stored['kb']}/documents",
        content=body,
        headers={**org.headers, "Content-Type": ctype},
    )
    assert r.status_code == 202, r.text
    r = await client.delete(f"/api/knowledge/{stored['kb']}/documents/{r.json()['id']}", headers=org.headers)
    assert r.status_code == 204


# 6. Messages that did not match the problem.


@pytest.mark.parametrize("content_type", ["application/json", None])
async def test_an_empty_body_is_400_body_required(client, org, stored, content_type):
    answers = await send_to_every_json_route(client, org, stored, None, content_type)
    for method, path, status, body in answers:
        if path.endswith("/documents") and method == "POST" and content_type is None:
            assert status == 415
        else:
            assert (method, path, status, body) == (method, path, 400, error("the request body is required"))


async def test_a_lone_surrogate_escape_is_400_not_valid_json(client, org, stored):
    expected = error(
        "the request body is not valid JSON: a string holds an unpaired surrogate escape (\\ud800-\\udfff), "
        "which is not text UTF-8 can carry"
    )
    for method, path, field in json_routes(stored):
        body = b'{"%s": "open \\ud800"}' % field.encode()
        r = await client.request(
            method, path, content=body, headers={**org.headers, "Content-Type": "application/json"}
        )
        assert (method, path, r.status_code, r.json()) == (method, path, 400, expected)


async def test_a_paired_surrogate_escape_is_fine(client, org):
    r = await client.post("/api/knowledge", content=b'{"title": "Smile \\ud83d\\ude00"}', headers=org.headers)
    assert r.status_code == 415  # no Content-Type
    r = await client.post(
        "/api/knowledge",
        content=b'{"title": "Smile \\ud83d\\ude00"}',
        headers={**org.headers, "Content-Type": "application/json"},
    )
    assert r.status_code == 201
    assert r.json()["title"] == "Smile \U0001f600"


async def test_truncated_and_malformed_json_are_400_not_valid_json(client, org, stored):
    headers = {**org.headers, "Content-Type": "application/json"}
    for path, body in [
        ("/api/knowledge", b'{"title": "x"'),
        ("/api/knowledge", b"title=x"),
        (f"/api/knowledge/{stored['kb']}/documents", b'{"title": "x", "content": "y"'),
        (f"/api/knowledge/{stored['kb']}/documents", b"title=x"),
    ]:
        r = await client.post(path, content=body, headers=headers)
        assert (path, r.status_code, r.json()) == (path, 400, error("the request body is not valid JSON"))


async def test_more_than_1000_form_parts_is_413_saying_so(client, org, stored):
    before = await snapshot(client, org)
    parts: list[tuple[str, str | None, bytes]] = [("file", "a.txt", b"hello")]
    parts += [(f"f{i}", None, b"v") for i in range(1_100)]
    body, ctype = multipart(parts)
    r = await client.post(
        f"/api/knowledge/{stored['kb']}/documents",
        content=body,
        headers={**org.headers, "Content-Type": ctype},
    )
    assert (r.status_code, r.json()) == (413, error("the form has more than 1000 parts", "payload_too_large"))
    assert await snapshot(client, org) == before


async def test_document_creation_still_tolerates_a_utf8_bom(client, org, stored):
    # It parsed its body with json.loads, which skips a UTF-8 byte-order mark; msgspec does not.
    r = await client.post(
        f"/api/knowledge/{stored['kb']}/documents",
        content=b'\xef\xbb\xbf{"title": "Hours", "content": "We open at nine."}',
        headers={**org.headers, "Content-Type": "application/json"},
    )
    assert r.status_code == 202, r.text
