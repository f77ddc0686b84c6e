from __future__ import annotations

import asyncio
import time
from typing import Any

import openai
from litestar import Response, get
from litestar.di import NamedDependency
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import raw_connection

_PROVIDER_TTL_S = 30.0


class ProviderCheck:
    """Whether the model provider answers, remembered for a while: readiness probes come
    often and each provider call costs time and rate limit. Made in the lifespan, one per app."""

    def __init__(self, client: openai.AsyncOpenAI | None) -> None:
        self.client = client
        self._last: tuple[float, str] | None = None

    async def __call__(self) -> str | None:
        """``"ok"`` or ``"error: ..."``; None when no provider is configured."""
        if self.client is None:
            return None
        now = time.monotonic()
        if self._last is not None and now - self._last[0] < _PROVIDER_TTL_S:
            return self._last[1]
        try:
            await self.client.with_options(timeout=2.0, max_retries=0).models.list()
            result = "ok"
        except openai.APIStatusError as exc:
            # The server answered: it is reachable. A 401 still means a bad key, which is not ok.
            result = (
                "ok"
                if exc.status_code < 500 and exc.status_code not in (401, 403)
                else f"error: HTTP {exc.status_code}"
            )
        except Exception as exc:  # noqa: BLE001 - any failure means not reachable
            result = f"error: {type(exc).__name__}"
        self._last = (now, result)
        return result


@get("/health", tags=["operations"], summary="Liveness: the process answers", exclude_from_auth=True)
async def health() -> dict[str, str]:
    return {"status": "ok"}


@get("/ready", tags=["operations"], summary="Readiness: the database answers", exclude_from_auth=True)
async def ready(
    engine: NamedDependency[AsyncEngine], provider_check: NamedDependency[ProviderCheck]
) -> Response[dict[str, Any]]:
    checks: dict[str, str] = {}
    try:
        async with asyncio.timeout(2.0), raw_connection(engine) as conn:
            await conn.fetchval("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure means not ready
        checks["database"] = f"error: {type(exc).__name__}"
    if (provider := await provider_check()) is not None:
        checks["provider"] = provider
    ok = all(v == "ok" for v in checks.values())
    return Response(
        {"status": "ready" if ok else "unavailable", "checks": checks},
        status_code=200 if ok else 503,
        headers=None if ok else {"Retry-After": "2"},
    )
