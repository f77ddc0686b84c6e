from __future__ import annotations

import uuid

from litestar import Controller, delete, get, post
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, admin_only
from app.http import Limit, Offset
from app.keys.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyRead
from app.keys.service import ApiKeyService
from app.schemas import Page


def provide_api_key_service(
    session: NamedDependency[AsyncSession], principal: NamedDependency[Principal]
) -> ApiKeyService:
    return ApiKeyService(session, principal.org_id)


class ApiKeyController(Controller):
    path = "/api/keys"
    tags = ["API keys"]
    guards = [admin_only]
    dependencies = {"api_key_service": Provide(provide_api_key_service, sync_to_thread=False)}

    @get("/", summary="List the organisation's API keys (never the keys themselves)")
    async def list_keys(
        self,
        api_key_service: NamedDependency[ApiKeyService],
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[ApiKeyRead]:
        return await api_key_service.page(limit=limit, offset=offset)

    @post("/", summary="Create an API key; the key is in this response only")
    async def create_key(
        self,
        data: JSONBody[ApiKeyCreate],
        api_key_service: NamedDependency[ApiKeyService],
    ) -> ApiKeyCreated:
        return await api_key_service.create(data)

    @delete("/{key_id:str}", summary="Revoke an API key; it stops working at once")
    async def revoke_key(
        self,
        key_id: FromPath[uuid.UUID],
        api_key_service: NamedDependency[ApiKeyService],
    ) -> None:
        await api_key_service.revoke(key_id)
