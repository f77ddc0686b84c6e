"""Knowledge base pages: list, create, edit, delete, escaping, scoping, pagination."""

from __future__ import annotations

import re
import uuid
from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.conftest import Org
from tests.console.helpers import assert_labelled, form, text_of
from tests.helpers import assign_new_agent, create_kb, create_text_doc

Client = AsyncTestClient[Litestar]
Browser = tuple[Client, str]


async def api_kbs(client: Client, org: Org) -> list[dict[str, Any]]:
    r = await client.get("/api/knowledge", params={"limit": 200}, headers=org.headers)
    assert r.status_code == 200
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def kb_form(csrf: str, **fields: str) -> dict[str, str]:
    base = {
        "title": "",
        "description": "",
        "language": "english",
        "chunk_tokens": "",
        "chunk_overlap_tokens": "",
    }
    return form(csrf, **{**base, **fields})


async def test_list_shows_counts(signed_in: Browser, client: Client, org: Org, drain_queue: Any) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers, title="Support FAQ", description="What callers ask")
    await create_kb(client, org.headers, title="Empty one")
    await create_text_doc(client, org.headers, kb["id"], content="We open at nine. We close at five.")
    await assign_new_agent(client, org.headers, kb["id"])
    await drain_queue()
    r = await browser.get("/console/knowledge")
    assert r.status_code == 200
    row = re.search(
        r"<tr>\s*<td class=\"title-cell\"><a href=\"/console/knowledge/" + kb["id"] + r".*?</tr>",
        r.text,
        re.S,
    )
    assert row
    cells = re.findall(r'<td class="num(?: hide-narrow)?">(\d+)</td>', row.group(0))
    assert cells == ["1", "1", "1"]  # documents, chunks, agents
    assert "What callers ask" in row.group(0)
    assert "Empty one" in r.text
    assert "1–2 of 2" in text_of(r.text)


async def test_empty_list_invites_to_create(signed_in: Browser) -> None:
    browser, _ = signed_in
    r = await browser.get("/console/knowledge")
    assert "No knowledge bases yet." in text_of(r.text)
    assert 'href="/console/knowledge/new"' in r.text


async def test_create_with_chunking_settings(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    page = await browser.get("/console/knowledge/new")
    assert page.status_code == 200
    for name in ("title", "description", "language", "chunk_tokens", "chunk_overlap_tokens"):
        assert f'<label for="field-{name}">' in page.text
        assert f'id="field-{name}"' in page.text
    r = await browser.post(
        "/console/knowledge",
        data=kb_form(
            csrf,
            title="  Billing  ",
            description="Invoices",
            language="german",
            chunk_tokens="300",
            chunk_overlap_tokens="40",
        ),
        follow_redirects=False,
    )
    assert r.status_code == 303
    (kb,) = await api_kbs(client, org)
    assert r.headers["location"] == f"/console/knowledge/{kb['id']}?done=kb-created"
    assert (kb["title"], kb["description"], kb["language"]) == ("Billing", "Invoices", "german")
    assert (kb["chunk_tokens"], kb["chunk_overlap_tokens"]) == (300, 40)
    shown = await browser.get(r.headers["location"])
    assert "Knowledge base created." in text_of(shown.text)


async def test_create_takes_the_defaults_when_chunking_is_left_empty(
    signed_in: Browser, client: Client, org: Org
) -> None:
    browser, csrf = signed_in
    r = await browser.post("/console/knowledge", data=kb_form(csrf, title="Defaults"), follow_redirects=False)
    assert r.status_code == 303
    (kb,) = await api_kbs(client, org)
    assert (kb["chunk_tokens"], kb["chunk_overlap_tokens"]) == (500, 60)


async def test_create_refuses_bad_input_with_field_errors(
    signed_in: Browser, client: Client, org: Org
) -> None:
    browser, csrf = signed_in
    cases = [
        ({"title": "   "}, "title", "must not be empty or only whitespace"),
        ({"title": "x" * 201}, "title", "at most 200 characters"),
        ({"title": "T", "chunk_tokens": "lots"}, "chunk_tokens", "Enter a whole number."),
        ({"title": "T", "chunk_tokens": "10"}, "chunk_tokens", "greater than or equal to 64"),
        (
            {"title": "T", "chunk_tokens": "200", "chunk_overlap_tokens": "150"},
            "form",
            "chunk_overlap_tokens must be at most half of chunk_tokens",
        ),
        ({"title": "T", "language": "klingon"}, "language", "not a PostgreSQL text-search configuration"),
    ]
    for fields, field, message in cases:
        r = await browser.post("/console/knowledge", data=kb_form(csrf, **fields), follow_redirects=False)
        assert r.status_code == 422, fields
        assert message in text_of(r.text), (fields, text_of(r.text))
        if field != "form":
            assert f'id="error-{field}"' in r.text
            assert re.search(rf'id="field-{field}"[^>]*aria-invalid="true"', r.text, re.S), field
        # What was typed is shown again (escaped).
        if fields.get("title", "").strip():
            assert f'value="{fields["title"]}"' in r.text
    assert await api_kbs(client, org) == []


async def test_edit_title_and_description(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers, title="Old", description="Before")
    page = await browser.get(f"/console/knowledge/{kb['id']}/edit")
    assert 'value="Old"' in page.text
    assert ">Before</textarea>" in page.text
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/edit",
        data=form(csrf, title="New", description="After"),
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert r.headers["location"] == f"/console/knowledge/{kb['id']}?done=kb-updated"
    (stored,) = await api_kbs(client, org)
    assert (stored["title"], stored["description"]) == ("New", "After")


async def test_edit_refuses_a_blank_title(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers, title="Kept")
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/edit",
        data=form(csrf, title=" ", description=""),
        follow_redirects=False,
    )
    assert r.status_code == 422
    assert "must not be empty or only whitespace" in text_of(r.text)
    (stored,) = await api_kbs(client, org)
    assert stored["title"] == "Kept"


