"""Console sign-in, sessions, CSRF and response headers, over HTTP against the real database."""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Any

import pytest
from litestar import Litestar
from litestar.routes import HTTPRoute
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.console.security import CSP
from tests.conftest import Org
from tests.console.conftest import OpenBrowser
from tests.console.helpers import csrf_from, form, sign_in, sign_in_token, text_of
from tests.helpers import create_kb, create_key

Client = AsyncTestClient[Litestar]


def set_cookies(response: Any) -> dict[str, str]:
    """Each Set-Cookie header of a response, by cookie name."""
    cookies = {}
    for header in response.headers.get_list("set-cookie"):
        cookies[header.split("=", 1)[0]] = header
    return cookies


async def post_sign_in(client: Client, key: str, next_path: str = "") -> Any:
    page = await client.get("/console/sign-in")
    return await client.post(
        "/console/sign-in",
        data={"api_key": key, "csrf_token": sign_in_token(page.text), "next": next_path},
        follow_redirects=False,
    )


async def session_rows(engine: AsyncEngine) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        result = await conn.exec_driver_sql("SELECT * FROM console_sessions")
        return [dict(r._mapping) for r in result]


async def sql(engine: AsyncEngine, statement: str) -> None:
    async with engine.begin() as conn:
        await conn.exec_driver_sql(statement)


# -- signing in ----------------------------------------------------------------------------


async def test_admin_key_signs_in_with_a_session_cookie(
    new_browser: OpenBrowser, org: Org, engine: AsyncEngine
) -> None:
    async with new_browser() as client:
        r = await post_sign_in(client, org.admin_key)
        assert r.status_code == 303
        assert r.headers["location"] == "/console/knowledge"
        cookie = set_cookies(r)["vk_console"]
        token = re.match(r"vk_console=([^;]+);", cookie).group(1)  # type: ignore[union-attr]
        flags = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert flags == {"httponly", "path=/console", "samesite=lax"}  # plain http: not Secure
        # The pre-session sign-in cookie is cleared.
        assert "max-age=0" in set_cookies(r)["vk_console_sign_in"].lower()

        page = await client.get("/console/knowledge")
        assert page.status_code == 200
        assert "Acme" in page.text

    # The table holds the token's hash, never the token nor the key.
    (row,) = await session_rows(engine)
    assert bytes(row["token_hash"]) == hashlib.sha256(token.encode()).digest()
    assert row["org_id"] == org.id
    stored = repr(row)
    assert token not in stored
    assert org.admin_key not in stored
    assert org.admin_key not in token
    assert row["expires_at"] > row["created_at"]


async def test_cookie_is_secure_over_https(new_browser: OpenBrowser, org: Org) -> None:
    async with new_browser(base_url="https://testserver.local") as client:
        r = await post_sign_in(client, org.admin_key)
    assert r.status_code == 303
    flags = {part.strip().lower() for part in set_cookies(r)["vk_console"].split(";")[1:]}
    assert flags == {"httponly", "path=/console", "samesite=lax", "secure"}


async def test_forwarded_proto_counts_only_when_trusted(
    new_browser: OpenBrowser, settings: Settings, org: Org
) -> None:
    trusted = settings.model_copy(
        update={"console": settings.console.model_copy(update={"trust_forwarded_proto": True})}
    )
    for config, secure in ((settings, False), (trusted, True)):
        # The proxy speaks plain http to the app; the browser https to the proxy, and so
        # sends back Secure cookies, which the test client would not over http: sent by hand.
        async with new_browser(settings=config) as client:
            proxied = {"X-Forwarded-Proto": "https"}
            page = await client.get("/console/sign-in", headers=proxied)
            assert ("secure" in set_cookies(page)["vk_console_sign_in"].lower()) is secure
            token = sign_in_token(page.text)
            client.cookies.clear()
            r = await client.post(
                "/console/sign-in",
                data={"api_key": org.admin_key, "csrf_token": token},
                headers={**proxied, "Cookie": f"vk_console_sign_in={token}"},
                follow_redirects=False,
            )
        assert r.status_code == 303
        assert ("secure" in set_cookies(r)["vk_console"].lower()) is secure


async def test_query_key_is_refused_with_a_reason(
    new_browser: OpenBrowser, client: Client, org: Org, engine: AsyncEngine
) -> None:
    query_key = (await create_key(client, org.headers, role="query"))["key"]
    async with new_browser() as browser:
        r = await post_sign_in(browser, query_key)
    assert r.status_code == 403
    assert "This is a query key" in text_of(r.text)
    assert "Sign in with an admin key" in text_of(r.text)
    assert "vk_console" not in set_cookies(r)
    assert query_key not in r.text
    assert await session_rows(engine) == []


