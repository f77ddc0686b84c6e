from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from litestar import Controller, Response, get, post
from litestar.background_tasks import BackgroundTask
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, HeaderParameter, JSONBody, QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.serialization import encode_json
from litestar.status_codes import HTTP_200_OK
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, admin_only
from app.errors import Forbidden, NotFound, ValidationFailed
from app.http import Limit, Offset, TimeWindow, provide_time_window
from app.observability.metrics import observe_query
from app.query.conversation import Turn
from app.query.playground import PlaygroundService, check_variant
from app.query.query_log import QueryLogService
from app.query.schemas import (
    KnowledgeGap,
    PlaygroundRequest,
    PlaygroundResponse,
    QueryLogRead,
    QueryRequest,
    QueryResponse,
    ToolRead,
)
from app.query.service import QueryService
from app.query.streaming import QueryStream
from app.query.tool_declaration import ToolFormat
from app.query.tool_service import ToolService
from app.schemas import Page

# The parameters both forms of query_knowledge take besides the request body.
DebugMode = Annotated[bool, QueryParameter(description="Admin keys only.")]
Evaluation = Annotated[
    bool,
    HeaderParameter(
        name="X-Evaluation",
        description=(
            "`true` marks an evaluation's call (vk eval, vk replay send it): logged as such "
            "and left out of the knowledge gaps."
        ),
    ),
]


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


def provide_playground_service(state: State, principal: NamedDependency[Principal]) -> PlaygroundService:
    return PlaygroundService(state.query_service, principal.org_id)


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
        "playground_service": Provide(provide_playground_service, sync_to_thread=False),
    }

    @post(
        "/{agent_id:str}/query_knowledge",
        status_code=HTTP_200_OK,
        summary="Answer a caller's question from the agent's knowledge (the voice model's tool)",
        # 403: debug mode with a query key. The call is logged after the answer is sent, so no
        # conflict can reach the caller.
        opt={"errors": (Forbidden,), "writes": False},
        # The reply is made as a QueryReply (msgspec, no validation pass); QueryResponse
        # documents the same fields.
        responses={
            HTTP_200_OK: ResponseSpec(
                QueryResponse, generate_examples=False, description="Request fulfilled, document follows"
            )
        },
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
        debug: DebugMode = False,
        evaluation: Evaluation = False,
    ) -> Response[Any]:  # a QueryReply; typed Any so the schema shows QueryResponse alone
        outcome = await query_service.query(
            **_query_args(agent_id, data, principal, query_service, debug=debug, evaluation=evaluation)
        )
        observe_query(outcome.response)
        return Response(outcome.response, background=BackgroundTask(outcome.finish))

    @post(
        "/{agent_id:str}/playground",
        guards=[admin_only],
        status_code=HTTP_200_OK,
        opt={"errors": (NotFound,), "writes": False},
        summary="Dry-run a question: the reply, every candidate, the model's messages, the timings",
        description=(
            "For prompt engineers (admin keys only). The question is answered as `query_knowledge` answers "
            "it, with the agent's prompt variant or `variant`, and again with `compare_variant` when given; "
            "`skip_model` answers with the extractive answerer instead of the answering model. Each run "
            "lists BM25's and the vector search's candidates with their ranks and scores, the fused list, "
            "the exact messages the model is (or would be) sent, and the timings. A dry run is never "
            "logged (no query log row, no knowledge gap), never served from nor written to the answer cache."
        ),
    )
    async def playground(
        self,
        agent_id: FromPath[uuid.UUID],
        data: JSONBody[PlaygroundRequest],
        playground_service: NamedDependency[PlaygroundService],
    ) -> PlaygroundResponse:
        return await playground_service.run(agent_id, data)

    @post(
        "/{agent_id:str}/query_knowledge/stream",
        status_code=HTTP_200_OK,
        media_type="text/event-stream",
        response_description="Server-sent events: `holding`, `sentence`..., then `done`",
        summary="query_knowledge as server-sent events: each sentence as soon as it is ready",
        opt={"errors": (Forbidden,), "writes": False},
        description=(
            "The same call as query_knowledge, answered as `text/event-stream` (docs/INTEGRATION.md, "
            '"Early speech"): `holding` (`{"text"}`: a phrase to say while the answering model is slow), '
            '`sentence` (`{"text"}`: the next piece of the answer, to speak at once; the pieces end to end '
            "are the final answer), then `done` (the whole reply, exactly as query_knowledge returns it). "
            "Errors of the request (key, agent, payload) are plain JSON replies before any event."
        ),
    )
    async def query_knowledge_stream(
        self,
        agent_id: FromPath[uuid.UUID],
        data: JSONBody[QueryRequest],
        principal: NamedDependency[Principal],
        query_service: NamedDependency[QueryService],
        debug: DebugMode = False,
        evaluation: Evaluation = False,
    ) -> ServerSentEvent:
        stream = QueryStream(query_service)
        await stream.start(
            **_query_args(agent_id, data, principal, query_service, debug=debug, evaluation=evaluation)
        )
        return ServerSentEvent(
            _messages(stream.events()),
            # Proxies such as nginx would otherwise hold the sentences back until the end.
            headers={"X-Accel-Buffering": "no"},
            background=BackgroundTask(stream.finish),
        )

    @get(
        "/{agent_id:str}/tool",
        opt={"errors": (Forbidden, ValidationFailed)},
        summary="The query_knowledge tool declaration and agent instructions",
        description=(
            "The declaration and instructions are given whether or not the tool can answer; "
            "`available: false` (with its `reason`) tells the voice runtime to leave both out of the "
            "session. `variant` (admin keys only) gives them in that prompt variant instead of the agent's."
        ),
    )
    async def tool(
        self,
        agent_id: FromPath[uuid.UUID],
        principal: NamedDependency[Principal],
        tool_service: NamedDependency[ToolService],
        format: Annotated[
            Literal["openai-realtime", "openai-chat", "gemini"], QueryParameter()
        ] = "openai-realtime",
        variant: Annotated[
            str | None,
            QueryParameter(description="A prompt variant to declare the tool in (admin keys only)."),
        ] = None,
    ) -> ToolRead:
        if variant is not None:
            if not principal.is_admin:
                raise Forbidden("prompt variants need an 'admin' key")
            check_variant(variant, tool_service.prompts.variants)
        fmt: ToolFormat = format
        return await tool_service.tool(agent_id, fmt, variant)

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


def _query_args(
    agent_id: uuid.UUID,
    data: QueryRequest,
    principal: Principal,
    query_service: QueryService,
    *,
    debug: bool,
    evaluation: bool,
) -> dict[str, Any]:
    """QueryService.query's arguments for a call of either form (JSON or stream)."""
    if (debug or data.variant) and not principal.is_admin:
        raise Forbidden("debug mode and prompt variants need an 'admin' key")
    check_variant(data.variant, query_service.prompts.variants)
    return {
        "org_id": principal.org_id,
        "agent_id": agent_id,
        "question": data.query,
        "history": [Turn(t.role, t.content) for t in data.history or ()],
        "variant": data.variant,
        "debug": debug,
        "evaluation": evaluation,
        "filters": data.filters,
    }


async def _messages(events: AsyncIterator[tuple[str, object]]) -> AsyncIterator[ServerSentEventMessage]:
    async for kind, data in events:
        yield ServerSentEventMessage(event=kind, data=encode_json(data).decode())


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
