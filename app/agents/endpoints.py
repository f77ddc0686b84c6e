from __future__ import annotations

import uuid

from litestar import Controller, get, put
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.schemas import AgentSettingsRead, AgentSettingsUpdate
from app.agents.service import AgentService
from app.auth import Principal, admin_only


def provide_agent_service(
    state: State, session: NamedDependency[AsyncSession], principal: NamedDependency[Principal]
) -> AgentService:
    return AgentService(
        session, principal.org_id, state.prompts.variants, state.settings.query.prompt_variant
    )


class AgentSettingsController(Controller):
    path = "/api/agents"
    tags = ["agents"]
    guards = [admin_only]
    dependencies = {"agent_service": Provide(provide_agent_service, sync_to_thread=False)}

    @get("/{agent_id:str}/settings", summary="The agent's prompt variant, escalation policy and attribution")
    async def get_settings(
        self,
        agent_id: FromPath[uuid.UUID],
        agent_service: NamedDependency[AgentService],
    ) -> AgentSettingsRead:
        return await agent_service.get(agent_id)

    @put(
        "/{agent_id:str}/settings",
        summary="Choose the agent's prompt variant (null = default), escalation policy and attribution",
    )
    async def put_settings(
        self,
        agent_id: FromPath[uuid.UUID],
        data: JSONBody[AgentSettingsUpdate],
        agent_service: NamedDependency[AgentService],
    ) -> AgentSettingsRead:
        return await agent_service.update(agent_id, data)
