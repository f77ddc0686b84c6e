"""A local OpenAI-compatible stub server for benchmarks: embeddings and chat completions with a
configurable latency, deterministic answers and request counters.

No machine here reaches OpenAI, and a benchmark that measured the real API would measure the
network anyway. The stub answers like the real endpoints closely enough for ``openai.AsyncOpenAI``
to parse (including the base64 encoding the SDK asks for by default), after a fixed delay spent
in ``asyncio.sleep`` so concurrent requests overlap as they would against a real provider.

Run it on its own::

    .venv/bin/python -m bench.openai_stub --port 8900 --embed-delay-ms 100
    .venv/bin/python -m bench.openai_stub --self-test

or from another script, either in a thread of the calling process (simple; shares its GIL)::

    from bench.openai_stub import start_stub_in_thread
    stub = start_stub_in_thread(port=0, embed_delay_ms=100)   # port 0 = pick a free one
    ... OPENAI_BASE_URL = stub.base_url ...
    stub.stop()

or as a separate process (what the benchmarks do, so that encoding thousands of vectors
does not compete with the benchmark's own client for one interpreter)::

    from bench.openai_stub import start_stub_process
    stub = start_stub_process(port=0, embed_delay_ms=100)
    stub.stats(); stub.reset_stats(); stub.stop()

Endpoints: ``POST /v1/embeddings``, ``POST /v1/chat/completions``, ``GET /stats``,
``POST /stats/reset``, ``GET /health``. With ``stream: true`` a chat completion is sent as
server-sent chunks, one word each, paced so that the whole answer takes the chat delay (the
first word arrives after delay / words), as a model writes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import uvicorn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DEFAULT_ANSWER = "The stub model says: this answer is fixed and comes from the local benchmark stub."
HOST = "127.0.0.1"
MAX_BODY_BYTES = 64 * 1024 * 1024  # a full 2,048-input batch of long texts stays well below this


def unit_vector(text: str, dimensions: int) -> np.ndarray:
    """A deterministic unit vector for ``text``: equal texts get equal vectors, others look random.

    Seeding a generator from a hash spreads vectors over the sphere, so cosine similarities between
    different texts are near zero, as with unrelated texts in a real model.
    """
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest())
    vector = np.random.default_rng(seed).standard_normal(dimensions, dtype=np.float32)
    return vector / np.linalg.norm(vector)


_LAST_QUESTION = re.compile(r"Last question: (.+)")
_USER_TURN = re.compile(r'<turn role="user">([^<]+)</turn>')


def rewrite_reply(prompt: str) -> str | None:
    """A follow-up's standalone rewrite (prompts/default/rewrite.user.md) as a model would give
    it: the question with the caller's previous words added, so each rewrite is distinct and
    searched as such (the fixed answer would make every follow-up the same cached question)."""
    question = _LAST_QUESTION.search(prompt)
    turns = _USER_TURN.findall(prompt)
    if question is None or not turns:
        return None
    return f"{question.group(1).strip().rstrip('?')} ({turns[-1].strip().rstrip('?')})?"


def approx_tokens(text: str) -> int:
    # About four characters per token for English; exact counts would need tiktoken, and nothing
    # measured here depends on them.
    return max(1, len(text) // 4)


def _inputs(raw: Any) -> list[str]:
    """The request's ``input`` as strings: a string, strings, token ids or lists of token ids."""
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw and all(isinstance(x, int) for x in raw):
        return [json.dumps(raw)]  # one input given as token ids
    if isinstance(raw, list) and raw:
        return [x if isinstance(x, str) else json.dumps(x) for x in raw]
    raise ValueError("'input' must be a non-empty string or array")


