"""The wiring examples (examples/, docs/INTEGRATION.md) build each platform's payloads from
the declarations the service serves, held to each platform's own SDK: the openai SDK's
request types, google-genai's Live API models, Pipecat's and LiveKit's tool classes (which
also run the call), so a change of the declaration or of a payload that a platform would
reject fails here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.genai import types as genai
from livekit.agents import AgentSession, RunContext
from livekit.agents.llm import FunctionCall, FunctionToolCall, ToolContext
from livekit.agents.llm.utils import execute_function_call
from livekit.agents.voice.speech_handle import SpeechHandle
from openai.types.chat import (
    ChatCompletionMessage,
    ChatCompletionToolMessageParam,
)
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.realtime import (
    ConversationItemCreateEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    SessionUpdateEvent,
)
from openai.types.realtime.conversation_item_create_event_param import ConversationItemCreateEventParam
from openai.types.realtime.realtime_client_event_param import RealtimeClientEventParam
from openai.types.realtime.response_create_event_param import ResponseCreateEventParam
from openai.types.realtime.session_update_event_param import SessionUpdateEventParam
from pipecat.adapters.llm.services.open_ai_adapter import OpenAILLMAdapter
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.llm import OpenAILLMService

from examples import gemini_live, livekit_tool, openai_chat, openai_realtime, pipecat_tool
from examples.knowledge import FALLBACK_REPLY, KnowledgeService, query_argument, spoken_output
from tests.helpers import assign_new_agent, create_kb, create_key
from tests.query.test_tool_declaration import strict_validator

OWN = "You are the receptionist of Acme Dental."
QUESTION = "Where can I park?"
PARKING = "Free parking is available behind the building, entrance on Elm Street."


async def _service(client, org, agent: str) -> KnowledgeService:
    key = await create_key(client, org.headers, "query")
    return KnowledgeService(str(client.base_url).rstrip("/"), agent, key["key"])


async def _tool_reply(client, service: KnowledgeService, fmt: str) -> dict[str, Any]:
    # Through the example's own client code, with a query key, as a runtime would.
    return await service.tool(client, fmt)


@pytest.fixture
async def faq_service(client, org, faq_agent) -> KnowledgeService:
    return await _service(client, org, faq_agent["agent"])


@pytest.fixture
async def empty_service(client, org) -> KnowledgeService:
    """An agent whose only KB holds no document: its declaration says available: false."""
    kb = await create_kb(client, org.headers, "Empty")
    return await _service(client, org, await assign_new_agent(client, org.headers, kb["id"]))


def _materialised(value: Any) -> Any:
    # The SDK types its lists as Iterable, which pydantic validates lazily: the items are
    # only checked while the iterator is consumed.
    if isinstance(value, dict):
        return {k: _materialised(v) for k, v in value.items()}
    if isinstance(value, Iterator | list):
        return [_materialised(v) for v in value]
    return value


def _checked(tp: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` as the SDK's request type accepts it, unknown keys refused at every level."""
    validated: dict[str, Any] = _materialised(strict_validator(tp).validate_python(payload))
    assert validated == payload
    return validated


# --- OpenAI Realtime -----------------------------------------------------------------------


async def test_realtime_session_update_carries_the_tool_and_instructions(client, faq_service):
    tool_reply = await _tool_reply(client, faq_service, "openai-realtime")
    assert tool_reply["available"] is True
    event = openai_realtime.session_update(tool_reply, instructions=OWN)
    assert event == {
        "type": "session.update",
        "session": {
            "type": "realtime",
            "instructions": f"{OWN}\n\n{tool_reply['instructions']}",
            "tools": [tool_reply["tool"]],
            "tool_choice": "auto",
        },
    }
    _checked(SessionUpdateEventParam, event)
    _checked(RealtimeClientEventParam, event)
    model = SessionUpdateEvent.model_validate(event)
    assert model.model_extra == {}
    assert model.session.tools[0].name == "query_knowledge"


