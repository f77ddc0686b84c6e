"""LiveKit Agents: the declaration as a raw-schema function tool on the Agent. LiveKit is not
a dependency of the service: this module imports it only when `knowledge_tool` is called (the
tests run the tool through LiveKit's own function-call machinery).
"""

# No `from __future__ import annotations` here: LiveKit finds the tool's RunContext parameter by
# its annotation, resolved against this module's globals when it is a string, where the
# RunContext imported inside knowledge_tool is missing; evaluated at definition, it is the class.

from collections.abc import Mapping
from typing import Any

import httpx

from examples.knowledge import KnowledgeService, check_format, history_argument, query_argument, spoken_output

FORMAT = "openai-realtime"


def raw_schema(tool_reply: Mapping[str, Any]) -> dict[str, Any]:
    """`function_tool(..., raw_schema=...)`: the flat declaration's name, description and
    JSON-schema parameters (LiveKit converts it for whichever model the session uses)."""
    check_format(tool_reply, FORMAT)
    tool = tool_reply["tool"]
    return {"name": tool["name"], "description": tool["description"], "parameters": tool["parameters"]}


def knowledge_tool(service: KnowledgeService, http: httpx.AsyncClient, tool_reply: Mapping[str, Any]) -> Any:
    """The tool for `Agent(instructions=..., tools=[...])`, or None when `available` is false:
    then build the Agent with neither the tool nor the agent instructions."""
    if not tool_reply["available"]:
        return None
    # Imported here so the module imports without LiveKit installed.
    from livekit.agents import RunContext, function_tool  # noqa: PLC0415

    async def query_knowledge(raw_arguments: dict[str, object], context: RunContext) -> str:
        reply = await service.ask(
            http,
            query_argument(raw_arguments),
            call_id=context.function_call.call_id,
            history=history_argument(raw_arguments),
        )
        return spoken_output(reply)

    return function_tool(query_knowledge, raw_schema=raw_schema(tool_reply))