@pytest.mark.parametrize("key", ["vk_not-a-real-key", "", "x" * 500])
async def test_wrong_key_is_refused(
    new_browser: OpenBrowser, org: Org, engine: AsyncEngine, key: str
) -> None:
    async with new_browser() as client:
        r = await post_sign_in(client, key)
        assert r.status_code == 401
        assert "This API key is unknown or has been revoked." in text_of(r.text)
        assert "vk_console" not in set_cookies(r)
        if key:
            assert key not in r.text
        assert (await client.get("/console/knowledge", follow_redirects=False)).status_code == 303
    assert await session_rows(engine) == []


async def test_next_goes_back_to_a_console_page_only(new_browser: OpenBrowser, org: Org) -> None:
    async with new_browser() as client:
        r = await client.get("/console/knowledge/new", follow_redirects=False)
        assert r.status_code == 303
        assert r.headers["location"] == "/console/sign-in?next=/console/knowledge/new"
        page = await client.get(r.headers["location"])
        assert '<input type="hidden" name="next" value="/console/knowledge/new">' in page.text
        r = await post_sign_in(client, org.admin_key, "/console/knowledge/new")
        assert r.headers["location"] == "/console/knowledge/new"
        for hostile in (
            "//evil.example/console/x",
            "https://evil.example/console",
            "/console\\@evil",
            "/api/keys",
            "/console/../..//evil.example",
            "/console/%2e%2e/api/keys",
        ):
            r = await post_sign_in(client, org.admin_key, hostile)
            assert r.status_code == 303
            assert r.headers["location"] == "/console/knowledge", hostile


async def test_without_a_session_pages_send_to_sign_in(new_browser: OpenBrowser) -> None:
    async with new_browser() as client:
        r = await client.get("/console/knowledge", follow_redirects=False)
        assert r.status_code == 303
        assert r.headers["location"] == "/console/sign-in?next=/console/knowledge"
        # htmx cannot follow a redirect into a fragment: it is told to load the page in full.
        r = await client.get("/console/knowledge", headers={"HX-Request": "true"}, follow_redirects=False)
        assert r.status_code == 401
        assert r.headers["hx-redirect"] == "/console/sign-in?next=/console/knowledge"


