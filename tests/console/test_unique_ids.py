"""Every console page holds each id once and each label names a control of its own form: a
label pointing at another form's input sends a screen reader (and a click) to the wrong field."""

from __future__ import annotations

from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.conftest import Org
from tests.console.helpers import assert_ids_unique
from tests.helpers import assign_new_agent, create_kb, create_key, create_text_doc
from tests.query.conftest import FAQ

Client = AsyncTestClient[Litestar]
Browser = tuple[Client, str]


async def test_every_main_page_has_unique_ids(
    signed_in: Browser, client: Client, org: Org, drain_queue: Any
) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers, "Dental FAQ")
    doc = await create_text_doc(
        client, org.headers, kb["id"], title="Practice FAQ", content=FAQ, content_type="markdown"
    )
    agent = await assign_new_agent(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": 1}
    key = await create_key(client, org.headers)
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": "Where can I park?"}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    query_id = r.json()["query_id"]

    kb_path = f"/console/knowledge/{kb['id']}"
    doc_path = f"{kb_path}/documents/{doc['id']}"
    paths = [
        "/console/knowledge",
        "/console/knowledge/new",
        kb_path,
        f"{kb_path}/edit",
        f"{kb_path}/delete",
        f"{kb_path}/documents/new",
        doc_path,
        f"{doc_path}/edit",
        f"{doc_path}/delete",
        "/console/agents",
        "/console/agents/new",
        f"/console/agents/{agent}",
        "/console/keys",
        "/console/keys/new",
        f"/console/keys/{key['id']}/revoke",
        f"/console/query-log?agent_id={agent}",
        f"/console/query-log/gaps?agent_id={agent}",
        f"/console/query-log/{query_id}",
        f"/console/playground?agent_id={agent}",
    ]
    for path in paths:
        page = await browser.get(path)
        assert page.status_code == 200, (path, page.status_code)
        assert_ids_unique(page.text, path)
    sign_in = await client.get("/console/sign-in")
    assert sign_in.status_code == 200
    assert_ids_unique(sign_in.text, "/console/sign-in")
