"""Pipecat: the declaration as a provider-neutral FunctionSchema, and a handler registered
with `llm.register_function`. Pipecat is not a dependency of the service: this module imports
it only when `register` is called (the tests run it against Pipecat's own classes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from examples.knowledge import TOOL_NAME, KnowledgeService, check_format, history_argument, spoken_output

# The flat declaration (name, description, parameters) maps one to one onto FunctionSchema;
# Pipecat's adapters turn it into each provider's format.
FORMAT = "openai-realtime"


def function_schema_kwargs(tool_reply: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for `FunctionSchema(...)`, taken from an `openai-realtime` declaration."""
    check_format(tool_reply, FORMAT)
    tool = tool_reply["tool"]
    return {
        "name": tool["name"],
        "description": tool["description"],
        "properties": tool["parameters"]["properties"],
        "required": tool["parameters"]["required"],
    }


def handler(service: KnowledgeService, http: httpx.AsyncClient) -> Callable[[Any], Awaitable[None]]:
    """The function Pipecat calls with each query_knowledge call's
    `pipecat.services.llm_service.FunctionCallParams`: it asks the service, the call's id as
    the request id, and hands the spoken answer to `params.result_callback`."""

    async def query_knowledge(params: Any) -> None:
        query = params.arguments.get("query")
        reply = await service.ask(
            http,
            query if isinstance(query, str) else "",
            call_id=params.tool_call_id,
            history=history_argument(params.arguments),
        )
        await params.result_callback(spoken_output(reply))

    return query_knowledge


def register(
    llm: Any, service: KnowledgeService, http: httpx.AsyncClient, tool_reply: Mapping[str, Any]
) -> Any:
    """Registers the handler on the pipeline's LLM service and returns the ToolsSchema for
    its context (`LLMContext(messages, tools=...)`), or None when `available` is false:
    then give the context neither the tools nor the agent instructions."""
    if not tool_reply["available"]:
        return None
    # Imported here so the module imports without Pipecat installed.
    from pipecat.adapters.llm.schemas.function_schema import FunctionSchema  # noqa: PLC0415
    from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema  # noqa: PLC0415

    llm.register_function(TOOL_NAME, handler(service, http))
    return ToolsSchema(standard_tools=[FunctionSchema(**function_schema_kwargs(tool_reply))])
