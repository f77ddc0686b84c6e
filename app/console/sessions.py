"""Signing in to the console with an admin API key, and the sessions that follow.

The key is checked once, at sign-in, exactly as the API checks it; from then on the browser
holds a random session token (never the key), and the database its hash.
"""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import ConsoleSettings
from app.console import repository
from app.console.repository import ConsoleSession
from app.db.engine import raw_connection
from app.keys.repository import AUTHENTICATE_SQL
from app.keys.service import hash_key

# Longer than any key this service makes (47 characters): what is longer is not a key.
MAX_KEY_CHARS = 200
UNKNOWN_KEY = "This API key is unknown or has been revoked."
QUERY_KEY = (
    "This is a query key: it can call query_knowledge but cannot manage the organisation. "
    "Sign in with an admin key."
)


class SignInRefused(Exception):
    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


async def sign_in(
    engine: AsyncEngine, api_key: str, settings: ConsoleSettings, *, replacing: str | None = None
) -> tuple[str, ConsoleSession]:
    """A new session for an admin key: its token (for the cookie) and the session.

    The token is always new: a token the browser brought (``replacing``, planted by someone
    else or left from before) is never adopted, only deleted.
    """
    key = api_key.strip()
    if not key or len(key) > MAX_KEY_CHARS:
        raise SignInRefused(401, UNKNOWN_KEY)
    token, csrf = new_token(), new_token()
    async with raw_connection(engine) as conn:
        # Not counted against the organisation's request budget ($4, $5 false): signing
        # in is not a management call, and a 256-bit key cannot be guessed at any rate.
        row = await conn.fetchrow(AUTHENTICATE_SQL, hash_key(key), "manage", 60, False, False)
        if row is None:
            raise SignInRefused(401, UNKNOWN_KEY)
        if row["role"] != "admin":
            raise SignInRefused(403, QUERY_KEY)
        async with conn.transaction():
            await repository.sweep(conn, settings.session_idle_s)
            if replacing:
                await repository.delete(conn, token_hash(replacing))
            await repository.create(
                conn, token_hash(token), row["org_id"], row["id"], csrf, settings.session_max_s
            )
        session = await repository.resume(conn, token_hash(token), settings.session_idle_s)
    if session is None:  # the key was revoked in between
        raise SignInRefused(401, UNKNOWN_KEY)
    return token, session


async def resume(engine: AsyncEngine, token: str, settings: ConsoleSettings) -> ConsoleSession | None:
    """The live session this token names, or None (unknown, expired, idle, key revoked);
    a dead session's row is deleted on the way."""
    if not token or len(token) > MAX_KEY_CHARS:
        return None
    digest = token_hash(token)
    async with raw_connection(engine) as conn:
        session = await repository.resume(conn, digest, settings.session_idle_s)
        if session is None:
            await repository.delete(conn, digest)
    return session


async def sign_out(engine: AsyncEngine, token: str) -> None:
    if not token or len(token) > MAX_KEY_CHARS:
        return
    async with raw_connection(engine) as conn:
        await repository.delete(conn, token_hash(token))
