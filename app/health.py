from __future__ import annotations

import asyncio
import time
from typing import Any

import openai
from litestar import Response, get
from litestar.datastructures import State

from app.db.engine import raw_connection

_PROVIDER_TTL_S = 30.0


async def _provider_check(state: State) -> str:
    """Whether the model provider answers, remembered for a while: readiness probes come
    often and each provider call costs time and rate limit."""
    cached = getattr(state, "provider_check", None)
    now = time.monotonic()
    if cached is not None and now - cached[0] < _PROVIDER_TTL_S:
        return str(cached[1])
    try:
        await state.openai.with_options(timeout=2.0, max_retries=0).models.list()
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
    state.provider_check = (now, result)
    return result


@get("/health", tags=["operations"], summary="Liveness: the process answers", exclude_from_auth=True)
async def health() -> dict[str, str]:
    return {"status": "ok"}


@get("/ready", tags=["operations"], summary="Readiness: the database answers", exclude_from_auth=True)
async def ready(state: State) -> Response[dict[str, Any]]:
    checks: dict[str, str] = {}
    try:
        async with asyncio.timeout(2.0), raw_connection(state.engine) as conn:
            await conn.fetchval("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure means not ready
        checks["database"] = f"error: {type(exc).__name__}"
    if state.openai is not None:
        checks["provider"] = await _provider_check(state)
    ok = all(v == "ok" for v in checks.values())
    return Response(
        {"status": "ready" if ok else "unavailable", "checks": checks},
        status_code=200 if ok else 503,
        headers=None if ok else {"Retry-After": "2"},
    )