async def test_api_key_header_does_not_open_the_console(new_browser: OpenBrowser, org: Org) -> None:
    async with new_browser() as client:
        r = await client.get("/console/knowledge", headers=org.headers, follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"].startswith("/console/sign-in")


async def test_session_cookie_does_not_open_the_api(signed_in: tuple[Client, str]) -> None:
    client, _ = signed_in
    token = client.cookies.get("vk_console")
    assert token
    r = await client.get("/api/knowledge", headers={"Cookie": f"vk_console={token}"})
    assert r.status_code == 401


# -- session fixation, expiry, sign-out, revocation ----------------------------------------


async def test_a_planted_session_id_is_never_adopted(
    new_browser: OpenBrowser, org: Org, other_org: Org
) -> None:
    async with new_browser() as attacker, new_browser() as victim:
        # An unknown id planted in the victim's browser opens nothing and is replaced.
        victim.cookies.set("vk_console", "planted-by-someone", path="/console")
        assert (await victim.get("/console/knowledge", follow_redirects=False)).status_code == 303
        # A live session of the attacker's, planted before the victim signs in, is not
        # adopted either: the victim gets a new id and the planted one stops working.
        await sign_in(attacker, other_org.admin_key)
        planted = attacker.cookies.get("vk_console")
        assert planted
        victim.cookies.set("vk_console", planted, path="/console")
        r = await post_sign_in(victim, org.admin_key)
        assert r.status_code == 303
        issued = re.match(r"vk_console=([^;]+);", set_cookies(r)["vk_console"]).group(1)  # type: ignore[union-attr]
        assert issued != planted
        page = await victim.get("/console/knowledge")
        assert "Acme" in page.text
        assert "Globex" not in page.text
        assert (await attacker.get("/console/knowledge", follow_redirects=False)).status_code == 303


async def test_idle_session_expires(
    signed_in: tuple[Client, str], engine: AsyncEngine, settings: Settings
) -> None:
    client, _ = signed_in
    idle = settings.console.session_idle_s
    await sql(engine, f"UPDATE console_sessions SET last_seen_at = now() - interval '{idle - 30} seconds'")
    assert (await client.get("/console/knowledge", follow_redirects=False)).status_code == 200
    await sql(engine, f"UPDATE console_sessions SET last_seen_at = now() - interval '{idle + 1} seconds'")
    r = await client.get("/console/knowledge", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/console/sign-in?next=/console/knowledge"
    assert "max-age=0" in set_cookies(r)["vk_console"].lower()
    assert await session_rows(engine) == []


async def test_session_ends_at_its_absolute_expiry_however_used(
    signed_in: tuple[Client, str], engine: AsyncEngine
) -> None:
    client, _ = signed_in
    await sql(engine, "UPDATE console_sessions SET expires_at = now() - interval '1 second'")
    r = await client.get("/console/knowledge", follow_redirects=False)
    assert r.status_code == 303
    assert await session_rows(engine) == []


async def test_a_session_lasts_no_longer_than_configured(
    signed_in: tuple[Client, str], engine: AsyncEngine, settings: Settings
) -> None:
    (row,) = await session_rows(engine)
    assert (row["expires_at"] - row["created_at"]).total_seconds() == settings.console.session_max_s


async def test_sign_out_deletes_the_session(signed_in: tuple[Client, str], engine: AsyncEngine) -> None:
    client, csrf = signed_in
    token = client.cookies.get("vk_console")
    r = await client.post("/console/sign-out", data=form(csrf), follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/console/sign-in?done=signed-out"
    assert "max-age=0" in set_cookies(r)["vk_console"].lower()
    assert await session_rows(engine) == []
    page = await client.get(r.headers["location"])
    assert "You are signed out." in text_of(page.text)
    # The old id, sent again (a copy kept elsewhere), opens nothing.
    client.cookies.set("vk_console", token or "", path="/console")
    assert (await client.get("/console/knowledge", follow_redirects=False)).status_code == 303


async def test_revoking_the_key_ends_its_sessions(new_browser: OpenBrowser, client: Client, org: Org) -> None:
    second = await create_key(client, org.headers, role="admin")
    async with new_browser() as browser, new_browser() as other_browser:
        await sign_in(browser, second["key"])
        await sign_in(other_browser, org.admin_key)
        assert (await browser.get("/console/knowledge", follow_redirects=False)).status_code == 200
        assert (await client.delete(f"/api/keys/{second['id']}", headers=org.headers)).status_code == 204
        r = await browser.get("/console/knowledge", follow_redirects=False)
        assert r.status_code == 303
        assert r.headers["location"].startswith("/console/sign-in")
        # The session of another key of the organisation goes on.
        assert (await other_browser.get("/console/knowledge", follow_redirects=False)).status_code == 200


# -- CSRF ----------------------------------------------------------------------------------


def state_changing_console_routes(app: Litestar) -> list[tuple[str, str]]:
    routes = []
    for route in app.routes:
        if isinstance(route, HTTPRoute) and route.path.startswith("/console"):
            for method in sorted(route.methods & {"POST", "PUT", "PATCH", "DELETE"}):
                routes.append((method, route.path))
    return routes


async def test_every_state_changing_route_refuses_a_missing_or_wrong_token(
    app: Litestar, signed_in: tuple[Client, str], org: Org, client: Client
) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers, title="Kept")
    routes = state_changing_console_routes(app)
    # Sign-in, sign-out, and the knowledge base and document forms at least.
    paths = {path for _, path in routes}
    assert {"/console/sign-in", "/console/sign-out", "/console/knowledge/{kb_id:str}/delete"} <= paths
    assert "/console/knowledge/{kb_id:str}/documents/upload" in paths
    for method, template in routes:
        # Real ids where the route takes the KB's; any uuid elsewhere: the token is checked first.
        path = template.replace("{kb_id:str}", kb["id"])
        path = re.sub(r"\{[a-z_]+:[a-z]+\}", str(uuid.uuid4()), path)
        for sent in ({}, {"csrf_token": "wrong"}, {"csrf_token": csrf[:-1]}):
            r = await browser.request(method, path, data={"title": "Changed", **sent}, follow_redirects=False)
            assert r.status_code == 403, (method, path, sent, r.status_code)
            assert "without a valid security token" in text_of(r.text)
        # A wrong header is no better than a wrong field.
        r = await browser.request(
            method, path, data={"title": "Changed"}, headers={"X-CSRF-Token": "wrong"}, follow_redirects=False
        )
        assert r.status_code == 403, (method, path)
    # Nothing was changed, and the session still works.
    r = await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)
    assert r.json()["title"] == "Kept"
    assert (await browser.get("/console/knowledge", follow_redirects=False)).status_code == 200


async def test_htmx_header_carries_the_token(signed_in: tuple[Client, str], org: Org, client: Client) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/delete",
        headers={"X-CSRF-Token": csrf, "HX-Request": "true"},
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert (await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).status_code == 404


async def test_the_session_token_of_another_session_is_refused(
    new_browser: OpenBrowser, signed_in: tuple[Client, str], org: Org, client: Client
) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers, title="Kept")
    async with new_browser() as other:
        others_token = await sign_in(other, org.admin_key)
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/delete", data=form(others_token), follow_redirects=False
    )
    assert r.status_code == 403
    assert (await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).status_code == 200


