"""SQL for console sessions, over the raw asyncpg connection (one statement per request).

A session is found by the SHA-256 of its token only; it carries its organisation, and
every page reaches data through the feature services scoped to that organisation.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

CREATE_SQL = """
INSERT INTO console_sessions (token_hash, org_id, key_id, csrf_token, expires_at)
VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
"""

# Expired and idle sessions are swept at each sign-in: a table that only grows with the
# number of sign-ins, cleaned by the one operation that adds to it.
SWEEP_SQL = """
DELETE FROM console_sessions
WHERE expires_at <= now() OR last_seen_at <= now() - make_interval(secs => $1)
"""

DELETE_SQL = "DELETE FROM console_sessions WHERE token_hash = $1"

# Resumes a session and stamps its use, in one statement. The key must still be an
# unrevoked admin key of the same organisation: revoking it ends its sessions here, at the
# next request, with nothing else to remember.
RESUME_SQL = """
UPDATE console_sessions s SET last_seen_at = now()
FROM api_keys k, organisations o
WHERE s.token_hash = $1
  AND k.id = s.key_id AND k.org_id = s.org_id AND k.revoked_at IS NULL AND k.role = 'admin'
  AND o.id = s.org_id
  AND s.expires_at > now() AND s.last_seen_at > now() - make_interval(secs => $2)
RETURNING s.org_id, s.key_id, s.csrf_token, s.expires_at, o.name AS org_name, k.name AS key_name,
          k.prefix AS key_prefix
"""


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """The signed-in browser: its organisation and key, and the secret its forms carry."""

    org_id: uuid.UUID
    key_id: uuid.UUID
    csrf_token: str
    expires_at: datetime
    org_name: str
    key_name: str
    key_prefix: str

    @classmethod
    def from_row(cls, row: Any) -> ConsoleSession:
        return cls(
            org_id=row["org_id"],
            key_id=row["key_id"],
            csrf_token=row["csrf_token"],
            expires_at=row["expires_at"],
            org_name=row["org_name"],
            key_name=row["key_name"],
            key_prefix=row["key_prefix"],
        )


async def create(
    conn: Any, token_hash: bytes, org_id: uuid.UUID, key_id: uuid.UUID, csrf: str, max_s: int
) -> None:
    await conn.execute(CREATE_SQL, token_hash, org_id, key_id, csrf, float(max_s))


async def sweep(conn: Any, idle_s: int) -> None:
    await conn.execute(SWEEP_SQL, float(idle_s))


async def delete(conn: Any, token_hash: bytes) -> None:
    await conn.execute(DELETE_SQL, token_hash)


async def resume(conn: Any, token_hash: bytes, idle_s: int) -> ConsoleSession | None:
    row = await conn.fetchrow(RESUME_SQL, token_hash, float(idle_s))
    return ConsoleSession.from_row(row) if row is not None else None