async def test_delete_asks_first_then_deletes(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers, title="Doomed")
    await create_text_doc(client, org.headers, kb["id"])
    page = await browser.get(f"/console/knowledge/{kb['id']}/delete")
    assert page.status_code == 200
    assert "This deletes the knowledge base Doomed, its 1 document(s)" in text_of(page.text)
    assert f'action="/console/knowledge/{kb["id"]}/delete"' in page.text
    assert len(await api_kbs(client, org)) == 1  # asking deleted nothing
    r = await browser.post(f"/console/knowledge/{kb['id']}/delete", data=form(csrf), follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/console/knowledge?done=kb-deleted"
    assert await api_kbs(client, org) == []
    assert "Knowledge base deleted." in text_of((await browser.get(r.headers["location"])).text)


async def test_script_in_a_title_is_shown_as_text(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    title = '<script>alert("x")</script>'
    r = await browser.post("/console/knowledge", data=kb_form(csrf, title=title), follow_redirects=False)
    assert r.status_code == 303
    location = r.headers["location"]
    kb_id = location.split("/")[3].split("?")[0]
    for path in (
        "/console/knowledge",
        location,
        f"/console/knowledge/{kb_id}/edit",
        f"/console/knowledge/{kb_id}/delete",
    ):
        page = (await browser.get(path)).text
        assert "<script>alert" not in page, path
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page, path


async def test_another_organisations_kb_is_not_found(
    signed_in: Browser, client: Client, org: Org, other_org: Org
) -> None:
    browser, csrf = signed_in
    theirs = await create_kb(client, other_org.headers, title="Globex secrets")
    base = f"/console/knowledge/{theirs['id']}"
    for path in (base, f"{base}/edit", f"{base}/delete", f"{base}/documents/new"):
        r = await browser.get(path)
        assert r.status_code == 404, path
        assert "knowledge base not found" in text_of(r.text)
        assert "Globex secrets" not in r.text
    for path in (f"{base}/edit", f"{base}/delete"):
        r = await browser.post(
            path, data=form(csrf, title="Mine now", description=""), follow_redirects=False
        )
        assert r.status_code == 404, path
    (stored,) = await api_kbs(client, other_org)
    assert stored["title"] == "Globex secrets"
    # Not in our list either.
    assert "Globex secrets" not in (await browser.get("/console/knowledge")).text


async def test_unknown_and_malformed_ids(signed_in: Browser) -> None:
    browser, _ = signed_in
    assert (await browser.get(f"/console/knowledge/{uuid.uuid4()}")).status_code == 404
    r = await browser.get("/console/knowledge/not-a-uuid/edit")
    assert r.status_code == 400
    assert "<h1>Error 400</h1>" in r.text


async def test_pagination(signed_in: Browser, client: Client, org: Org) -> None:
    browser, _ = signed_in
    for n in range(30):
        await create_kb(client, org.headers, title=f"KB {n:02d}")
    first = await browser.get("/console/knowledge")
    titles = re.findall(r">KB (\d\d)</a>", first.text)
    assert titles == [f"{n:02d}" for n in range(25)]
    assert "1–25 of 30" in text_of(first.text)
    assert 'href="/console/knowledge?page=2" rel="next"' in first.text
    second = await browser.get("/console/knowledge?page=2")
    assert re.findall(r">KB (\d\d)</a>", second.text) == [f"{n:02d}" for n in range(25, 30)]
    assert "26–30 of 30" in text_of(second.text)
    assert 'href="/console/knowledge?page=1" rel="prev"' in second.text
    assert 'rel="next"' not in second.text
    beyond = await browser.get("/console/knowledge?page=9")
    assert beyond.status_code == 200
    assert "There are no knowledge bases on this page." in text_of(beyond.text)
    assert (await browser.get("/console/knowledge?page=0")).status_code == 400


async def test_every_form_control_is_labelled(signed_in: Browser, client: Client, org: Org) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"])
    base = f"/console/knowledge/{kb['id']}"
    for path in (
        "/console/sign-in",
        "/console/knowledge/new",
        f"{base}/edit",
        f"{base}/delete",
        f"{base}/documents/new",
        f"{base}/documents/{doc['id']}/edit",
        f"{base}/documents/{doc['id']}/delete",
    ):
        page = await browser.get(path)
        assert page.status_code == 200, path
        assert_labelled(page.text)
