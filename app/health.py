from __future__ import annotations

import asyncio
import time
from typing import Any

import openai
from litestar import Response, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import raw_connection

_PROVIDER_TTL_S = 30.0


class Readiness:
    """What ``/ready`` checks: the database, and the model provider when one is configured.
    Made in the lifespan, one per app."""

    def __init__(self, engine: AsyncEngine, client: openai.AsyncOpenAI | None) -> None:
        self.engine = engine
        self.client = client
        self._provider: tuple[float, str] | None = None

    async def checks(self) -> dict[str, str]:
        """Each check's ``"ok"`` or ``"error: ..."``."""
        checks: dict[str, str] = {}
        try:
            async with asyncio.timeout(2.0), raw_connection(self.engine) as conn:
                await conn.fetchval("SELECT 1")
            checks["database"] = "ok"
        except Exception as exc:  # noqa: BLE001 - any failure means not ready
            checks["database"] = f"error: {type(exc).__name__}"
        if self.client is not None:
            checks["provider"] = await self._provider_check(self.client)
        return checks

    async def _provider_check(self, client: openai.AsyncOpenAI) -> str:
        """Whether the model provider answers, remembered for a while: readiness probes come
        often and each provider call costs time and rate limit."""
        now = time.monotonic()
        if self._provider is not None and now - self._provider[0] < _PROVIDER_TTL_S:
            return self._provider[1]
        try:
            await client.with_options(timeout=2.0, max_retries=0).models.list()
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
        self._provider = (now, result)
        return result


def provide_readiness(state: State) -> Readiness:
    readiness: Readiness = state.readiness
    return readiness


@get("/health", tags=["operations"], summary="Liveness: the process answers", exclude_from_auth=True)
async def health() -> dict[str, str]:
    return {"status": "ok"}


@get(
    "/ready",
    tags=["operations"],
    summary="Readiness: the database answers",
    exclude_from_auth=True,
    dependencies={"readiness": Provide(provide_readiness, sync_to_thread=False)},
)
async def ready(readiness: NamedDependency[Readiness]) -> Response[dict[str, Any]]:
    checks = await readiness.checks()
    ok = all(v == "ok" for v in checks.values())
    return Response(
        {"status": "ready" if ok else "unavailable", "checks": checks},
        status_code=200 if ok else 503,
        headers=None if ok else {"Retry-After": "2"},
    )
