"""The API keeps the promises of its own OpenAPI schema: Schemathesis, with every one of its
checks, against the app served over a real socket on the test database.

Besides "no 5xx" and "responses match their documented status, content type, headers and
schema", the checks ask what a generated client relies on: schema-valid requests accepted,
invalid ones refused with a 4xx, ``Allow`` listing a path's methods, 401 without a key, 404
after a delete... The one exception is argued in schemathesis.toml next to this file.

Bounded and repeatable: at most MAX_EXAMPLES generated requests per operation and phase,
generated deterministically (the same requests on every run): under two minutes on two
cores, with nothing else running.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from litestar import Litestar

from app.config import Settings
from app.main import create_app
from tests.conftest import REPO, Org, fake_resolver
from tests.helpers import bearer, free_port, wait_until_up

pytestmark = pytest.mark.timeout(600)

HERE = Path(__file__).parent
MAX_EXAMPLES = 100
AGENT = "5b3c3f52-1f0a-4f51-9a43-6b1e6d1f3a10"
FAQ = "# Opening hours\n\nWe are open from nine to five on weekdays, and from ten to one on Saturdays.\n"


@pytest.fixture
def unlimited_app(database_url: str, settings: Settings) -> Litestar:
    """The tests' app without the per-organisation rate limits and cap on calls in progress:
    the fuzzer sends thousands of requests a minute from one organisation, which the limits
    exist to stop."""
    limits = settings.limits.model_copy(
        update={"query_per_minute": 0, "manage_per_minute": 0, "query_in_flight": 0}
    )
    return create_app(
        settings.model_copy(update={"limits": limits}),
        database_url=database_url,
        resolver=fake_resolver,
        run_workers=False,
    )


@pytest.fixture
def base_url(unlimited_app: Litestar) -> Iterator[str]:
    """The app behind uvicorn in a thread of its own (its own event loop), on a free port."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(unlimited_app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


async def stored_data(base_url: str, org: Org, app: Litestar, drain_queue) -> dict[str, str]:
    """What schemathesis.toml's identifiers name, as environment variables."""
    async with httpx.AsyncClient(base_url=base_url, headers=bearer(org.admin_key)) as http:

        async def created(path: str, payload: dict[str, Any], status: int) -> str:
            r = await http.post(path, json=payload)
            assert r.status_code == status, r.text
            return str(r.json()["id"])

        kb = await created("/api/knowledge", {"title": "Front desk"}, 201)
        spare_kb = await created("/api/knowledge", {"title": "Spare"}, 201)
        documents = f"/api/knowledge/{kb}/documents"
        doc = await created(documents, {"title": "Hours", "content": FAQ}, 202)
        # Content of its own: the same FAQ again would be refused as a duplicate (409).
        spare_doc = await created(documents, {"title": "Spare", "content": FAQ + "\nA spare copy.\n"}, 202)
        spare_key = await created("/api/keys", {"role": "query"}, 201)
        r = await http.put(f"/api/knowledge/{kb}/agents", json={"agent_ids": [AGENT]})
        assert r.status_code == 200, r.text
        assert await drain_queue(app) == {"ready": 2}
        # Added once the queue is drained: no page is ever fetched (no worker runs).
        url_doc = await created(documents, {"url": "https://example.com/faq"}, 202)
    return {
        "VK_AGENT_ID": AGENT,
        "VK_KB_ID": kb,
        "VK_DOC_ID": doc,
        "VK_SPARE_KB_ID": spare_kb,
        "VK_SPARE_DOC_ID": spare_doc,
        "VK_URL_DOC_ID": url_doc,
        "VK_SPARE_KEY_ID": spare_key,
    }


# The identifiers of stored_data, so that generated requests reach the operations' logic
# rather than a 404 for every generated id; deletions get data of their own. Not for the
# stateful phase, which follows the API's links from what it creates and deletes itself.
STORED_IDS = """
[parameters]
"path.agent_id" = "${VK_AGENT_ID}"
"path.kb_id" = "${VK_KB_ID}"
"path.doc_id" = "${VK_DOC_ID}"

[[operations]]
include-name = "DELETE /api/knowledge/{kb_id}"
parameters = { "path.kb_id" = "${VK_SPARE_KB_ID}" }

[[operations]]
include-name = "PUT /api/knowledge/{kb_id}/agents"
parameters = { "path.kb_id" = "${VK_SPARE_KB_ID}" }

[[operations]]
include-name = "DELETE /api/knowledge/{kb_id}/documents/{doc_id}"
parameters = { "path.doc_id" = "${VK_SPARE_DOC_ID}" }

[[operations]]
include-name = "POST /api/knowledge/{kb_id}/documents/{doc_id}/sync"
parameters = { "path.doc_id" = "${VK_URL_DOC_ID}" }

[[operations]]
include-name = "DELETE /api/keys/{key_id}"
parameters = { "path.key_id" = "${VK_SPARE_KEY_ID}" }
"""


async def run_schemathesis(
    base_url: str, org: Org, config: Path, phases: str, env: dict[str, str], cwd: Path
) -> None:
    schemathesis = shutil.which("schemathesis", path=os.path.dirname(sys.executable))
    assert schemathesis is not None
    result = await asyncio.to_thread(
        subprocess.run,
        [
            schemathesis,
            "--config-file",
            str(config),
            "run",
            f"{base_url}/schema/openapi.json",
            "--phases",
            phases,
            "--header",
            f"Authorization: Bearer {org.admin_key}",
            "--checks",
            "all",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--generation-deterministic",
            "--workers",
            "1",
            "--request-timeout",
            "15",
            "--continue-on-failure",
            "--no-color",
            # The key is the test's own; sanitising would also hide every field named *token*.
            "--output-sanitize",
            "false",
        ],
        capture_output=True,
        text=True,
        timeout=270,
        check=False,
        cwd=cwd,  # where its reports and caches go
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-2000:]


async def test_api_keeps_every_promise_of_its_schema(org, base_url, unlimited_app, drain_queue, tmp_path):
    await wait_until_up(base_url)
    stored = await stored_data(base_url, org, unlimited_app, drain_queue)
    with_ids = tmp_path / "schemathesis.toml"
    with_ids.write_text((HERE / "schemathesis.toml").read_text() + STORED_IDS)
    await run_schemathesis(base_url, org, with_ids, "examples,coverage,fuzzing", stored, tmp_path)
    await run_schemathesis(base_url, org, HERE / "schemathesis.toml", "stateful", {}, tmp_path)
