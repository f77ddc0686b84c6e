"""Schemathesis against the service's own OpenAPI schema, on a real running server: no
5xx, every response matches its documented status, content type and schema. Bounded to
a few examples per operation so CI stays quick."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.helpers import free_port, wait_until_up

pytestmark = pytest.mark.timeout(600)


async def test_api_conforms_to_its_schema(org, database_url):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "LIMITS__", "INGESTION__"))}
    env.update(
        DATABASE_URL=database_url,
        INGESTION__WORKERS="1",
        LIMITS__MANAGE_PER_MINUTE="0",  # the fuzzer sends far more than a tenant should
        LIMITS__QUERY_PER_MINUTE="0",
        LOG_LEVEL="ERROR",
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--no-migrate"], cwd=REPO, env=env
    )
    try:
        await wait_until_up(f"http://127.0.0.1:{port}")
        schemathesis = shutil.which("schemathesis", path=os.path.dirname(sys.executable))
        assert schemathesis is not None
        result = await asyncio.to_thread(
            subprocess.run,
            [
                schemathesis,
                "run",
                f"http://127.0.0.1:{port}/schema/openapi.json",
                "--header",
                f"Authorization: Bearer {org.admin_key}",
                "--max-examples",
                "8",
                "--checks",
                "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
                "--generation-deterministic",
                "--request-timeout",
                "15",
            ],
            capture_output=True,
            text=True,
            timeout=540,
            check=False,
        )
        assert result.returncode == 0, result.stdout[-5000:]
    finally:
        server.terminate()
        server.wait(timeout=30)
