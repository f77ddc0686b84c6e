from __future__ import annotations

import asyncio
from typing import Any

from litestar import Response, get
from litestar.datastructures import State

from app.db.engine import raw_connection


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
    ok = all(v == "ok" for v in checks.values())
    return Response(
        {"status": "ready" if ok else "unavailable", "checks": checks},
        status_code=200 if ok else 503,
        headers=None if ok else {"Retry-After": "2"},
    )
