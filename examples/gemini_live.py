"""Gemini Live (the BidiGenerateContent WebSocket): the tool in the `setup` message, the
server's `toolCall`, and the client's `toolResponse`.

These are the JSON messages of the WebSocket API, camelCase as the API reference spells
them (the tests parse each with google-genai's `LiveClientMessage` and `LiveServerMessage`).
With the google-genai SDK the same pieces go into
`types.LiveConnectConfig(system_instruction=..., tools=[tool])` and
`session.send_tool_response(function_responses=[types.FunctionResponse(id=..., name=...,
response=...)])`; its models accept the camelCase names, so the declaration can be passed
as is (docs/INTEGRATION.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from examples.knowledge import TOOL_NAME, check_format, joined_instructions, query_argument, spoken_output

FORMAT = "gemini"


def setup_message(tool_reply: Mapping[str, Any], *, model: str, instructions: str = "") -> dict[str, Any]:
    """The first message on the WebSocket: the model (`models/...`), the system instruction
    with the agent instructions, and the declaration (a `Tool` with `functionDeclarations`)
    in `tools`; neither when `available` is false. The setup cannot change later in the
    session, so this is the one place the tool is given."""
    check_format(tool_reply, FORMAT)
    setup: dict[str, Any] = {"model": model}
    text = joined_instructions(instructions, tool_reply)
    if text:
        setup["systemInstruction"] = {"parts": [{"text": text}]}
    if tool_reply["available"]:
        setup["tools"] = [tool_reply["tool"]]
    return {"setup": setup}


def function_calls(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(id, query) of each query_knowledge call in a server message's `toolCall`; [] for
    any other message."""
    calls = (message.get("toolCall") or {}).get("functionCalls") or []
    return [
        (str(c.get("id", "")), query_argument(c.get("args"))) for c in calls if c.get("name") == TOOL_NAME
    ]


def tool_response(call_id: str, reply: Mapping[str, Any]) -> dict[str, Any]:
    """The `toolResponse` message for one call. `response` must be an object: the answer goes
    under `output`, the key the API reference names for a function's output."""
    return {
        "toolResponse": {
            "functionResponses": [
                {"id": call_id, "name": TOOL_NAME, "response": {"output": spoken_output(reply)}}
            ]
        }
    }