async def test_realtime_session_update_without_a_ready_document_leaves_tool_and_instructions_out(
    client, empty_service
):
    tool_reply = await _tool_reply(client, empty_service, "openai-realtime")
    assert (tool_reply["available"], tool_reply["reason"]) == (False, "no_documents")
    event = openai_realtime.session_update(tool_reply, instructions=OWN)
    assert event == {
        "type": "session.update",
        "session": {"type": "realtime", "instructions": OWN, "tools": []},
    }
    _checked(SessionUpdateEventParam, event)


async def test_realtime_function_call_round_trip(client, faq_service):
    done = ResponseFunctionCallArgumentsDoneEvent(
        type="response.function_call_arguments.done",
        arguments=json.dumps({"query": QUESTION}),
        call_id="call_Xk3v9Q",
        event_id="event_1",
        item_id="item_1",
        name="query_knowledge",
        output_index=0,
        response_id="resp_1",
    )
    assert openai_realtime.function_call(done.model_dump()) == ("call_Xk3v9Q", QUESTION)

    reply = await faq_service.ask(client, QUESTION, call_id="call_Xk3v9Q")
    assert reply["status"] == "answered"
    assert PARKING in reply["answer"]

    output = openai_realtime.function_call_output("call_Xk3v9Q", reply)
    assert output == {
        "type": "conversation.item.create",
        "item": {"type": "function_call_output", "call_id": "call_Xk3v9Q", "output": reply["answer"]},
    }
    _checked(ConversationItemCreateEventParam, output)
    assert ConversationItemCreateEvent.model_validate(output).model_extra == {}
    _checked(ResponseCreateEventParam, openai_realtime.response_create())


def test_realtime_other_events_are_not_calls():
    assert openai_realtime.function_call({"type": "response.output_text.delta", "delta": "Hi"}) is None
    other = {"type": "response.function_call_arguments.done", "name": "transfer_call", "call_id": "c"}
    assert openai_realtime.function_call(other) is None


def test_realtime_typed_user_turn_is_a_valid_event():
    _checked(ConversationItemCreateEventParam, openai_realtime.user_text(QUESTION))


async def test_realtime_refuses_a_declaration_in_another_format(client, faq_service):
    tool_reply = await _tool_reply(client, faq_service, "gemini")
    with pytest.raises(ValueError, match="expected a declaration in format 'openai-realtime', got 'gemini'"):
        openai_realtime.session_update(tool_reply)


# --- the service call ----------------------------------------------------------------------


async def test_a_refused_call_gets_the_spoken_fallback(client, app, faq_agent):
    service = KnowledgeService(str(client.base_url).rstrip("/"), faq_agent["agent"], "vk_not_a_key")
    assert await service.ask(client, QUESTION, call_id="call_1") == FALLBACK_REPLY
    # The same words as the service's own apology when it cannot answer.
    assert FALLBACK_REPLY["answer"] == app.state.prompts.get("default").unavailable_reply


async def test_a_timeout_gets_the_spoken_fallback():
    def timed_out(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(timed_out)) as http:
        service = KnowledgeService("http://vk.invalid", "3f0c2d9e-6b1a-4c55-9d1e-0a7b5c8e2f41", "vk_x")
        assert await service.ask(http, QUESTION) == FALLBACK_REPLY


async def test_early_speech_says_each_sentence_then_returns_the_reply(client, faq_service):
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    reply = await faq_service.ask_speaking(client, "What payment do you accept and when is it due?", say)
    assert said == [
        "We accept cash, debit cards and credit cards.",
        " Payment is due at the end of each visit.",
    ]
    assert "".join(said) == reply["answer"]
    assert reply["status"] == "answered"


async def test_early_speech_refused_says_the_fallback(client, faq_agent):
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    service = KnowledgeService(str(client.base_url).rstrip("/"), faq_agent["agent"], "vk_not_a_key")
    assert await service.ask_speaking(client, QUESTION, say) == FALLBACK_REPLY
    assert said == [FALLBACK_REPLY["answer"]]


