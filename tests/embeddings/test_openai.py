"""Tests for the OpenAI embedder; every HTTP call goes to respx."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import respx
import tenacity.wait
import tiktoken

from app.embeddings import EmbeddingError, OpenAIEmbedder
from app.openai_client import OpenAIClient, openai_client
from tests.conftest import openai_client_mocked

BASE_URL = "https://api.openai.test/v1"
ENDPOINT = f"{BASE_URL}/embeddings"


@pytest.fixture
def client() -> OpenAIClient:
    return openai_client("test", BASE_URL)


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router, openai_client_mocked(router):
        yield router


class Sleeps:
    """Stands in for asyncio.sleep between retries and records the waits."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def vector_for(text: str, dimensions: int) -> list[float]:
    """A vector that encodes which input it belongs to: texts are 'doc <n>'."""
    last = text.rsplit(maxsplit=1)[-1]
    n = int(last) if last.isdigit() else 0
    vector = [0.0] * dimensions
    vector[n % dimensions] = 3.0
    vector[(n // dimensions + 1) % dimensions] += 4.0
    return vector


def expected_vector(text: str, dimensions: int) -> list[float]:
    raw = np.array(vector_for(text, dimensions))
    result: list[float] = (raw / np.linalg.norm(raw)).tolist()
    return result


def ok(request: httpx.Request, dimensions: int, *, returned_dimensions: int | None = None) -> httpx.Response:
    """A successful embeddings response in the SDK's default base64 format."""
    body = json.loads(request.content)
    size = returned_dimensions or dimensions
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": base64.b64encode(np.array(vector_for(text, size), dtype="<f4").tobytes()).decode(),
        }
        for i, text in enumerate(body["input"])
    ]
    usage = {"prompt_tokens": 1, "total_tokens": 1}
    return httpx.Response(200, json={"object": "list", "data": data, "model": body["model"], "usage": usage})


def responder(dimensions: int) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: ok(request, dimensions)


def error(status: int, message: str = "boom", headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers, json={"error": {"message": message, "type": "x"}})


def sent(route: respx.Route) -> list[dict[str, Any]]:
    return [json.loads(call.request.content) for call in route.calls]


def inputs(route: respx.Route) -> list[list[str]]:
    """The input texts of every request the route received, in the order they arrived."""
    return [body["input"] for body in sent(route)]


def docs(n: int) -> list[str]:
    return [f"doc {i}" for i in range(n)]


# --- batching -------------------------------------------------------------------------------


async def test_batches_by_input_count_and_keeps_order(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=responder(64))
    embedder = OpenAIEmbedder(client, dimensions=64)
    texts = docs(5000)

    vectors = await embedder.embed_documents(texts)

    # Batches run concurrently, so they may reach the server in any order.
    bodies = sorted(sent(route), key=lambda b: texts.index(b["input"][0]))
    assert [len(b["input"]) for b in bodies] == [2048, 2048, 904]
    assert [t for b in bodies for t in b["input"]] == texts
    assert all(
        b["model"] == "text-embedding-3-small" and b["dimensions"] == 64 and b["encoding_format"] == "base64"
        for b in bodies
    )
    assert vectors == [expected_vector(t, 64) for t in texts]


async def test_batches_by_token_budget(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=responder(8))
    encoding = tiktoken.get_encoding("cl100k_base")
    texts = ["alpha beta gamma 1", "delta 2", "epsilon zeta eta theta iota 3", "kappa 4", "lambda 5"]
    counts = [len(encoding.encode(t)) for t in texts]
    embedder = OpenAIEmbedder(client, dimensions=8, max_batch_tokens=counts[0] + counts[1])

    await embedder.embed_documents(texts)

    assert [b["input"] for b in sent(route)] == [texts[0:2], texts[2:3], texts[3:5]]
    assert embedder.requests_made == 3
    assert embedder.tokens_sent == sum(counts)


async def test_batches_by_custom_input_limit(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=responder(8))
    embedder = OpenAIEmbedder(client, dimensions=8, max_batch_inputs=2)

    await embedder.embed_documents(docs(5))

    assert [b["input"] for b in sent(route)] == [["doc 0", "doc 1"], ["doc 2", "doc 3"], ["doc 4"]]