@dataclass
class Stats:
    embedding_requests: int = 0
    embedding_inputs: int = 0
    embedding_tokens: int = 0
    embedding_max_batch: int = 0
    embedding_in_flight: int = 0
    embedding_max_in_flight: int = 0
    chat_requests: int = 0
    chat_in_flight: int = 0
    chat_max_in_flight: int = 0
    errors: int = 0
    started_at: float = field(default_factory=time.time)

    def snapshot(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["embedding_inputs_per_request"] = (
            round(self.embedding_inputs / self.embedding_requests, 2) if self.embedding_requests else 0.0
        )
        return data


class StubApp:
    """A raw ASGI app: the stub should cost as little CPU per request as possible, so that the
    benchmark measures the service, not the stub's framework."""

    def __init__(
        self,
        *,
        embed_delay_ms: float = 0.0,
        chat_delay_ms: float = 0.0,
        dimensions: int = 1536,
        chat_answer: str = DEFAULT_ANSWER,
    ) -> None:
        self.embed_delay_s = embed_delay_ms / 1000.0
        self.chat_delay_s = chat_delay_ms / 1000.0
        self.dimensions = dimensions
        self.chat_answer = chat_answer
        self.stats = Stats()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"].rstrip("/")
        try:
            if method == "POST" and path == "/v1/embeddings":
                status, body = await self._embeddings(await _read_json(receive))
            elif method == "POST" and path == "/v1/chat/completions":
                payload = await _read_json(receive)
                if isinstance(payload, dict) and payload.get("stream"):
                    await self._chat_stream(payload, send)
                    return
                status, body = await self._chat(payload)
            elif method == "GET" and path == "/stats":
                status, body = 200, self.stats.snapshot()
            elif method == "POST" and path == "/stats/reset":
                self.stats = Stats()
                status, body = 200, self.stats.snapshot()
            elif method == "GET" and path == "/health":
                status, body = 200, {"ok": True}
            else:
                status, body = 404, _error(f"no route for {method} {scope['path']}", "not_found")
        except ValueError as exc:
            self.stats.errors += 1
            status, body = 400, _error(str(exc), "invalid_request_error")
        await _send_json(send, status, body)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _embeddings(self, payload: Any) -> tuple[int, dict[str, Any]]:
        if not isinstance(payload, dict):
            raise ValueError("the body must be a JSON object")
        texts = _inputs(payload.get("input"))
        if len(texts) > 2048:
            raise ValueError("at most 2048 inputs per request")  # the real API's limit
        dimensions = payload.get("dimensions") or self.dimensions
        if not isinstance(dimensions, int) or not 1 <= dimensions <= 3072:
            raise ValueError("'dimensions' must be an integer between 1 and 3072")
        encoding = payload.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise ValueError("'encoding_format' must be 'float' or 'base64'")
        stats = self.stats
        stats.embedding_requests += 1
        stats.embedding_inputs += len(texts)
        stats.embedding_max_batch = max(stats.embedding_max_batch, len(texts))
        stats.embedding_in_flight += 1
        stats.embedding_max_in_flight = max(stats.embedding_max_in_flight, stats.embedding_in_flight)
        try:
            if self.embed_delay_s:
                await asyncio.sleep(self.embed_delay_s)
        finally:
            stats.embedding_in_flight -= 1
        tokens = sum(approx_tokens(t) for t in texts)
        stats.embedding_tokens += tokens
        data = []
        for index, text in enumerate(texts):
            vector = unit_vector(text, dimensions)
            # The SDK asks for base64 (little-endian float32) unless told otherwise: far smaller
            # and faster to parse than JSON floats.
            value: Any = (
                base64.b64encode(vector.astype("<f4").tobytes()).decode()
                if encoding == "base64"
                else vector.tolist()
            )
            data.append({"object": "embedding", "index": index, "embedding": value})
        return 200, {
            "object": "list",
            "data": data,
            "model": payload.get("model", "stub-embedding"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    async def _chat(self, payload: Any) -> tuple[int, dict[str, Any]]:
        if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
            raise ValueError("'messages' must be an array")
        stats = self.stats
        stats.chat_requests += 1
        stats.chat_in_flight += 1
        stats.chat_max_in_flight = max(stats.chat_max_in_flight, stats.chat_in_flight)
        try:
            if self.chat_delay_s:
                await asyncio.sleep(self.chat_delay_s)
        finally:
            stats.chat_in_flight -= 1
        prompt = "".join(
            m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
            for m in payload["messages"]
            if isinstance(m, dict)
        )
        answer = rewrite_reply(prompt) or self.chat_answer
        prompt_tokens, completion_tokens = approx_tokens(prompt), approx_tokens(answer)
        return 200, {
            "id": f"chatcmpl-stub-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": payload.get("model", "stub-chat"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            "system_fingerprint": "fp_stub",
        }

    async def _chat_stream(self, payload: dict[str, Any], send: Send) -> None:
        if not isinstance(payload.get("messages"), list):
            await _send_json(send, 400, _error("'messages' must be an array", "invalid_request_error"))
            return
        stats = self.stats
        stats.chat_requests += 1
        stats.chat_in_flight += 1
        stats.chat_max_in_flight = max(stats.chat_max_in_flight, stats.chat_in_flight)
        words = re.findall(r"\S+\s*", self.chat_answer) or [""]
        pace = self.chat_delay_s / len(words)
        base = {
            "id": f"chatcmpl-stub-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": payload.get("model", "stub-chat"),
            "system_fingerprint": "fp_stub",
        }
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        try:
            for index, word in enumerate(words):
                if pace:
                    await asyncio.sleep(pace)
                delta = {"role": "assistant", "content": word} if index == 0 else {"content": word}
                choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
                await _send_event(send, {**base, "choices": [choice]})
            last = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
            await _send_event(send, {**base, "choices": [last]})
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        finally:
            stats.chat_in_flight -= 1


async def _send_event(send: Send, body: dict[str, Any]) -> None:
    raw = json.dumps(body, separators=(",", ":"))
    await send({"type": "http.response.body", "body": f"data: {raw}\n\n".encode(), "more_body": True})


def _error(message: str, kind: str) -> dict[str, Any]:
    # The shape OpenAI uses, so the SDK's APIStatusError carries the message.
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


async def _read_json(receive: Receive) -> Any:
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ValueError("client disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ValueError("request body too large")
        parts.append(chunk)
        if not message.get("more_body"):
            break
    try:
        return json.loads(b"".join(parts) or b"null")
    except json.JSONDecodeError as exc:
        raise ValueError(f"the body is not JSON: {exc}") from exc


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    raw = json.dumps(body, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": raw})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _get_stats(base: str) -> dict[str, Any]:
    response = httpx.get(f"{base}/stats", timeout=5.0)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


class StubThread:
    """The stub served by uvicorn on its own event loop in a daemon thread of this process."""

    def __init__(self, app: StubApp, port: int) -> None:
        self.app = app
        self.port = port
        self.root = f"http://{HOST}:{port}"
        self.base_url = f"{self.root}/v1"
        self._server = uvicorn.Server(
            uvicorn.Config(app, host=HOST, port=port, log_level="warning", access_log=False, lifespan="on")
        )
        # uvicorn installs signal handlers only in the main thread; this one must leave Ctrl-C
        # to the caller.
        self._server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self._server.run, name=f"openai-stub-{port}", daemon=True)

    def start(self, timeout_s: float = 10.0) -> StubThread:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the OpenAI stub did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def stats(self) -> dict[str, Any]:
        return self.app.stats.snapshot()

    def reset_stats(self) -> None:
        self.app.stats = Stats()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout_s)


def start_stub_in_thread(
    port: int = 0,
    embed_delay_ms: float = 0.0,
    chat_delay_ms: float = 0.0,
    *,
    dimensions: int = 1536,
    chat_answer: str = DEFAULT_ANSWER,
) -> StubThread:
    """Start the stub in a background thread; ``port=0`` picks a free port (see ``.port``)."""
    app = StubApp(
        embed_delay_ms=embed_delay_ms,
        chat_delay_ms=chat_delay_ms,
        dimensions=dimensions,
        chat_answer=chat_answer,
    )
    return StubThread(app, port or free_port()).start()


class StubProcess:
    """The stub running as a child process (``python -m bench.openai_stub ...``)."""

    def __init__(self, process: subprocess.Popen[bytes], port: int) -> None:
        self.process = process
        self.port = port
        self.root = f"http://{HOST}:{port}"
        self.base_url = f"{self.root}/v1"

    def wait_ready(self, timeout_s: float = 15.0) -> StubProcess:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the OpenAI stub exited with status {self.process.returncode}")
            try:
                if httpx.get(f"{self.root}/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the OpenAI stub did not answer on port {self.port} within {timeout_s:g}s")

    def stats(self) -> dict[str, Any]:
        return _get_stats(self.root)

    def reset_stats(self) -> None:
        httpx.post(f"{self.root}/stats/reset", timeout=5.0).raise_for_status()

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)


def start_stub_process(
    port: int = 0,
    embed_delay_ms: float = 0.0,
    chat_delay_ms: float = 0.0,
    *,
    dimensions: int = 1536,
    chat_answer: str = DEFAULT_ANSWER,
) -> StubProcess:
    """Start the stub as a child process and wait until it answers; ``port=0`` picks a free port."""
    port = port or free_port()
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--port",
        str(port),
        "--embed-delay-ms",
        str(embed_delay_ms),
        "--chat-delay-ms",
        str(chat_delay_ms),
        "--dimensions",
        str(dimensions),
        "--chat-answer",
        chat_answer,
    ]
    # Its own session: a Ctrl-C in the terminal reaches the benchmark, which stops the stub in
    # order, instead of killing the stub while the service still talks to it.
    process = subprocess.Popen(command, start_new_session=True)
    return StubProcess(process, port).wait_ready()


def _check(condition: bool, what: object) -> None:
    # Not `assert`: the self-test must also check under `python -O`.
    if not condition:
        raise AssertionError(f"self-test failed: {what}")


async def _self_test() -> None:
    """Check that the real SDK parses both endpoints and that delays overlap."""
    import openai  # noqa: PLC0415 - only the self-test needs the SDK

    delay_ms = 200.0
    stub = start_stub_in_thread(0, embed_delay_ms=delay_ms, chat_delay_ms=delay_ms, dimensions=64)
    client = openai.AsyncOpenAI(base_url=stub.base_url, api_key="x", max_retries=0, timeout=10.0)
    try:
        texts = ["alpha", "beta", "gamma", "alpha"]
        # Default request: the SDK asks for base64 and decodes it itself.
        response = await client.embeddings.create(model="text-embedding-3-small", input=texts, dimensions=256)
        vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
        _check([item.index for item in response.data] == [0, 1, 2, 3], "indexes in input order")
        _check(all(len(v) == 256 for v in vectors), "dimensions from the request")
        _check(all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-5 for v in vectors), "unit vectors")
        _check(vectors[0] == vectors[3] and vectors[0] != vectors[1], "deterministic per text")
        _check(response.usage.prompt_tokens == sum(approx_tokens(t) for t in texts), "usage counts")
        as_floats = await client.embeddings.create(
            model="text-embedding-3-small", input="alpha", dimensions=256, encoding_format="float"
        )
        _check(np.allclose(as_floats.data[0].embedding, vectors[0], atol=1e-6), "float and base64 agree")
        fallback = await client.embeddings.create(model="text-embedding-3-small", input="alpha")
        _check(len(fallback.data[0].embedding) == 64, "dimensions from the flag when not requested")

        chat = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello?"}], max_tokens=50
        )
        _check(chat.choices[0].message.content == DEFAULT_ANSWER, "the fixed answer")
        _check(chat.choices[0].finish_reason == "stop", "finish reason")
        _check(chat.usage is not None, "chat usage")

        started = time.perf_counter()
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}], stream=True
        )
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        streamed_ms = (time.perf_counter() - started) * 1000
        _check("".join(pieces) == DEFAULT_ANSWER, "the streamed words make the fixed answer")
        _check(len(pieces) == len(DEFAULT_ANSWER.split()) + 1, "one chunk a word, then the stop")
        _check(delay_ms <= streamed_ms < 3 * delay_ms, f"the stream took {streamed_ms:.0f} ms")

        # Ten requests at once must take about one delay, not ten: the sleep is asynchronous.
        started = time.perf_counter()
        await asyncio.gather(
            *(client.embeddings.create(model="text-embedding-3-small", input=f"text {i}") for i in range(10))
        )
        elapsed_ms = (time.perf_counter() - started) * 1000
        _check(elapsed_ms < 3 * delay_ms, f"10 concurrent requests took {elapsed_ms:.0f} ms")

        stats = stub.stats()
        _check(stats["embedding_requests"] == 13 and stats["embedding_inputs"] == 16, stats)
        _check(stats["chat_requests"] == 2 and stats["embedding_max_in_flight"] >= 5, stats)
        print(
            f"self-test passed: 10 concurrent embedding calls ({delay_ms:g} ms each) in {elapsed_ms:.0f} ms"
        )
        print(f"stats: {json.dumps(stats)}")
    finally:
        await client.close()
        stub.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument("--embed-delay-ms", type=float, default=0.0)
    parser.add_argument("--chat-delay-ms", type=float, default=0.0)
    parser.add_argument("--dimensions", type=int, default=1536, help="used when a request names none")
    parser.add_argument("--chat-answer", default=DEFAULT_ANSWER)
    parser.add_argument(
        "--self-test", action="store_true", help="check the stub with the openai SDK, then exit"
    )
    args = parser.parse_args()
    if args.self_test:
        asyncio.run(_self_test())
        return
    app = StubApp(
        embed_delay_ms=args.embed_delay_ms,
        chat_delay_ms=args.chat_delay_ms,
        dimensions=args.dimensions,
        chat_answer=args.chat_answer,
    )
    print(f"OpenAI stub on http://{HOST}:{args.port}/v1 (pid {os.getpid()})", flush=True)
    uvicorn.run(app, host=HOST, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
