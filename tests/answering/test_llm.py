"""ChatAnswerer against a respx-mocked OpenAI-compatible endpoint: the request it sends, and
how each kind of reply ends (an answer, or an LLMError with a readable reason)."""

import json

import httpx
import pytest
import respx

from app.answering.llm import ChatAnswerer, LLMError
from app.openai_client import openai_client

BASE = "https://llm.test/v1"
MESSAGES = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Hours?"}]


@pytest.fixture
def answerer() -> ChatAnswerer:
    return ChatAnswerer(openai_client("sk-test", BASE, max_retries=3))


async def _complete(answerer: ChatAnswerer, **overrides: object):
    args = {"model": "gpt-4o-mini", "temperature": 0.1, "max_tokens": 120, "timeout": 2.0, **overrides}
    return await answerer.complete(MESSAGES, **args)  # type: ignore[arg-type]


async def test_sends_the_request_and_reads_text_model_and_usage(
    answerer: ChatAnswerer, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(
            200,
            json={
                "id": "c1",
                "object": "chat.completion",
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "Nine to five."}}],
                "usage": {"prompt_tokens": 31, "completion_tokens": 4, "total_tokens": 35},
            },
        )
    )

    result = await _complete(answerer)

    assert (result.text, result.model, result.prompt_tokens, result.completion_tokens) == (
        "Nine to five.",
        "gpt-4o-mini-2024-07-18",
        31,
        4,
    )
    request = route.calls.last.request
    assert request.headers["authorization"] == "Bearer sk-test"
    assert json.loads(request.content) == {
        "model": "gpt-4o-mini",
        "messages": MESSAGES,
        "temperature": 0.1,
        "max_tokens": 120,
    }


async def test_a_minimal_compatible_reply_is_enough(
    answerer: ChatAnswerer, respx_mock: respx.MockRouter
) -> None:
    """vLLM, Ollama and others may leave out usage and model."""
    route = respx_mock.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(200, json={"choices": [{"message": {"content": "Yes."}}]})
    )

    result = await _complete(answerer, model="llama3")

    assert (result.text, result.model, result.prompt_tokens, result.completion_tokens) == (
        "Yes.",
        "llama3",
        0,
        0,
    )
    # The model named in the result is the one asked for, since the reply names none.
    assert json.loads(route.calls.last.request.content) == {
        "model": "llama3",
        "messages": MESSAGES,
        "temperature": 0.1,
        "max_tokens": 120,
    }


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (httpx.Response(200, content=b"<html>bad gateway</html>"), "the model returned a malformed response"),
        (httpx.Response(200, json={"choices": []}), "the model returned a malformed response"),
        (httpx.Response(200, json=[1, 2]), "the model returned a malformed response"),
        (
            httpx.Response(200, content=b"[" * 100_000 + b"]" * 100_000),
            "the model returned a malformed response",
        ),
        (
            httpx.Response(200, json={"choices": [{"message": {"content": None, "refusal": "no"}}]}),
            "the model returned no text",
        ),
        (httpx.Response(429, json={"error": {"message": "slow down"}}), "the model answered HTTP 429"),
        (httpx.Response(503, json={"error": {"message": "down"}}), "the model answered HTTP 503"),
    ],
    ids=["html", "no-choices", "list", "deep", "null-content", "429", "503"],
)
async def test_failures_become_llm_errors_without_retries(
    answerer: ChatAnswerer, respx_mock: respx.MockRouter, reply: httpx.Response, reason: str
) -> None:
    route = respx_mock.post(f"{BASE}/chat/completions").mock(return_value=reply)

    with pytest.raises(LLMError) as caught:
        await _complete(answerer)

    assert caught.value.reason == reason
    assert route.call_count == 1  # the client's max_retries=3 is overridden: no backoff on a call
    assert json.loads(route.calls.last.request.content) == {
        "model": "gpt-4o-mini",
        "messages": MESSAGES,
        "temperature": 0.1,
        "max_tokens": 120,
    }


async def test_no_request_when_no_time_is_left(answerer: ChatAnswerer, respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(f"{BASE}/chat/completions")

    with pytest.raises(LLMError, match="no time left"):
        await _complete(answerer, timeout=0.01)

    assert route.call_count == 0


def _sse(*pieces: str | None, finish: str = "stop") -> bytes:
    events = [
        {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]} for piece in pieces
    ]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    body = "".join(
        f"data: {json.dumps({'id': 's1', 'object': 'chat.completion.chunk', **e})}\n\n" for e in events
    )
    return (body + "data: [DONE]\n\n").encode()


async def test_a_colour_code_split_between_stream_chunks_goes_whole(
    answerer: ChatAnswerer, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=_sse("Parking is \x1b", "[31mfree\x1b[", "0m behind the \x1b[1", ";3", "2mbuilding."),
        )
    )

    pieces = [
        piece
        async for piece in answerer.stream(
            MESSAGES, model="gpt-4o-mini", temperature=0.1, max_tokens=120, timeout=2.0
        )
    ]

    assert pieces == ["Parking is ", "free", " behind the ", "building."]
    assert json.loads(route.calls.last.request.content)["stream"] is True
