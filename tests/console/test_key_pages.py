"""API key pages: list without secrets, a new key's secret shown once, revoking with a
confirmation step; CSRF on every change; another organisation's keys are 404."""

from __future__ import annotations

import re

from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.conftest import Org, make_org
from tests.console.helpers import form, text_of
from tests.helpers import bearer, create_key

Client = AsyncTestClient[Litestar]
Browser = tuple[Client, str]

_SECRET = re.compile(r'<code id="new-key">([^<]+)</code>')


async def test_a_new_keys_secret_is_shown_once_and_works(
    signed_in: Browser, client: Client, org: Org
) -> None:
    browser, csrf = signed_in
    page = await browser.get("/console/keys/new")
    assert page.status_code == 200
    assert '<label for="field-name">' in page.text
    assert '<label for="field-role">' in page.text
    r = await browser.post("/console/keys", data=form(csrf, name="Voice runtime", role="query"))
    assert r.status_code == 201, r.text
    found = _SECRET.search(r.text)
    assert found
    secret = found.group(1)
    assert 'data-copy="new-key"' in r.text
    assert "shown only once" in text_of(r.text)
    # The key works against the API, with its role.
    assert (await client.get("/api/keys", headers=bearer(secret))).status_code == 403
    assert (await client.get("/api/knowledge", headers=bearer(secret))).status_code == 403
    # The list shows it by its prefix, never the secret again.
    listing = await browser.get("/console/keys")
    assert "Voice runtime" in listing.text
    assert secret[:8] in listing.text
    assert secret not in listing.text
    keys = (await client.get("/api/keys", headers=org.headers)).json()["items"]
    created = next(k for k in keys if k["name"] == "Voice runtime")
    for path in ("/console/keys", f"/console/keys/{created['id']}/revoke"):
        again = await browser.get(path)
        assert again.status_code == 200
        assert secret not in again.text
    assert r.headers["cache-control"] == "no-store"


async def test_a_bad_role_is_refused_with_the_form(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    r = await browser.post("/console/keys", data=form(csrf, name="x", role="root"))
    assert r.status_code == 422
    assert 'aria-invalid="true"' in r.text
    assert 'id="error-role"' in r.text
    assert len((await client.get("/api/keys", headers=org.headers)).json()["items"]) == 1


async def test_revoke_asks_then_the_key_stops_working(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    key = await create_key(client, org.headers, "query")
    confirm = await browser.get(f"/console/keys/{key['id']}/revoke")
    assert confirm.status_code == 200
    assert "stops working at once" in text_of(confirm.text)
    assert f'action="/console/keys/{key["id"]}/revoke"' in confirm.text
    # Still known (a query key: refused a management call, not unknown) until the confirmation is posted.
    assert (await client.get("/api/knowledge", headers=bearer(key["key"]))).status_code == 403
    r = await browser.post(f"/console/keys/{key['id']}/revoke", data=form(csrf), follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (303, "/console/keys?done=key-revoked")
    page = await browser.get(r.headers["location"])
    assert "Key revoked" in text_of(page.text)
    assert "revoked" in text_of(page.text)
    assert (await client.get("/api/knowledge", headers=bearer(key["key"]))).status_code == 401


async def test_the_last_admin_key_cannot_be_revoked(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    keys = (await client.get("/api/keys", headers=org.headers)).json()["items"]
    (admin,) = keys
    r = await browser.post(f"/console/keys/{admin['id']}/revoke", data=form(csrf))
    assert r.status_code == 409
    assert "last admin key" in text_of(r.text)
    assert (await client.get("/api/keys", headers=org.headers)).status_code == 200


async def test_changes_need_the_csrf_token(signed_in: Browser, client: Client, org: Org) -> None:
    browser, _ = signed_in
    key = await create_key(client, org.headers, "query")
    created = await browser.post("/console/keys", data={"name": "x", "role": "admin"})
    revoked = await browser.post(f"/console/keys/{key['id']}/revoke", data={"csrf_token": "wrong"})
    assert (created.status_code, revoked.status_code) == (403, 403)
    keys = (await client.get("/api/keys", headers=org.headers)).json()["items"]
    assert len(keys) == 2
    assert all(k["revoked_at"] is None for k in keys)


async def test_another_organisations_key_is_not_found(
    signed_in: Browser, client: Client, sessionmaker
) -> None:
    browser, csrf = signed_in
    other: Org = await make_org(sessionmaker, "Other")
    theirs = await create_key(client, other.headers, "query")
    assert (await browser.get(f"/console/keys/{theirs['id']}/revoke")).status_code == 404
    r = await browser.post(f"/console/keys/{theirs['id']}/revoke", data=form(csrf))
    assert r.status_code == 404
    assert (await client.get("/api/knowledge", headers=bearer(theirs["key"]))).status_code == 403
    listing = await browser.get("/console/keys")
    assert theirs["prefix"] not in listing.text


async def test_a_name_with_markup_is_shown_as_text(signed_in: Browser) -> None:
    browser, csrf = signed_in
    await browser.post("/console/keys", data=form(csrf, name="<script>alert(1)</script>", role="query"))
    listing = await browser.get("/console/keys")
    assert "<script>alert(1)</script>" not in listing.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in listing.text
