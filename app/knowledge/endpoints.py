from __future__ import annotations

import uuid

from litestar import Controller, delete, get, post, put
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, admin_only
from app.http import Limit, Offset
from app.knowledge.schemas import (
    AgentAssignmentRead,
    AgentAssignmentUpdate,
    KnowledgeBaseCreate,
    KnowledgeBaseDetail,
    KnowledgeBaseRead,
    KnowledgeBaseUpdate,
)
from app.knowledge.service import KnowledgeService
from app.schemas import Page


def provide_knowledge_service(
    state: State, session: NamedDependency[AsyncSession], principal: NamedDependency[Principal]
) -> KnowledgeService:
    return KnowledgeService(session, principal.org_id, state.settings.ingestion)


class KnowledgeController(Controller):
    path = "/api/knowledge"
    tags = ["knowledge bases"]
    guards = [admin_only]
    dependencies = {"knowledge_service": Provide(provide_knowledge_service, sync_to_thread=False)}

    @get("/", summary="List knowledge bases with document counts and agent ids")
    async def list_knowledge(
        self,
        knowledge_service: NamedDependency[KnowledgeService],
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[KnowledgeBaseRead]:
        return await knowledge_service.page(limit=limit, offset=offset)

    @post("/", summary="Create a knowledge base")
    async def create_knowledge(
        self,
        data: JSONBody[KnowledgeBaseCreate],
        knowledge_service: NamedDependency[KnowledgeService],
    ) -> KnowledgeBaseRead:
        return await knowledge_service.create(data)

    @get("/{kb_id:str}", summary="One knowledge base with its documents")
    async def get_knowledge(
        self,
        kb_id: FromPath[uuid.UUID],
        knowledge_service: NamedDependency[KnowledgeService],
    ) -> KnowledgeBaseDetail:
        return await knowledge_service.detail(kb_id)

    @put("/{kb_id:str}", summary="Update title and/or description")
    async def update_knowledge(
        self,
        kb_id: FromPath[uuid.UUID],
        data: JSONBody[KnowledgeBaseUpdate],
        knowledge_service: NamedDependency[KnowledgeService],
    ) -> KnowledgeBaseRead:
        return await knowledge_service.update(kb_id, data)

    @delete("/{kb_id:str}", summary="Delete a knowledge base, its documents and chunks")
    async def delete_knowledge(
        self,
        kb_id: FromPath[uuid.UUID],
        knowledge_service: NamedDependency[KnowledgeService],
    ) -> None:
        await knowledge_service.delete(kb_id)

    @put("/{kb_id:str}/agents", summary="Replace the agents this knowledge base is assigned to")
    async def set_agents(
        self,
        kb_id: FromPath[uuid.UUID],
        data: JSONBody[AgentAssignmentUpdate],
        knowledge_service: NamedDependency[KnowledgeService],
    ) -> AgentAssignmentRead:
        return await knowledge_service.set_agents(kb_id, data.agent_ids)


class AgentKnowledgeController(Controller):
    path = "/api/agents"
    tags = ["agents"]
    guards = [admin_only]
    dependencies = {"knowledge_service": Provide(provide_knowledge_service, sync_to_thread=False)}

    @get("/{agent_id:str}/knowledge", summary="The knowledge bases assigned to an agent")
    async def agent_knowledge(
        self,
        agent_id: FromPath[uuid.UUID],
        knowledge_service: NamedDependency[KnowledgeService],
    ) -> list[KnowledgeBaseRead]:
        return await knowledge_service.for_agent(agent_id)