async def test_not_found_is_spoken_as_is(client, faq_service):
    reply = await faq_service.ask(client, "Who won the football world cup in 1998?")
    assert (reply["status"], spoken_output(reply)) == (
        "not_found",
        "I'm sorry, I don't have that information.",
    )


@pytest.mark.parametrize(
    ("arguments", "query"),
    [
        ('{"query": "Where can I park?"}', QUESTION),
        ({"query": QUESTION}, QUESTION),
        ("{not json", ""),
        ({"question": QUESTION}, ""),
        ({"query": 3}, ""),
        (None, ""),
    ],
)
def test_query_argument(arguments, query):
    assert query_argument(arguments) == query


# --- OpenAI Chat Completions ---------------------------------------------------------------


async def test_chat_request_and_tool_message_are_valid(client, faq_service):
    tool_reply = await _tool_reply(client, faq_service, "openai-chat")
    user = {"role": "user", "content": QUESTION}
    request = openai_chat.chat_request(tool_reply, [user], instructions=OWN)
    assert request == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": f"{OWN}\n\n{tool_reply['instructions']}"}, user],
        "tools": [tool_reply["tool"]],
    }
    _checked(CompletionCreateParamsNonStreaming, request)

    # The model's answer, as the SDK parses it, then the conversation sent back.
    assistant = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_7Yw",
                    "type": "function",
                    "function": {"name": "query_knowledge", "arguments": json.dumps({"query": QUESTION})},
                }
            ],
        }
    ).model_dump(exclude_none=True)
    assert openai_chat.tool_calls(assistant) == [("call_7Yw", QUESTION)]
    reply = await faq_service.ask(client, QUESTION, call_id="call_7Yw")
    message = openai_chat.tool_message("call_7Yw", reply)
    assert message == {"role": "tool", "tool_call_id": "call_7Yw", "content": reply["answer"]}
    _checked(ChatCompletionToolMessageParam, message)
    follow_up = openai_chat.chat_request(tool_reply, [user, assistant, message], instructions=OWN)
    _checked(CompletionCreateParamsNonStreaming, follow_up)