async def test_order_kept_and_concurrency_bounded(client: OpenAIClient, mock: respx.MockRouter) -> None:
    in_flight = 0
    peak = 0

    async def slow(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        first = int(json.loads(request.content)["input"][0].split()[-1])
        await asyncio.sleep(0.05 - first / 2000)  # earlier batches answer later
        in_flight -= 1
        return ok(request, 16)

    route = mock.post(ENDPOINT).mock(side_effect=slow)
    embedder = OpenAIEmbedder(client, dimensions=16, max_batch_inputs=5, max_concurrency=3)
    texts = docs(50)

    vectors = await embedder.embed_documents(texts)

    assert (peak, vectors) == (3, [expected_vector(t, 16) for t in texts])
    # Every batch of five was sent once (in whatever order they reached the server).
    assert sorted(inputs(route), key=lambda batch: texts.index(batch[0])) == [
        texts[i : i + 5] for i in range(0, 50, 5)
    ]


async def test_empty_list_sends_nothing(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=responder(8))

    assert await OpenAIEmbedder(client, dimensions=8).embed_documents([]) == []
    assert route.call_count == 0


@pytest.mark.parametrize("blank", ["", "   \n"])
async def test_empty_text_is_rejected_before_sending(
    client: OpenAIClient, mock: respx.MockRouter, blank: str
) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=responder(8))

    with pytest.raises(ValueError, match="text 1 is empty"):
        await OpenAIEmbedder(client, dimensions=8).embed_documents(["fine", blank])
    assert route.call_count == 0


async def test_overlong_input_is_truncated_to_8191_tokens(
    client: OpenAIClient, mock: respx.MockRouter
) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=responder(8))
    encoding = tiktoken.get_encoding("cl100k_base")
    long_text = "naïve café " * 6000  # about 18,000 tokens
    embedder = OpenAIEmbedder(client, dimensions=8)

    await embedder.embed_documents([long_text, "doc 1"])

    (body,) = sent(route)
    first, second = body["input"]
    assert (len(encoding.encode(first)), long_text.startswith(first), second) == (8191, True, "doc 1")
    assert embedder.tokens_sent == 8191 + len(encoding.encode("doc 1"))


async def test_vectors_are_renormalised(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=responder(4))

    (vector,) = await OpenAIEmbedder(client, dimensions=4).embed_documents(["doc 0"])

    assert vector == pytest.approx([0.6, 0.8, 0.0, 0.0])
    assert sent(route) == [
        {"model": "text-embedding-3-small", "input": ["doc 0"], "encoding_format": "base64", "dimensions": 4}
    ]


# --- retries --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected_wait"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "120"}, 30.0),
    ],
)
async def test_rate_limit_waits_as_told_then_succeeds(
    client: OpenAIClient, mock: respx.MockRouter, headers: dict[str, str], expected_wait: float
) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=[error(429, "slow down", headers), responder(8)])
    sleeps = Sleeps()
    embedder = OpenAIEmbedder(client, dimensions=8, sleep=sleeps)

    vectors = await embedder.embed_documents(["doc 3"])

    assert (vectors, sleeps.waits, route.call_count) == ([expected_vector("doc 3", 8)], [expected_wait], 2)
    assert inputs(route) == [["doc 3"], ["doc 3"]]  # the retry resends the same batch


async def test_retry_after_http_date_is_honoured(client: OpenAIClient, mock: respx.MockRouter) -> None:
    when = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 10))
    route = mock.post(ENDPOINT).mock(side_effect=[error(503, headers={"retry-after": when}), responder(8)])
    sleeps = Sleeps()

    await OpenAIEmbedder(client, dimensions=8, sleep=sleeps).embed_documents(["doc 1"])

    (wait,) = sleeps.waits
    # The date has a one-second resolution and the clock moves on while the test runs.
    assert 8.0 <= wait <= 10.0
    assert inputs(route) == [["doc 1"], ["doc 1"]]


async def test_server_error_is_retried_with_exponential_backoff(
    client: OpenAIClient, mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Full jitter draws uniformly below a doubling ceiling; pin the draw to the ceiling.
    monkeypatch.setattr(tenacity.wait.random, "uniform", lambda low, high: high)
    route = mock.post(ENDPOINT).mock(side_effect=[error(500), error(502), error(503), responder(8)])
    sleeps = Sleeps()

    vectors = await OpenAIEmbedder(client, dimensions=8, sleep=sleeps).embed_documents(["doc 5"])

    assert (vectors, route.call_count, sleeps.waits) == ([expected_vector("doc 5", 8)], 4, [1.0, 2.0, 4.0])
    assert inputs(route) == [["doc 5"]] * 4


@pytest.mark.parametrize("failure", [httpx.ReadTimeout("slow"), httpx.ConnectError("refused")])
async def test_timeouts_and_connection_errors_are_retried(
    client: OpenAIClient, mock: respx.MockRouter, failure: Exception
) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=[failure, responder(8)])
    sleeps = Sleeps()

    vectors = await OpenAIEmbedder(client, dimensions=8, sleep=sleeps).embed_documents(["doc 2"])

    assert (vectors, route.call_count, len(sleeps.waits)) == ([expected_vector("doc 2", 8)], 2, 1)
    assert inputs(route) == [["doc 2"], ["doc 2"]]


