"""A fake web site behind respx, a crawl runner on the test loop, and an ingestor whose
embedder counts what it embeds."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from app.crawl.runner import CrawlRunner, drain_crawls
from app.ingestion.pipeline import Ingestor
from app.ingestion.worker import drain
from tests.conftest import PUBLIC_IP, fake_resolver

HOST = "docs.example.com"


@dataclass
class Served:
    body: str | bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    location: str | None = None
    etag: bool = True  # an ETag from the body's hash
    last_modified: str | None = None


@dataclass
class Sent:
    method: str
    host: str
    path: str
    headers: httpx.Headers


@dataclass
class FakeSite:
    """Pages by (host, path with query); anything else is a 404. Every request is recorded."""

    pages: dict[tuple[str, str], Served] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)

    def page(self, path: str, body: str | bytes, *, host: str = HOST, **extra: Any) -> None:
        self.pages[(host, path)] = Served(body, **extra)

    def html(self, path: str, title: str, text: str, links: tuple[str, ...] = (), **extra: Any) -> None:
        anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
        body = f"<html><head><title>{title}</title></head><body><main><p>{text}</p>{anchors}</main></body></html>"
        self.page(path, body, **extra)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        host = request.headers["Host"]
        path = request.url.raw_path.decode()
        self.sent.append(Sent(request.method, host, path, request.headers))
        served = self.pages.get((host, path))
        if served is None:
            return httpx.Response(404, text="not found", headers={"Content-Type": "text/plain"})
        if served.location is not None:
            return httpx.Response(served.status, headers={"Location": served.location})
        body = served.body.encode() if isinstance(served.body, str) else served.body
        headers = {"Content-Type": served.content_type}
        etag = f'"{hashlib.sha256(body).hexdigest()[:12]}"' if served.etag else None
        if etag:
            headers["ETag"] = etag
            if request.headers.get("If-None-Match") == etag:
                return httpx.Response(304, headers={"ETag": etag})
        if served.last_modified:
            headers["Last-Modified"] = served.last_modified
            if request.headers.get("If-Modified-Since") == served.last_modified:
                return httpx.Response(304)
        return httpx.Response(served.status, content=body, headers=headers)

    def paths(self) -> list[str]:
        return [s.path if s.host == HOST else f"{s.host}{s.path}" for s in self.sent]


@pytest.fixture
def site(respx_mock: Any) -> FakeSite:
    fake = FakeSite()
    respx_mock.route(host=PUBLIC_IP).mock(side_effect=fake)
    return fake


@pytest.fixture
def crawl_settings(settings: Any) -> Any:
    # No pause between requests: politeness has its own test, through the runner's sleep.
    return settings.model_copy(update={"crawl": settings.crawl.model_copy(update={"delay_s": 0.0})})


@pytest.fixture
async def runner(engine: Any, crawl_settings: Any) -> Any:
    crawler = CrawlRunner(engine, crawl_settings, "test-crawler", resolver=fake_resolver)
    yield crawler
    await crawler.aclose()


@pytest.fixture
def run_crawls(runner: CrawlRunner) -> Any:
    async def run() -> dict[str, int]:
        return await drain_crawls(runner)

    return run


@dataclass
class Counted:
    """The app's embedder, counting the texts it is asked to embed."""

    inner: Any
    texts: list[str] = field(default_factory=list)

    @property
    def model_key(self) -> str:
        key: str = self.inner.model_key
        return key

    @property
    def dimensions(self) -> int:
        size: int = self.inner.dimensions
        return size

    async def embed_documents(self, texts: Any) -> list[list[float]]:
        self.texts.extend(texts)
        vectors: list[list[float]] = await self.inner.embed_documents(texts)
        return vectors

    async def embed_query(self, text: str, *, timeout: float) -> list[float]:
        vector: list[float] = await self.inner.embed_query(text, timeout=timeout)
        return vector


@pytest.fixture
def embedded(app: Any, client: Any) -> Counted:
    return Counted(app.state.embedder)


@pytest.fixture
def ingest(app: Any, engine: Any, embedded: Counted) -> Any:
    """Index what the crawl queued, with the counting embedder."""

    async def run() -> dict[str, int]:
        state = app.state
        ingestor = Ingestor(engine, embedded, state.fetcher, state.settings.ingestion, "test-worker")
        return await drain(ingestor)

    return run
