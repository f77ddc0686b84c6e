"""OpenAI Realtime: the tool in `session.update`, the function call, `function_call_output`.

Run (needs OPENAI_API_KEY and the service with a ready document; text in and out, no audio):

    VK_URL=http://127.0.0.1:8000 VK_AGENT=<agent id> VK_QUERY_KEY=vk_... \
        uv run python -m examples.openai_realtime "Where can I park?"
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

import httpx

from examples.knowledge import (
    TOOL_NAME,
    KnowledgeService,
    check_format,
    joined_instructions,
    query_argument,
    spoken_output,
)

FORMAT = "openai-realtime"


def session_update(tool_reply: Mapping[str, Any], *, instructions: str = "") -> dict[str, Any]:
    """The `session.update` event for a call: the runtime's own `instructions` with the agent
    instructions, and the declaration as is in `tools`; neither when `available` is false
    (`tools: []` clears a tool set earlier in the session)."""
    check_format(tool_reply, FORMAT)
    session: dict[str, Any] = {
        "type": "realtime",
        "instructions": joined_instructions(instructions, tool_reply),
        "tools": [tool_reply["tool"]] if tool_reply["available"] else [],
    }
    if tool_reply["available"]:
        session["tool_choice"] = "auto"
    return {"type": "session.update", "session": session}


def function_call(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """(call_id, query) when `event` is the end of a query_knowledge call
    (`response.function_call_arguments.done`); None for every other server event."""
    if event.get("type") != "response.function_call_arguments.done" or event.get("name") != TOOL_NAME:
        return None
    return str(event["call_id"]), query_argument(event.get("arguments"))


def function_call_output(call_id: str, reply: Mapping[str, Any]) -> dict[str, Any]:
    """The `conversation.item.create` event that returns the answer to the model."""
    return {
        "type": "conversation.item.create",
        "item": {"type": "function_call_output", "call_id": call_id, "output": spoken_output(reply)},
    }


def response_create() -> dict[str, Any]:
    """After the output: the model does not speak on its own once a function output arrives."""
    return {"type": "response.create"}


def user_text(text: str) -> dict[str, Any]:
    """A typed user turn, for trying the wiring without audio."""
    return {
        "type": "conversation.item.create",
        "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
    }


async def main(question: str) -> None:
    from openai import AsyncOpenAI  # noqa: PLC0415 - only the demo talks to OpenAI

    service = KnowledgeService(os.environ["VK_URL"], os.environ["VK_AGENT"], os.environ["VK_QUERY_KEY"])
    async with httpx.AsyncClient() as http:
        tool_reply = await service.tool(http, FORMAT)
        update = session_update(tool_reply, instructions="You are the receptionist of the practice.")
        update["session"]["output_modalities"] = ["text"]
        async with AsyncOpenAI().realtime.connect(model="gpt-realtime") as conn:

            async def send(event: dict[str, Any]) -> None:
                # The events are built as plain JSON (the tests hold them to the SDK's types).
                await conn.send_raw(json.dumps(event))

            await send(update)
            await send(user_text(question))
            await send(response_create())
            answered_call = False
            async for event in conn:
                call = function_call(event.model_dump())
                if call is not None:
                    # A real runtime runs this as a task, so audio keeps flowing meanwhile.
                    reply = await service.ask(http, call[1], call_id=call[0])
                    await send(function_call_output(call[0], reply))
                    await send(response_create())
                    answered_call = True
                elif event.type == "response.output_text.delta":
                    print(event.delta, end="", flush=True)
                elif event.type == "response.done":
                    if answered_call:  # the response that held the call; the spoken one follows
                        answered_call = False
                        continue
                    print()
                    return


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "Where can I park?"))
