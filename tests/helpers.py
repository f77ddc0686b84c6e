"""Small helpers shared by the API tests."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from litestar import Litestar
from litestar.testing import AsyncTestClient

from app.auth import WINDOW_S

Client = AsyncTestClient[Litestar]


async def in_one_rate_window(margin_s: float = 15.0) -> None:
    """Rate limits count in fixed windows of ``WINDOW_S`` seconds by PostgreSQL's clock (this
    machine's, in the tests). A test that spends a budget calls this first: with less than
    ``margin_s`` left in the current window it waits for the next, so that its requests are
    counted in one window (a budget spent across the boundary starts afresh)."""
    left = WINDOW_S - time.time() % WINDOW_S
    if left < margin_s:
        await asyncio.sleep(left + 0.1)


@asynccontextmanager
async def served(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    """The app in the test's own event loop. AsyncTestClient hands requests to the app one at
    a time even under asyncio.gather; through this client concurrent requests overlap, which
    race tests need."""
    async with (
        app.lifespan(),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as client,
    ):
        yield client


async def create_kb(
    client: Client, headers: dict[str, str], title: str = "Support FAQ", **extra: Any
) -> dict[str, Any]:
    r = await client.post("/api/knowledge", json={"title": title, **extra}, headers=headers)
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


async def create_text_doc(
    client: Client, headers: dict[str, str], kb_id: str, content: str = "We open at nine.", **extra: Any
) -> dict[str, Any]:
    payload = {"title": "Opening hours", "content": content, **extra}
    r = await client.post(f"/api/knowledge/{kb_id}/documents", json=payload, headers=headers)
    assert r.status_code == 202, r.text
    body: dict[str, Any] = r.json()
    return body


async def assign_new_agent(client: Client, headers: dict[str, str], kb_id: str) -> str:
    """Assign the KB to a fresh agent id (as the voice platform names one) and return it."""
    agent = str(uuid.uuid4())
    r = await client.put(f"/api/knowledge/{kb_id}/agents", json={"agent_ids": [agent]}, headers=headers)
    assert r.status_code == 200, r.text
    return agent


async def create_key(client: Client, headers: dict[str, str], role: str = "query") -> dict[str, Any]:
    r = await client.post("/api/keys", json={"role": role, "name": f"{role} key"}, headers=headers)
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def free_port() -> int:
    """A loopback port nobody listens on, for a server process a test starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_until_up(base_url: str, path: str = "/health", attempts: int = 200) -> None:
    """Poll a server process a test started until ``path`` answers 200."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        for _ in range(attempts):
            try:
                if (await http.get(path)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise AssertionError(f"{base_url}{path} never answered 200")


def embeddings_reply(request: httpx.Request) -> httpx.Response:
    """A respx side effect answering an OpenAI embeddings request: one 1,536-dimension vector
    per input, in order, all but alike: each text's own small component (a real provider's
    vectors differ for different texts, which the embedder checks) leaves every question
    equally near every passage."""
    body = json.loads(request.content)
    data = []
    for i, text in enumerate(body["input"]):
        vector = [1.0] + [0.0] * 1535
        vector[1 + zlib.crc32(str(text).encode()) % 1535] = 1e-3
        data.append({"object": "embedding", "index": i, "embedding": vector})
    return httpx.Response(
        200,
        json={
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        },
    )


def sample(body: str, name: str, labels: str = "") -> float:
    """One sample's value from the Prometheus text format."""
    prefix = f"{name}{{{labels}}} " if labels else f"{name} "
    for line in body.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    raise AssertionError(f"no sample {prefix.strip()}")


class CountingEmbedder:
    """Wraps an embedder and counts the document texts it embeds: what a re-sync of unchanged
    files must not spend. Set as ``app.state.embedder`` before ``drain_queue()``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts = 0

    @property
    def model_key(self) -> str:
        key: str = self.inner.model_key
        return key

    @property
    def dimensions(self) -> int:
        dims: int = self.inner.dimensions
        return dims

    async def embed_documents(self, texts: Any) -> list[list[float]]:
        self.texts += len(texts)
        vectors: list[list[float]] = await self.inner.embed_documents(texts)
        return vectors

    async def embed_query(self, text: str, *, timeout: float) -> list[float]:
        vector: list[float] = await self.inner.embed_query(text, timeout=timeout)
        return vector


async def store_removed_variant(engine: Any, agent_id: str, variant: str = "retired") -> None:
    """The agent's stored prompt variant set to one prompts/ does not hold, as when its folder
    was taken out after the variant was chosen (the API refuses to choose it)."""
    from sqlalchemy import text

    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE agents SET prompt_variant = :v WHERE agent_id = :a"),
            {"v": variant, "a": uuid.UUID(agent_id)},
        )
