from __future__ import annotations

import uuid

from litestar import Controller, delete, get, post, put
from litestar.datastructures import State
from litestar.di import NamedDependency
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


def _service(state: State, session: AsyncSession, principal: Principal) -> KnowledgeService:
    return KnowledgeService(session, principal.org_id, state.settings.ingestion)


class KnowledgeController(Controller):
    path = "/api/knowledge"
    tags = ["knowledge bases"]
    guards = [admin_only]

    @get("/", summary="List knowledge bases with document counts and agent ids")
    async def list_knowledge(
        self,
        state: State,
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[KnowledgeBaseRead]:
        return await _service(state, session, principal).page(limit=limit, offset=offset)

    @post("/", summary="Create a knowledge base")
    async def create_knowledge(
        self,
        state: State,
        data: JSONBody[KnowledgeBaseCreate],
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
    ) -> KnowledgeBaseRead:
        return await _service(state, session, principal).create(data)

    @get("/{kb_id:str}", summary="One knowledge base with its documents")
    async def get_knowledge(
        self,
        state: State,
        kb_id: FromPath[uuid.UUID],
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
    ) -> KnowledgeBaseDetail:
        return await _service(state, session, principal).detail(kb_id)

    @put("/{kb_id:str}", summary="Update title and/or description")
    async def update_knowledge(
        self,
        state: State,
        kb_id: FromPath[uuid.UUID],
        data: JSONBody[KnowledgeBaseUpdate],
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
    ) -> KnowledgeBaseRead:
        return await _service(state, session, principal).update(kb_id, data)

    @delete("/{kb_id:str}", summary="Delete a knowledge base, its documents and chunks")
    async def delete_knowledge(
        self,
        state: State,
        kb_id: FromPath[uuid.UUID],
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
    ) -> None:
        await _service(state, session, principal).delete(kb_id)

    @put("/{kb_id:str}/agents", summary="Replace the agents this knowledge base is assigned to")
    async def set_agents(
        self,
        state: State,
        kb_id: FromPath[uuid.UUID],
        data: JSONBody[AgentAssignmentUpdate],
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
    ) -> AgentAssignmentRead:
        return await _service(state, session, principal).set_agents(kb_id, data.agent_ids)


class AgentKnowledgeController(Controller):
    path = "/api/agents"
    tags = ["agents"]
    guards = [admin_only]

    @get("/{agent_id:str}/knowledge", summary="The knowledge bases assigned to an agent")
    async def agent_knowledge(
        self,
        state: State,
        agent_id: FromPath[uuid.UUID],
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
    ) -> list[KnowledgeBaseRead]:
        return await _service(state, session, principal).for_agent(agent_id)
