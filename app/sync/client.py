"""The service's document API as ``vk sync`` uses it, with errors a person can act on."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx

from app.sync.planner import LocalFile, RemoteDocument

PAGE = 200  # the most a listing gives at once
RATE_LIMIT_RETRIES = 10


class ServiceError(Exception):
    """The service could not be used at all (unreachable, key refused, no such KB): the sync
    stops before changing anything more."""


class BatchRefused(Exception):
    """The service refused one request as a whole (too large, say): its files failed."""


class SyncClient:
    def __init__(self, http: httpx.AsyncClient, kb_id: str) -> None:
        self.http = http
        self.kb_id = kb_id
        self.base = f"/api/knowledge/{kb_id}/documents"

    async def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        for _ in range(RATE_LIMIT_RETRIES):
            response = await self._request(method, url, **kwargs)
            if response.status_code != 429:
                break
            # The organisation's management budget (LIMITS__MANAGE_PER_MINUTE) is spent: a
            # large sync waits for the next window rather than failing half done.
            await asyncio.sleep(_retry_after(response))
        if response.status_code == 401:
            raise ServiceError(
                f"the API key was refused: {_detail(response)}; set VK_API_KEY to an admin key"
            )
        if response.status_code == 403 and _code(response) == "forbidden":
            raise ServiceError(f"the API key may not do this: {_detail(response)}; an admin key is needed")
        if response.status_code == 404 and _detail(response) == "knowledge base not found":
            raise ServiceError(
                f"knowledge base {self.kb_id} not found in the API key's organisation"
                " (GET /api/knowledge lists them)"
            )
        if response.status_code >= 400:
            raise BatchRefused(f"HTTP {response.status_code} {_code(response)}: {_detail(response)}")
        return response

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self.http.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            raise ServiceError(
                f"cannot reach the service at {self.http.base_url} ({type(exc).__name__}: {exc}); "
                "is it running? Set --url or VK_URL"
            ) from exc

    async def documents(self) -> list[RemoteDocument]:
        """The KB's documents that have a path."""
        return [
            RemoteDocument(d["id"], d["source_path"], d["content_hash"], d["status"])
            for d in await self._listing()
            if d["source_path"] is not None
        ]

    async def statuses(self) -> dict[str, tuple[str, str | None]]:
        """Every document's status and error, by id."""
        return {d["id"]: (d["status"], d["error"]) for d in await self._listing()}

    async def _listing(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while True:
            params = {"limit": PAGE, "offset": len(found)}
            page = (await self._send("GET", self.base, params=params)).json()
            found += page["items"]
            if not page["items"] or len(found) >= page["total"]:
                return found

    async def upload(
        self, files: Sequence[LocalFile], contents: Sequence[bytes], *, allow_duplicate: bool
    ) -> list[dict[str, Any]]:
        """One bulk upload of ``files`` with their ``contents``: the service's result for each
        file, in order (none for no files)."""
        if not files:
            return []
        parts = [
            ("file", (f.path, content, "application/octet-stream"))
            for f, content in zip(files, contents, strict=True)
        ]
        params = {"allow_duplicate": "true" if allow_duplicate else "false"}
        response = await self._send("POST", f"{self.base}/bulk", files=parts, params=params)
        items: list[dict[str, Any]] = response.json()["items"]
        return items

    async def delete(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        response = await self._send("POST", f"{self.base}/bulk-delete", json={"ids": list(ids)})
        items: list[dict[str, Any]] = response.json()["items"]
        return items


def _retry_after(response: httpx.Response) -> float:
    try:
        return min(60.0, max(1.0, float(response.headers.get("retry-after", ""))))
    except ValueError:
        return 5.0


def _body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _code(response: httpx.Response) -> str:
    return str(_body(response).get("error", ""))


def _detail(response: httpx.Response) -> str:
    return str(_body(response).get("detail") or response.text[:200] or response.reason_phrase)
