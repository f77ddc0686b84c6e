"""The provider's client over its real transport (aiohttp), against a real HTTP server on
this machine: what ``post_json`` sends, the errors it raises, and the SDK's own requests
(a streamed answer, the readiness check) on the same client. respx stands in everywhere
else, above the transport (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from array import array
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from app.answering.llm import ChatAnswerer, LLMError
from app.config import Settings
from app.embeddings.openai import OpenAIEmbedder
from app.openai_client import OpenAIClient, make_openai_client, openai_client

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Provider:
    """A local server; ``reply`` answers every request, ``seen`` lists them."""

    server: TestServer
    seen: list[Seen] = field(default_factory=list)
    reply: Handler | None = None

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))


@pytest.fixture
async def provider() -> AsyncIterator[Provider]:
    holder: list[Provider] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        (state,) = holder
        state.seen.append(Seen(request.method, request.path, dict(request.headers), await request.read()))
        assert state.reply is not None
        return await state.reply(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    holder.append(Provider(server))
    try:
        yield holder[0]
    finally:
        await server.close()


@pytest.fixture
async def client(provider: Provider) -> AsyncIterator[OpenAIClient]:
    """The client as the service makes it, for the local server."""
    made = openai_client("sk-local", provider.base_url)
    try:
        yield made
    finally:
        await made.close()


# A short answer asked of the model, as the service asks it.
ASK: dict[str, Any] = {"model": "gpt-4o-mini", "temperature": 0.0, "max_tokens": 50, "timeout": 5.0}
HOURS = [{"role": "user", "content": "Hours?"}]


def _json(payload: Any, status: int = 200) -> Handler:
    async def reply(request: web.Request) -> web.StreamResponse:
        return web.json_response(payload, status=status)

    return reply


async def test_the_service_client_runs_over_aiohttp_with_the_settings_key(provider: Provider) -> None:
    settings = Settings(openai_api_key="sk-local", openai_base_url=provider.base_url)
    made = make_openai_client(settings)
    assert made is not None
    provider.reply = _json({"ok": True})
    async with made as client:
        raw = await client.post_json("/embeddings", {"model": "m", "input": ["café"]}, timeout=5.0)

    assert json.loads(raw) == {"ok": True}
    (seen,) = provider.seen
    assert (seen.method, seen.path) == ("POST", "/v1/embeddings")
    assert seen.headers["Authorization"] == "Bearer sk-local"
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.headers["User-Agent"] == f"OpenAIClient/Python {openai.__version__}"
    assert json.loads(seen.body) == {"model": "m", "input": ["café"]}
    assert make_openai_client(Settings(openai_api_key=None)) is None


async def test_post_json_sends_the_headers_the_sdk_sends(provider: Provider) -> None:
    provider.reply = _json({"data": [{"index": 0, "embedding": [0.5]}], "model": "m", "object": "list"})
    # Made outside the event loop, as the app makes it before the server's loop runs.
    made = await asyncio.to_thread(openai_client, "sk-local", provider.base_url)
    async with made as client:
        await client.embeddings.create(model="m", input=["a"], timeout=5.0)
        await client.post_json("/embeddings", {"model": "m", "input": ["a"]}, timeout=5.0)

    # What differs by request: the SDK's retry count and timeout, and the body's length.
    per_request = {"x-stainless-retry-count", "x-stainless-read-timeout", "content-length"}
    sdk, ours = (
        {k.lower(): v for k, v in s.headers.items() if k.lower() not in per_request} for s in provider.seen
    )
    assert ours == sdk
    assert sdk["x-stainless-async"] == "async:asyncio"


async def test_an_error_status_is_the_sdk_error_with_the_server_message(
    provider: Provider, client: OpenAIClient
) -> None:
    provider.reply = _json({"error": {"message": "slow down", "type": "rate_limit"}}, status=429)
    with pytest.raises(openai.RateLimitError) as caught:
        await client.post_json("/chat/completions", {"model": "m"}, timeout=5.0)

    assert caught.value.status_code == 429
    assert caught.value.body == {"message": "slow down", "type": "rate_limit"}
    assert len(provider.seen) == 1  # no retry


async def test_a_server_that_does_not_answer_in_time_is_a_timeout(
    provider: Provider, client: OpenAIClient
) -> None:
    async def stall(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(5)
        return web.json_response({})

    provider.reply = stall
    with pytest.raises(openai.APITimeoutError):
        await client.post_json("/embeddings", {"model": "m"}, timeout=0.2)


async def _event_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    return response


def _chunk(piece: str, finish: str | None = None) -> bytes:
    """One server-sent event of a streamed answer, as OpenAI sends it."""
    delta = {"content": piece} if piece else {}
    event = {
        "id": "s",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(event)}\n\n".encode()


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


async def test_a_closed_port_is_a_connection_error_not_a_timeout() -> None:
    async with openai_client("sk-local", _closed_port_url()) as client:
        with pytest.raises(openai.APIConnectionError) as caught:
            await client.post_json("/embeddings", {"model": "m"}, timeout=5.0)

    assert not isinstance(caught.value, openai.APITimeoutError)


async def test_a_closed_port_is_a_connection_error_for_the_sdk_own_requests_too() -> None:
    async with openai_client("sk-local", _closed_port_url()) as client:
        with pytest.raises(openai.APIConnectionError) as caught:
            await client.models.list(timeout=5.0)
        with pytest.raises(LLMError) as streamed:
            _ = [piece async for piece in ChatAnswerer(client).stream(HOURS, **ASK)]

    assert not isinstance(caught.value, openai.APITimeoutError)
    assert str(streamed.value) == "the model call failed: APIConnectionError"


async def test_a_stream_the_server_drops_is_a_broken_stream_not_a_timeout(
    provider: Provider, client: OpenAIClient
) -> None:
    async def drop(request: web.Request) -> web.StreamResponse:
        response = await _event_stream(request)
        await response.write(_chunk("Park"))
        assert request.transport is not None
        request.transport.close()
        return response

    provider.reply = drop
    with pytest.raises(LLMError) as caught:
        _ = [piece async for piece in ChatAnswerer(client).stream(HOURS, **ASK)]

    assert str(caught.value) == "the model's stream broke off: ReadError"


async def test_the_query_embedding_and_the_answer_over_the_real_transport(
    provider: Provider, client: OpenAIClient
) -> None:
    vector = [0.6, 0.8, 0.0]

    async def reply(request: web.Request) -> web.StreamResponse:
        if request.path.endswith("/embeddings"):
            encoded = base64.b64encode(array("f", vector).tobytes()).decode()
            return web.json_response({"data": [{"index": 0, "embedding": encoded}], "model": "m"})
        return web.json_response(
            {
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [{"index": 0, "message": {"content": "Nine to five."}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 30, "completion_tokens": 4},
            }
        )

    provider.reply = reply
    embedder = OpenAIEmbedder(client, model="text-embedding-3-small", dimensions=3)
    embedded = await embedder.embed_query("When are you open?", timeout=5.0)
    answer = await ChatAnswerer(client).complete(HOURS, **ASK)

    assert embedded == pytest.approx(vector)
    assert (answer.text, answer.prompt_tokens, answer.completion_tokens) == ("Nine to five.", 30, 4)
    assert [json.loads(s.body) for s in provider.seen] == [
        {
            "model": "text-embedding-3-small",
            "input": ["When are you open?"],
            "encoding_format": "base64",
            "dimensions": 3,
        },
        {
            "model": "gpt-4o-mini",
            "messages": HOURS,
            "temperature": 0.0,
            "max_tokens": 50,
        },
    ]


async def test_a_streamed_answer_through_the_sdk_on_the_same_client(
    provider: Provider, client: OpenAIClient
) -> None:
    async def stream(request: web.Request) -> web.StreamResponse:
        response = await _event_stream(request)
        for piece, finish in (("Parking is ", None), ("free.", None), ("", "stop")):
            await response.write(_chunk(piece, finish))
        await response.write(b"data: [DONE]\n\n")
        return response

    provider.reply = stream
    pieces = [piece async for piece in ChatAnswerer(client).stream(HOURS, **ASK)]

    assert pieces == ["Parking is ", "free."]
    assert json.loads(provider.seen[0].body)["stream"] is True


async def test_a_failed_answer_over_the_real_transport_is_an_llm_error(
    provider: Provider, client: OpenAIClient
) -> None:
    provider.reply = _json({"error": {"message": "down"}}, status=503)
    with pytest.raises(LLMError, match="the model answered HTTP 503"):
        await ChatAnswerer(client).complete(HOURS, **ASK)


async def test_the_proxy_of_the_environment_is_used(
    provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", str(provider.server.make_url("")))
    provider.reply = _json({"ok": True})
    async with openai_client("sk-local", "http://provider.test/v1") as client:
        raw = await client.post_json("/embeddings", {"model": "m"}, timeout=5.0)

    assert json.loads(raw) == {"ok": True}
    (seen,) = provider.seen
    assert (seen.path, seen.headers["Host"]) == ("/v1/embeddings", "provider.test")


async def test_cookies_the_server_sets_are_neither_kept_nor_sent(
    provider: Provider, client: OpenAIClient
) -> None:
    async def set_cookie(request: web.Request) -> web.StreamResponse:
        response = web.json_response({"ok": True})
        response.set_cookie("__cf_bm", "abc", path="/")
        return response

    provider.reply = set_cookie
    await client.post_json("/embeddings", {"model": "m"}, timeout=5.0)
    await client.post_json("/embeddings", {"model": "m"}, timeout=5.0)

    assert [seen.headers.get("Cookie") for seen in provider.seen] == [None, None]
    with pytest.raises(ValueError, match="keeps no cookies"):
        client._client.cookies = {"a": "b"}
