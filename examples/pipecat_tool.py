"""Pipecat: the declaration as a provider-neutral FunctionSchema, and a handler registered
with `llm.register_function`. Pipecat is not a dependency of this project: the pure
function below is tested, `register` is documentation and imports Pipecat when called.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def register(
    llm: Any, service: KnowledgeService, http: httpx.AsyncClient, tool_reply: Mapping[str, Any]
) -> Any:
    """Registers the handler on the pipeline's LLM service and returns the ToolsSchema for
    its context (`LLMContext(messages, tools=...)`), or None when `available` is false:
    then give the context neither the tools nor the agent instructions."""
    if not tool_reply["available"]:
        return None
    # Imported here so the module imports without Pipecat installed.
    from pipecat.adapters.schemas.function_schema import FunctionSchema  # noqa: PLC0415
    from pipecat.adapters.schemas.tools_schema import ToolsSchema  # noqa: PLC0415

    async def query_knowledge(params: Any) -> None:  # pipecat.services.llm_service.FunctionCallParams
        query = params.arguments.get("query")
        reply = await service.ask(
            http,
            query if isinstance(query, str) else "",
            call_id=params.tool_call_id,
            history=history_argument(params.arguments),
        )
        await params.result_callback(spoken_output(reply))

    llm.register_function(TOOL_NAME, query_knowledge)
    return ToolsSchema(standard_tools=[FunctionSchema(**function_schema_kwargs(tool_reply))])