async def test_sign_in_form_needs_its_own_token(
    new_browser: OpenBrowser, org: Org, engine: AsyncEngine
) -> None:
    async with new_browser() as client:
        # No pre-session cookie at all (a form posted from another site).
        r = await client.post(
            "/console/sign-in", data={"api_key": org.admin_key, "csrf_token": "x"}, follow_redirects=False
        )
        assert r.status_code == 403
        page = await client.get("/console/sign-in")
        token = sign_in_token(page.text)
        for sent in ({}, {"csrf_token": token[:-1]}):
            r = await client.post(
                "/console/sign-in", data={"api_key": org.admin_key, **sent}, follow_redirects=False
            )
            assert r.status_code == 403
        assert await session_rows(engine) == []
        flags = {p.strip().lower() for p in set_cookies(page)["vk_console_sign_in"].split(";")[1:]}
        assert {"httponly", "path=/console", "samesite=strict"} <= flags


async def test_a_sign_in_form_too_large_is_not_read(
    new_browser: OpenBrowser, org: Org, engine: AsyncEngine
) -> None:
    # Anyone may post it: a form of millions of fields held the event loop for seconds.
    padding = "&".join(f"f{i}=1" for i in range(4000))  # 30 kB
    async with new_browser() as client:
        # Without its cookie no token can match: refused before the form is read.
        r = await client.post(
            "/console/sign-in",
            content=f"api_key={org.admin_key}&csrf_token=x&{padding}",
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert r.status_code == 403
        token = sign_in_token((await client.get("/console/sign-in")).text)
        r = await client.post(
            "/console/sign-in",
            content=f"api_key={org.admin_key}&csrf_token={token}&{padding}",
            headers={"content-type": "application/x-www-form-urlencoded"},
            follow_redirects=False,
        )
        assert r.status_code == 413
        assert await session_rows(engine) == []
        r = await client.post(
            "/console/sign-in", data={"api_key": org.admin_key, "csrf_token": token}, follow_redirects=False
        )
        assert r.status_code == 303
        assert len(await session_rows(engine)) == 1


# -- headers -------------------------------------------------------------------------------

SECURITY = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
}


def assert_security_headers(response: Any) -> None:
    for name, value in SECURITY.items():
        assert response.headers.get(name) == value, (response.url, name)


async def test_security_headers_on_every_console_response(signed_in: tuple[Client, str]) -> None:
    client, _ = signed_in
    assert CSP == (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; "
        "object-src 'none'"
    )
    for path, status in (
        ("/console/knowledge", 200),
        ("/console/sign-in", 200),
        (f"/console/knowledge/{uuid.uuid4()}", 404),
        ("/console/knowledge?page=0", 400),
        ("/", 303),
    ):
        r = await client.get(path, follow_redirects=False)
        assert r.status_code == status, path
        assert_security_headers(r)
        assert r.headers["cache-control"] == "no-store", path
    for asset in ("console.css", "console.js", "htmx.min.js"):
        r = await client.get(f"/console/static/{asset}")
        assert r.status_code == 200
        assert_security_headers(r)
        assert r.headers["cache-control"] == "no-cache"


async def test_root_redirects_to_the_console(client: Client) -> None:
    r = await client.get("/", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/console"


async def test_api_responses_are_left_alone(client: Client, org: Org) -> None:
    r = await client.get("/api/knowledge", headers=org.headers)
    assert r.status_code == 200
    assert "content-security-policy" not in r.headers


async def test_pages_have_no_inline_script_or_style(
    signed_in: tuple[Client, str], org: Org, client: Client
) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    for path in (
        "/console/knowledge",
        f"/console/knowledge/{kb['id']}",
        f"/console/knowledge/{kb['id']}/documents/new",
    ):
        page = (await browser.get(path)).text
        assert re.findall(r"<script[^>]*>", page) == [
            '<script src="/console/static/htmx.min.js" defer>',
            '<script src="/console/static/console.js" defer>',
        ]
        assert not re.search(r"<style|\sstyle=|\son[a-z]+=|javascript:", page, re.IGNORECASE), path
        assert csrf_from(page) == csrf
        assert '"includeIndicatorStyles": false' in page
        assert '"allowEval": false' in page
