from __future__ import annotations

import uuid

from litestar import Controller, get, put
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.schemas import AgentSettingsRead, AgentSettingsUpdate
from app.agents.service import AgentService
from app.auth import Principal, admin_only


class AgentSettingsController(Controller):
    path = "/api/agents"
    tags = ["agents"]
    guards = [admin_only]

    @get("/{agent_id:str}/settings", summary="The agent's prompt variant")
    async def get_settings(
        self,
        state: State,
        agent_id: FromPath[uuid.UUID],
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
    ) -> AgentSettingsRead:
        return await AgentService(session, principal.org_id, state.prompts.variants).get(agent_id)

    @put(
        "/{agent_id:str}/settings",
        summary="Choose the prompt variant that answers for the agent (null = default)",
    )
    async def put_settings(
        self,
        state: State,
        agent_id: FromPath[uuid.UUID],
        data: JSONBody[AgentSettingsUpdate],
        session: NamedDependency[AsyncSession],
        principal: NamedDependency[Principal],
    ) -> AgentSettingsRead:
        return await AgentService(session, principal.org_id, state.prompts.variants).update(agent_id, data)
