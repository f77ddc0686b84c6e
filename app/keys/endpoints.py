from __future__ import annotations

import uuid

from litestar import Controller, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, admin_only
from app.http import Limit, Offset
from app.keys.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyRead
from app.keys.service import ApiKeyService
from app.schemas import Page


class ApiKeyController(Controller):
    path = "/api/keys"
    tags = ["API keys"]
    guards = [admin_only]

    @get("/", summary="List the organisation's API keys (never the keys themselves)")
    async def list_keys(
        self,
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[ApiKeyRead]:
        return await ApiKeyService(session, principal.org_id).page(limit=limit, offset=offset)

    @post("/", summary="Create an API key; the key is in this response only")
    async def create_key(
        self,
        data: JSONBody[ApiKeyCreate],
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
    ) -> ApiKeyCreated:
        return await ApiKeyService(session, principal.org_id).create(data)

    @delete("/{key_id:str}", summary="Revoke an API key; it stops working at once")
    async def revoke_key(
        self,
        key_id: FromPath[uuid.UUID],
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
    ) -> None:
        await ApiKeyService(session, principal.org_id).revoke(key_id)
