"""SQL for API keys. Every query is scoped to the organisation in ``_scoped``."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Select

from app.keys.models import ApiKey


class ApiKeyRepository:
    def __init__(self, session: AsyncSession, org_id: uuid.UUID) -> None:
        self.session = session
        self.org_id = org_id

    def _scoped(self, stmt: Select[Any]) -> Select[Any]:
        return stmt.where(ApiKey.org_id == self.org_id)  # type: ignore[arg-type]

    async def page(self, *, limit: int, offset: int) -> tuple[list[ApiKey], int]:
        rows = await self.session.scalars(
            self._scoped(select(ApiKey))
            .order_by(ApiKey.created_at, ApiKey.id)  # type: ignore[arg-type]
            .limit(limit)
            .offset(offset)
        )
        total = await self.session.scalar(self._scoped(select(func.count()).select_from(ApiKey)))
        return list(rows), int(total or 0)

    async def get(self, key_id: uuid.UUID) -> ApiKey | None:
        result: ApiKey | None = await self.session.scalar(
            self._scoped(select(ApiKey)).where(ApiKey.id == key_id)  # type: ignore[arg-type]
        )
        return result

    async def lock_active_admins(self) -> list[uuid.UUID]:
        """Lock the organisation's active admin keys until commit; their ids.

        Without the lock, revocations checked the count concurrently, each saw another admin
        key left, and a ring of admins revoking one another left the organisation with none.
        Revocations now queue on these rows; after the wait PostgreSQL re-checks each row, so
        a key revoked meanwhile is no longer counted. Id order keeps two lockers from
        deadlocking.
        """
        stmt = (
            self._scoped(select(ApiKey.id))  # type: ignore[call-overload]
            .where(
                ApiKey.role == "admin",  # type: ignore[arg-type]
                ApiKey.revoked_at.is_(None),  # type: ignore[union-attr]
            )
            .order_by(ApiKey.id)  # type: ignore[arg-type]
            .with_for_update()
        )
        return list(await self.session.scalars(stmt))

    def add(self, key: ApiKey) -> None:
        key.org_id = self.org_id
        self.session.add(key)

    async def revoke(self, key_id: uuid.UUID, at: datetime) -> bool:
        result = await self.session.execute(
            update(ApiKey)
            .where(ApiKey.org_id == self.org_id, ApiKey.id == key_id)  # type: ignore[arg-type]
            .where(ApiKey.revoked_at.is_(None))  # type: ignore[union-attr]
            .values(revoked_at=at)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]


# Authentication runs on every request, the hot path included: one statement over the
# raw asyncpg connection finds the key, stamps its use at most once a minute, and counts
# the request against the organisation's budget (the path's, $2, or "query" for a query
# key) in a fixed window of $3 seconds, when that budget is limited ($4 for "query", $5 for
# "manage"; two flags, not an array: an array parameter costs about 10 µs a call more).
# The counters live in PostgreSQL so the limit holds across processes and replicas.
AUTHENTICATE_SQL = """
WITH k AS (
    -- A query key's every request counts against the query budget, whatever it asks for:
    -- refused management calls from the runtime's key must not use up the admins' budget.
    SELECT id, org_id, role, last_used_at, CASE WHEN role = 'query' THEN 'query' ELSE $2 END AS budget
    FROM api_keys
    WHERE key_hash = $1 AND revoked_at IS NULL
), touched AS (
    UPDATE api_keys SET last_used_at = now()
    FROM k
    WHERE api_keys.id = k.id
      AND (k.last_used_at IS NULL OR k.last_used_at < now() - interval '60 seconds')
    RETURNING 1
), hit AS (
    INSERT INTO rate_counters (bucket, window_start, count)
    SELECT k.org_id::text || ':' || k.budget, to_timestamp(floor(extract(epoch FROM now()) / $3) * $3), 1
    FROM k
    WHERE CASE WHEN k.budget = 'query' THEN $4::bool ELSE $5::bool END
    ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_counters.count + 1
    RETURNING count, extract(epoch FROM window_start)::float8 AS window_start
)
SELECT k.id, k.org_id, k.role, k.budget, hit.count, hit.window_start, extract(epoch FROM now())::float8 AS now
FROM k LEFT JOIN hit ON true
"""

PRUNE_RATE_COUNTERS_SQL = "DELETE FROM rate_counters WHERE window_start < now() - interval '1 hour'"
