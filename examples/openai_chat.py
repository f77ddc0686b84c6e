"""OpenAI Chat Completions (a cascaded pipeline: speech-to-text, a chat model, text-to-speech):
the strict function tool, the model's tool call, and the `tool` message that answers it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from examples.knowledge import TOOL_NAME, check_format, joined_instructions, query_argument, spoken_output

FORMAT = "openai-chat"


def chat_request(
    tool_reply: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str = "gpt-4o-mini",
    instructions: str = "",
) -> dict[str, Any]:
    """Keyword arguments for `client.chat.completions.create`: a system message with the
    agent instructions, the conversation, and the declaration as is in `tools` (all left
    out when `available` is false)."""
    check_format(tool_reply, FORMAT)
    system = joined_instructions(instructions, tool_reply)
    request: dict[str, Any] = {
        "model": model,
        "messages": [*([{"role": "system", "content": system}] if system else []), *messages],
    }
    if tool_reply["available"]:
        request["tools"] = [tool_reply["tool"]]
    return request


def tool_calls(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(tool_call_id, query) of each query_knowledge call in an assistant message
    (`choice.message.model_dump()`)."""
    return [
        (str(call["id"]), query_argument(call["function"].get("arguments")))
        for call in message.get("tool_calls") or []
        if call.get("type") == "function" and call["function"].get("name") == TOOL_NAME
    ]


def tool_message(tool_call_id: str, reply: Mapping[str, Any]) -> dict[str, Any]:
    """The message that answers one tool call; it follows the assistant message that made it."""
    return {"role": "tool", "tool_call_id": tool_call_id, "content": spoken_output(reply)}