async def test_chat_request_without_a_ready_document_has_no_tools(client, empty_service):
    tool_reply = await _tool_reply(client, empty_service, "openai-chat")
    request = openai_chat.chat_request(tool_reply, [{"role": "user", "content": QUESTION}])
    assert request == {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": QUESTION}]}
    _checked(CompletionCreateParamsNonStreaming, request)


# --- Gemini Live: held to google-genai's Live API models (LiveClientMessage, LiveServerMessage)


def _genai(model: Any, message: dict[str, Any]) -> Any:
    """`message` parsed by a google-genai model (unknown keys refused at every level), which
    gives it back unchanged."""
    parsed = model.model_validate(message)
    assert parsed.model_dump(by_alias=True, exclude_none=True, mode="json") == message
    return parsed


async def test_gemini_setup_message(client, faq_service):
    tool_reply = await _tool_reply(client, faq_service, "gemini")
    message = gemini_live.setup_message(tool_reply, model="models/gemini-live", instructions=OWN)
    assert message == {
        "setup": {
            "model": "models/gemini-live",
            "systemInstruction": {"parts": [{"text": f"{OWN}\n\n{tool_reply['instructions']}"}]},
            "tools": [tool_reply["tool"]],
        }
    }
    parsed = _genai(genai.LiveClientMessage, message)
    (declaration,) = parsed.setup.tools[0].function_declarations
    assert (declaration.name, declaration.parameters.required) == ("query_knowledge", ["query"])
    # The SDK's own session config takes the declaration as served.
    config = genai.LiveConnectConfig(tools=[tool_reply["tool"]])
    assert config.tools[0].function_declarations[0] == declaration


async def test_gemini_setup_without_a_ready_document(client, empty_service):
    tool_reply = await _tool_reply(client, empty_service, "gemini")
    message = gemini_live.setup_message(tool_reply, model="models/gemini-live")
    assert message == {"setup": {"model": "models/gemini-live"}}
    _genai(genai.LiveClientMessage, message)


async def test_gemini_tool_call_round_trip(client, faq_service):
    # The server's message as the SDK writes it on the wire.
    server = genai.LiveServerMessage(
        tool_call=genai.LiveServerToolCall(
            function_calls=[
                genai.FunctionCall(id="function-call-1", name="query_knowledge", args={"query": QUESTION}),
                genai.FunctionCall(id="function-call-2", name="transfer_call", args={}),
            ]
        )
    ).model_dump(by_alias=True, exclude_none=True, mode="json")
    assert gemini_live.function_calls(server) == [("function-call-1", QUESTION)]
    assert gemini_live.function_calls({"serverContent": {"turnComplete": True}}) == []
    reply = await faq_service.ask(client, QUESTION, call_id="function-call-1")
    assert PARKING in reply["answer"]
    response = gemini_live.tool_response("function-call-1", reply)
    assert response == {
        "toolResponse": {
            "functionResponses": [
                {"id": "function-call-1", "name": "query_knowledge", "response": {"output": reply["answer"]}}
            ]
        }
    }
    _genai(genai.LiveClientMessage, response)


# --- Pipecat and LiveKit Agents: each SDK's own classes build the tool, convert it for the
# model and run the call.


def _openai_function(tool: dict[str, Any]) -> dict[str, Any]:
    """A flat openai-realtime declaration in the Chat Completions form the SDKs' adapters give."""
    return {"type": "function", "function": {k: tool[k] for k in ("name", "description", "parameters")}}


async def test_pipecat_tools_schema_gives_the_model_the_declaration(client, faq_service):
    tool_reply = await _tool_reply(client, faq_service, "openai-realtime")
    llm = OpenAILLMService(api_key="sk-never-sent")
    tools = pipecat_tool.register(llm, faq_service, client, tool_reply)
    assert llm.has_function("query_knowledge")
    assert OpenAILLMAdapter().to_provider_tools_format(tools) == [_openai_function(tool_reply["tool"])]


async def test_pipecat_handler_answers_through_the_service(client, faq_service):
    results: list[Any] = []

    async def result_callback(result: Any, **_: Any) -> None:
        results.append(result)

    params = FunctionCallParams(
        function_name="query_knowledge",
        tool_call_id="call-pipecat-1",
        arguments={"query": QUESTION},
        llm=OpenAILLMService(api_key="sk-never-sent"),
        pipeline_worker=None,
        context=LLMContext(),
        result_callback=result_callback,
    )
    await pipecat_tool.handler(faq_service, client)(params)
    assert len(results) == 1
    assert PARKING in results[0]


async def test_livekit_tool_gives_the_model_the_declaration_and_answers(client, faq_service):
    tool_reply = await _tool_reply(client, faq_service, "openai-realtime")
    tools = ToolContext([livekit_tool.knowledge_tool(faq_service, client, tool_reply)])
    assert tools.parse_function_tools("openai") == [_openai_function(tool_reply["tool"])]

    arguments = json.dumps({"query": QUESTION})
    call = FunctionCall(call_id="call-livekit-1", name="query_knowledge", arguments=arguments)
    context = RunContext(session=AgentSession(), speech_handle=SpeechHandle.create(), function_call=call)
    result = await execute_function_call(
        FunctionToolCall(call_id="call-livekit-1", name="query_knowledge", arguments=arguments),
        tools,
        call_ctx=context,
    )
    assert result.raw_exception is None
    assert result.fnc_call_out is not None
    assert result.fnc_call_out.is_error is False
    assert PARKING in result.fnc_call_out.output


async def test_unavailable_tool_is_not_registered(client, empty_service):
    tool_reply = await _tool_reply(client, empty_service, "openai-realtime")
    llm = OpenAILLMService(api_key="sk-never-sent")
    assert pipecat_tool.register(llm, empty_service, client, tool_reply) is None
    assert not llm.has_function("query_knowledge")
    assert livekit_tool.knowledge_tool(empty_service, client, tool_reply) is None
