from __future__ import annotations

import uuid
from typing import Annotated, Literal

from litestar import Controller, Response, get, post
from litestar.background_tasks import BackgroundTask
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, HeaderParameter, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, admin_only
from app.errors import Forbidden, NotFound, ValidationFailed
from app.http import Limit, Offset, TimeWindow, provide_time_window
from app.observability.metrics import observe_query
from app.query.query_log import QueryLogService
from app.query.schemas import KnowledgeGap, QueryLogRead, QueryRequest, QueryResponse, ToolRead
from app.query.service import QueryService
from app.query.tool_declaration import ToolFormat
from app.query.tool_service import ToolService
from app.schemas import Page


def provide_query_service(state: State, principal: NamedDependency[Principal]) -> QueryService:
    """The lifespan's QueryService, which has its own connections: no session is opened.

    It asks for the caller, which it does not use, so that Litestar resolves the two one
    after the other: dependencies it resolves side by side run in an anyio task group,
    about 70 us of CPU on every query_knowledge call.
    """
    del principal
    service: QueryService = state.query_service
    return service


def provide_tool_service(
    state: State, session: NamedDependency[AsyncSession], principal: NamedDependency[Principal]
) -> ToolService:
    return ToolService(session, principal.org_id, state.prompts, state.settings.query.prompt_variant)


def provide_query_log_service(
    state: State, session: NamedDependency[AsyncSession], principal: NamedDependency[Principal]
) -> QueryLogService:
    return QueryLogService(session, principal.org_id, min_confidence=state.settings.query.min_confidence)


class QueryController(Controller):
    path = "/api/agents"
    tags = ["query"]
    dependencies = {
        "query_service": Provide(provide_query_service, sync_to_thread=False),
        "tool_service": Provide(provide_tool_service, sync_to_thread=False),
        "query_log_service": Provide(provide_query_log_service, sync_to_thread=False),
    }

    @post(
        "/{agent_id:str}/query_knowledge",
        status_code=HTTP_200_OK,
        summary="Answer a caller's question from the agent's knowledge (the voice model's tool)",
        # 403: debug mode with a query key. The call is logged after the answer is sent, so no
        # conflict can reach the caller.
        opt={"errors": (Forbidden,), "writes": False},
        description=(
            "Callable with a `query` or `admin` key of the agent's organisation. Always answers 200 with a "
            "speakable `answer` and a `status`: `answered`, `not_found` (nothing relevant is known) or "
            "`unavailable` (the service could not answer in time). `debug=true` (admin keys only) adds the "
            "exact messages sent to the model, every candidate with its ranks and the confidence computation."
        ),
    )
    async def query_knowledge(
        self,
        agent_id: FromPath[uuid.UUID],
        data: JSONBody[QueryRequest],
        principal: NamedDependency[Principal],
        query_service: NamedDependency[QueryService],
        debug: Annotated[bool, QueryParameter(description="Admin keys only.")] = False,
        evaluation: Annotated[
            bool,
            HeaderParameter(
                name="X-Evaluation",
                description=(
                    "`true` marks an evaluation's call (vk eval, vk replay send it): logged as such "
                    "and left out of the knowledge gaps."
                ),
            ),
        ] = False,
    ) -> Response[QueryResponse]:
        if (debug or data.variant) and not principal.is_admin:
            raise Forbidden("debug mode and prompt variants need an 'admin' key")
        variants = query_service.prompts.variants
        if data.variant is not None and data.variant not in variants:
            raise ValidationFailed(
                f"unknown prompt variant '{data.variant}'",
                extra=[{"field": "variant", "message": f"one of: {', '.join(variants)}"}],
            )
        outcome = await query_service.query(
            org_id=principal.org_id,
            agent_id=agent_id,
            question=data.query,
            variant=data.variant,
            debug=debug,
            evaluation=evaluation,
            filters=data.filters,
        )
        observe_query(outcome.response)
        return Response(outcome.response, background=BackgroundTask(outcome.finish))  # type: ignore[arg-type]

    @get(
        "/{agent_id:str}/tool",
        summary="The query_knowledge tool declaration and agent instructions",
        description=(
            "The declaration and instructions are given whether or not the tool can answer; "
            "`available: false` (with its `reason`) tells the voice runtime to leave both out of the session."
        ),
    )
    async def tool(
        self,
        agent_id: FromPath[uuid.UUID],
        tool_service: NamedDependency[ToolService],
        format: Annotated[
            Literal["openai-realtime", "openai-chat", "gemini"], QueryParameter()
        ] = "openai-realtime",
    ) -> ToolRead:
        fmt: ToolFormat = format
        return await tool_service.tool(agent_id, fmt)

    @get(
        "/{agent_id:str}/queries",
        guards=[admin_only],
        dependencies={"window": Provide(provide_time_window, sync_to_thread=False)},
        summary="The agent's logged queries, newest first",
    )
    async def queries(
        self,
        agent_id: FromPath[uuid.UUID],
        query_log_service: NamedDependency[QueryLogService],
        window: NamedDependency[TimeWindow],
        status: Annotated[Literal["answered", "not_found", "unavailable"] | None, QueryParameter()] = None,
        evaluation: Annotated[
            bool | None,
            QueryParameter(
                description="`false`: callers' calls only; `true`: evaluation calls only; absent: all."
            ),
        ] = None,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[QueryLogRead]:
        return await query_log_service.queries(
            agent_id,
            status=status,
            evaluation=evaluation,
            since=window.since,
            until=window.until,
            limit=limit,
            offset=offset,
        )


class KnowledgeGapController(Controller):
    path = "/api/knowledge-gaps"
    tags = ["query"]
    guards = [admin_only]
    dependencies = {"query_log_service": Provide(provide_query_log_service, sync_to_thread=False)}

    @get(
        "/",
        dependencies={"window": Provide(provide_time_window, sync_to_thread=False)},
        opt={"errors": (NotFound,)},  # an agent_id unknown here
        summary="Questions that ended not_found or with low confidence, most frequent first",
    )
    async def gaps(
        self,
        query_log_service: NamedDependency[QueryLogService],
        window: NamedDependency[TimeWindow],
        agent_id: Annotated[uuid.UUID | None, QueryParameter()] = None,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> list[KnowledgeGap]:
        return await query_log_service.gaps(
            agent_id=agent_id,
            since=window.since,
            until=window.until,
            limit=limit,
            offset=offset,
        )
