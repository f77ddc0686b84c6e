"""The service's HTTP API as the evaluation uses it.

Wraps any ``httpx.AsyncClient``: a plain one pointed at a running service, or Litestar's
test client around an in-process app (which is what the tests inject).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["QueryReply", "ServiceClient", "ServiceError"]

# Sent with every question: the service logs the call as an evaluation's, not a caller's,
# so it never counts in the knowledge gaps (or in a later replay).
EVALUATION_HEADER = {"X-Evaluation": "true"}
# 429 (rate limit) and 503 (pool exhausted) say "come back later" with Retry-After.
_RETRY_STATUSES = frozenset({429, 503})
_MAX_RETRY_WAIT_S = 30.0


class ServiceError(RuntimeError):
    """The service refused a management call; the message carries its error body."""


@dataclass(frozen=True, slots=True)
class QueryReply:
    """One query_knowledge call: HTTP status, JSON body and the client-side round trip."""

    http_status: int
    body: dict[str, Any]
    client_ms: float


class ServiceClient:
    """Admin-key calls to the service, retried when the service asks to come back later."""

    def __init__(self, http: httpx.AsyncClient, key: str, *, retries: int = 5) -> None:
        self.http = http
        self.headers = {"Authorization": f"Bearer {key}"}
        self.retries = retries

    async def _send(
        self, method: str, path: str, *, headers: dict[str, str] | None = None, **kwargs: Any
    ) -> tuple[httpx.Response, float]:
        """Send, waiting out 429/503 answers; returns the last response and its round trip (ms)."""
        for attempt in range(self.retries + 1):
            started = time.perf_counter()
            response = await self.http.request(
                method, path, headers={**self.headers, **(headers or {})}, **kwargs
            )
            elapsed_ms = (time.perf_counter() - started) * 1000
            if response.status_code not in _RETRY_STATUSES or attempt == self.retries:
                break
            await asyncio.sleep(_retry_after(response, attempt))
        return response, elapsed_ms

    async def _json(self, method: str, path: str, expected: int, **kwargs: Any) -> Any:
        response, _ = await self._send(method, path, **kwargs)
        if response.status_code != expected:
            raise ServiceError(f"{method} {path} answered {response.status_code}: {response.text[:500]}")
        return response.json()

    async def query(
        self,
        agent_id: str,
        question: str,
        *,
        variant: str | None,
        history: Sequence[tuple[str, str]] = (),
    ) -> QueryReply:
        """Ask in debug mode (candidates and tokens come back, and the answer cache is skipped),
        as evaluation traffic; ``history`` (role, content) is sent when given."""
        payload: dict[str, Any] = {"query": question}
        if history:
            payload["history"] = [{"role": role, "content": content} for role, content in history]
        if variant is not None:
            payload["variant"] = variant
        response, client_ms = await self._send(
            "POST",
            f"/api/agents/{agent_id}/query_knowledge",
            json=payload,
            params={"debug": "true"},
            headers=EVALUATION_HEADER,
        )
        try:
            body = response.json()
        except ValueError:
            body = {"error": "invalid_json", "detail": response.text[:500]}
        if not isinstance(body, dict):
            body = {"error": "unexpected_body", "detail": str(body)[:500]}
        if response.status_code == 422 and any(
            isinstance(f, dict) and f.get("field") == "variant" for f in body.get("fields") or []
        ):
            # Every question would fail the same way: stop instead of scoring thousands of errors.
            raise ServiceError(f"the service refused the variant: {body.get('detail')}")
        return QueryReply(response.status_code, body, client_ms)

    async def create_knowledge_base(self, title: str, description: str = "") -> dict[str, Any]:
        body: dict[str, Any] = await self._json(
            "POST", "/api/knowledge", 201, json={"title": title, "description": description}
        )
        return body

    async def upload(
        self, kb_id: str, filename: str, data: bytes, title: str, media_type: str = "text/markdown"
    ) -> dict[str, Any]:
        body: dict[str, Any] = await self._json(
            "POST",
            f"/api/knowledge/{kb_id}/documents",
            202,
            files={"file": (filename, data, media_type)},
            data={"title": title},
        )
        return body

    async def assign_agents(self, kb_id: str, agent_ids: list[str]) -> None:
        await self._json("PUT", f"/api/knowledge/{kb_id}/agents", 200, json={"agent_ids": agent_ids})

    async def knowledge_base(self, kb_id: str) -> dict[str, Any]:
        body: dict[str, Any] = await self._json("GET", f"/api/knowledge/{kb_id}", 200)
        return body

    async def agent_knowledge(self, agent_id: str) -> list[dict[str, Any]]:
        body: list[dict[str, Any]] = await self._json("GET", f"/api/agents/{agent_id}/knowledge", 200)
        return body

    async def query_log(self, agent_id: str, last: int) -> list[dict[str, Any]]:
        """The agent's ``last`` logged callers' queries (evaluations' left out), newest first
        (paged 200 at a time)."""
        items: list[dict[str, Any]] = []
        while len(items) < last:
            page = await self._json(
                "GET",
                f"/api/agents/{agent_id}/queries",
                200,
                params={"limit": min(200, last - len(items)), "offset": len(items), "evaluation": "false"},
            )
            batch: list[dict[str, Any]] = page["items"]
            items.extend(batch)
            if not batch or len(items) >= page["total"]:
                break
        return items[:last]


def _retry_after(response: httpx.Response, attempt: int) -> float:
    try:
        wait = float(response.headers.get("retry-after", ""))
    except ValueError:
        wait = 0.5 * 2**attempt
    return min(max(wait, 0.1), _MAX_RETRY_WAIT_S)
