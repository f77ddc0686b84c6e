"""Bearer API-key authentication and role guards (HTTP layer)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import raw_connection
from app.errors import Forbidden, Unauthorized
from app.keys.repository import AUTHENTICATE_SQL
from app.keys.service import hash_key

PUBLIC_PATHS = {"/health", "/ready", "/metrics"}


@dataclass(frozen=True, slots=True)
class Principal:
    key_id: uuid.UUID
    org_id: uuid.UUID
    role: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


class ApiKeyAuthMiddleware(AbstractAuthenticationMiddleware):
    async def authenticate_request(
        self, connection: ASGIConnection[Any, Any, Any, Any]
    ) -> AuthenticationResult:
        header = connection.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        if len(token) > 200:
            raise Unauthorized("unknown or revoked API key")
        engine: AsyncEngine = connection.app.state.engine
        async with raw_connection(engine) as conn:
            row = await conn.fetchrow(AUTHENTICATE_SQL, hash_key(token))
        if row is None:
            raise Unauthorized("unknown or revoked API key")
        principal = Principal(key_id=row["id"], org_id=row["org_id"], role=row["role"])
        return AuthenticationResult(user=principal, auth=principal)


def admin_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    principal: Principal = connection.auth
    if not principal.is_admin:
        raise Forbidden("this API key has the 'query' role; managing knowledge needs an 'admin' key")