async def test_bad_request_is_not_retried(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=[error(400, "input is invalid"), responder(8)])
    sleeps = Sleeps()

    with pytest.raises(EmbeddingError) as caught:
        await OpenAIEmbedder(client, dimensions=8, sleep=sleeps).embed_documents(["doc 1"])

    assert (str(caught.value), caught.value.retryable, route.call_count, sleeps.waits) == (
        "embedding provider returned HTTP 400: input is invalid",
        False,
        1,
        [],
    )
    assert inputs(route) == [["doc 1"]]


async def test_bad_key_message_says_what_to_check(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(return_value=error(401, "Incorrect API key provided"))

    with pytest.raises(EmbeddingError, match=r"HTTP 401: Incorrect API key provided \(check the API key\)"):
        await OpenAIEmbedder(client, dimensions=8).embed_documents(["doc 1"])
    assert route.calls.last.request.headers["authorization"] == "Bearer test"
    assert inputs(route) == [["doc 1"]]


async def test_server_can_forbid_a_retry(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(return_value=error(503, headers={"x-should-retry": "false"}))

    with pytest.raises(EmbeddingError) as caught:
        await OpenAIEmbedder(client, dimensions=8, sleep=Sleeps()).embed_documents(["doc 1"])

    assert (caught.value.retryable, route.call_count) == (False, 1)
    assert inputs(route) == [["doc 1"]]


async def test_exhausted_retries_raise_retryable_error(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(return_value=error(503, "overloaded"))
    sleeps = Sleeps()
    embedder = OpenAIEmbedder(client, dimensions=8, max_attempts=3, sleep=sleeps)

    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed_documents(["doc 1"])

    assert (str(caught.value), caught.value.retryable, route.call_count, len(sleeps.waits)) == (
        "embedding request failed after 3 attempts: embedding provider returned HTTP 503: overloaded",
        True,
        3,
        2,
    )
    assert embedder.requests_made == 3
    assert inputs(route) == [["doc 1"]] * 3


async def test_failed_batch_cancels_the_others(client: OpenAIClient, mock: respx.MockRouter) -> None:
    # Recorded here: respx records a call only once it has a response, so cancelled ones never.
    arrived: list[str] = []
    waiting: list[str] = []
    cancelled: list[str] = []
    others_in_flight = asyncio.Event()
    never = asyncio.Event()

    async def first_fails(request: httpx.Request) -> httpx.Response:
        (text,) = json.loads(request.content)["input"]
        arrived.append(text)
        if text == "doc 0":
            # Fail only once the three other batches are waiting for their answers, so
            # there is something in flight to cancel.
            await others_in_flight.wait()
            return error(400, "bad")
        waiting.append(text)
        if len(waiting) == 3:
            others_in_flight.set()
        try:
            await never.wait()  # these answers never come: only cancellation ends the wait
        except asyncio.CancelledError:
            cancelled.append(text)
            raise
        return ok(request, 8)

    mock.post(ENDPOINT).mock(side_effect=first_fails)
    embedder = OpenAIEmbedder(client, dimensions=8, max_batch_inputs=1, max_concurrency=4)

    with pytest.raises(EmbeddingError, match="HTTP 400: bad"):
        # Only a guard against hanging the run if cancelling breaks, not a speed check.
        await asyncio.wait_for(embedder.embed_documents(docs(4)), timeout=60)
    assert sorted(arrived) == ["doc 0", "doc 1", "doc 2", "doc 3"]
    assert sorted(cancelled) == ["doc 1", "doc 2", "doc 3"]


# --- response validation --------------------------------------------------------------------


async def test_wrong_dimensions_are_rejected(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=lambda request: ok(request, 64, returned_dimensions=32))

    with pytest.raises(EmbeddingError) as caught:
        await OpenAIEmbedder(client, dimensions=64).embed_documents(["doc 1"])

    assert (str(caught.value), caught.value.retryable) == (
        "provider returned vectors of 32 dimensions, expected 64",
        False,
    )
    assert [(body["input"], body["dimensions"]) for body in sent(route)] == [(["doc 1"], 64)]


async def test_missing_vectors_are_rejected(client: OpenAIClient, mock: respx.MockRouter) -> None:
    def drop_last(request: httpx.Request) -> httpx.Response:
        body = json.loads(ok(request, 8).content)
        body["data"] = body["data"][:-1]
        return httpx.Response(200, json=body)

    route = mock.post(ENDPOINT).mock(side_effect=drop_last)

    with pytest.raises(EmbeddingError, match="provider returned 2 vectors for 3 inputs"):
        await OpenAIEmbedder(client, dimensions=8).embed_documents(docs(3))
    assert inputs(route) == [docs(3)]


# --- model and dimensions -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "dimensions", "expected_body", "expected_key"),
    [
        ("text-embedding-3-small", None, 1536, "openai:text-embedding-3-small:1536"),
        ("text-embedding-3-large", 1024, 1024, "openai:text-embedding-3-large:1024"),
        ("text-embedding-ada-002", None, None, "openai:text-embedding-ada-002:1536"),
        ("my-compatible-model", 384, None, "openai:my-compatible-model:384"),
    ],
)
async def test_dimensions_parameter_only_for_v3_models(
    client: OpenAIClient,
    mock: respx.MockRouter,
    model: str,
    dimensions: int | None,
    expected_body: int | None,
    expected_key: str,
) -> None:
    size = dimensions or 1536
    route = mock.post(ENDPOINT).mock(side_effect=responder(size))
    embedder = OpenAIEmbedder(client, model=model, dimensions=dimensions)

    await embedder.embed_documents(["doc 1"])

    (body,) = sent(route)
    assert (body["model"], body.get("dimensions"), embedder.model_key, embedder.dimensions) == (
        model,
        expected_body,
        expected_key,
        size,
    )


@pytest.mark.parametrize(
    ("model", "dimensions", "message"),
    [
        ("text-embedding-3-large", None, "returns 3072 dimensions, more than the vector index supports"),
        ("text-embedding-3-small", 2001, "dimensions must be between 1 and 2000"),
        ("text-embedding-3-small", 3000, "dimensions must be between 1 and 2000"),
        ("text-embedding-ada-002", 512, "always returns 1536 dimensions"),
        ("unknown-model", None, "unknown native size"),
    ],
)
def test_invalid_model_dimensions_are_rejected(
    client: OpenAIClient, model: str, dimensions: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        OpenAIEmbedder(client, model=model, dimensions=dimensions)


# --- query path -----------------------------------------------------------------------------


async def test_query_is_one_request_with_one_input(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=responder(8))
    embedder = OpenAIEmbedder(client, dimensions=8)

    vector = await embedder.embed_query("doc 7", timeout=1.0)

    (body,) = sent(route)
    assert (body["input"], body["dimensions"], vector) == (["doc 7"], 8, expected_vector("doc 7", 8))


async def test_query_is_not_retried(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=[error(500), responder(8)])

    with pytest.raises(EmbeddingError) as caught:
        await OpenAIEmbedder(client, dimensions=8, sleep=Sleeps()).embed_query("doc 1", timeout=1.0)

    assert (caught.value.retryable, route.call_count) == (True, 1)
    assert inputs(route) == [["doc 1"]]


async def test_query_http_timeout_becomes_embedding_error(
    client: OpenAIClient, mock: respx.MockRouter
) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=httpx.ReadTimeout("slow"))

    with pytest.raises(EmbeddingError) as caught:
        await OpenAIEmbedder(client, dimensions=8).embed_query("doc 1", timeout=0.5)

    assert (str(caught.value), caught.value.retryable, route.call_count) == (
        "embedding request timed out",
        True,
        1,
    )
    assert inputs(route) == [["doc 1"]]


async def test_query_deadline_bounds_a_slow_response(client: OpenAIClient, mock: respx.MockRouter) -> None:
    # Recorded here: respx records a call only once it has a response, so a cancelled one never.
    arrived: list[dict[str, Any]] = []
    cancelled: list[dict[str, Any]] = []
    never = asyncio.Event()

    async def stall(request: httpx.Request) -> httpx.Response:
        arrived.append(json.loads(request.content))
        try:
            await never.wait()  # the answer never comes: only the deadline ends the wait
        except asyncio.CancelledError:
            cancelled.append(json.loads(request.content))
            raise
        return ok(request, 8)

    mock.post(ENDPOINT).mock(side_effect=stall)

    with pytest.raises(EmbeddingError, match=r"query embedding timed out after 0\.1s"):
        # Only a guard against hanging the run if the deadline is broken, not a speed check.
        await asyncio.wait_for(
            OpenAIEmbedder(client, dimensions=8).embed_query("doc 1", timeout=0.1), timeout=60
        )
    assert [body["input"] for body in arrived] == [["doc 1"]]
    assert cancelled == arrived


async def test_query_timeout_is_sent_to_the_http_client(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=responder(8))

    await OpenAIEmbedder(client, dimensions=8, request_timeout=30.0).embed_query("doc 1", timeout=0.75)

    assert inputs(route) == [["doc 1"]]
    assert route.calls.last.request.extensions["timeout"] == {
        "connect": 0.75,
        "read": 0.75,
        "write": 0.75,
        "pool": 0.75,
    }


async def test_documents_use_the_request_timeout(client: OpenAIClient, mock: respx.MockRouter) -> None:
    route = mock.post(ENDPOINT).mock(side_effect=responder(8))

    await OpenAIEmbedder(client, dimensions=8, request_timeout=12.0).embed_documents(["doc 1"])

    assert inputs(route) == [["doc 1"]]
    assert route.calls.last.request.extensions["timeout"]["read"] == 12.0


async def test_vectors_sent_as_float_lists_are_accepted(client: OpenAIClient, mock: respx.MockRouter) -> None:
    """Some OpenAI-compatible servers ignore encoding_format and answer with numbers."""

    def floats(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["input"]
        data = [{"index": i, "embedding": vector_for(t, 8)} for i, t in enumerate(texts)]
        return httpx.Response(200, json={"data": data, "model": "m", "usage": {}})

    route = mock.post(ENDPOINT).mock(side_effect=floats)

    vectors = await OpenAIEmbedder(client, dimensions=8).embed_documents(["doc 1", "doc 2"])

    assert [(body["input"], body["encoding_format"]) for body in sent(route)] == [
        (["doc 1", "doc 2"], "base64")
    ]
    assert vectors == [expected_vector("doc 1", 8), expected_vector("doc 2", 8)]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"<html>gateway</html>", "JSONDecodeError"),
        (b'{"object": "list"}', "KeyError"),
        (b'{"data": [{"index": 0, "embedding": "not*base64"}]}', "invalid base64"),
        (b'{"data": [{"index": 0, "embedding": ["x", "y"]}]}', "TypeError"),
        (b'{"data": [{"index": 0, "embedding": "AAA="}]}', "ValueError"),
        (b'{"data": [{"index": 0, "embedding": [1' + b"0" * 400 + b"]}]}", "OverflowError"),
        (b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "RecursionError"),
        (b'{"data": [{"index": "0", "embedding": "AAAAAA=="}]}', "TypeError"),
        (b'{"data": [{"index": false, "embedding": "AAAAAA=="}]}', "TypeError"),
    ],
    ids=[
        "html",
        "no-data",
        "bad-base64",
        "strings",
        "partial-float",
        "huge-number",
        "deep",
        "index-str",
        "index-bool",
    ],
)
async def test_malformed_replies_are_invalid_not_retried(
    client: OpenAIClient, mock: respx.MockRouter, content: bytes, reason: str
) -> None:
    route = mock.post(ENDPOINT).mock(return_value=httpx.Response(200, content=content))

    with pytest.raises(EmbeddingError) as caught:
        await OpenAIEmbedder(client, dimensions=8).embed_query("hello", timeout=1.0)

    assert str(caught.value) == f"embedding provider sent an invalid response: {reason}"
    assert caught.value.retryable is False
    assert route.call_count == 1
    assert sent(route)[0]["input"] == ["hello"]


async def test_one_vector_for_different_texts_is_rejected(
    client: OpenAIClient, mock: respx.MockRouter
) -> None:
    def same_vector(request: httpx.Request) -> httpx.Response:
        body = json.loads(ok(request, 8).content)
        for item in body["data"]:
            item["embedding"] = body["data"][0]["embedding"]
        return httpx.Response(200, json=body)

    route = mock.post(ENDPOINT).mock(side_effect=same_vector)
    embedder = OpenAIEmbedder(client, dimensions=8)

    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed_documents(docs(3))
    assert (str(caught.value), caught.value.retryable) == (
        "provider returned the same vector for 3 different texts: it is not embedding them",
        False,
    )
    # The same text twice has one vector, rightly.
    assert await embedder.embed_documents(["doc 5", "doc 5"]) == [expected_vector("doc 5", 8)] * 2
    assert inputs(route) == [docs(3), ["doc 5", "doc 5"]]
