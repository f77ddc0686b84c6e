"""The provider client's CPU per request: what a query_knowledge call pays twice (the question's
embedding, the answer), against the local OpenAI stub in its own process. Run from the
repository root::

    .venv/bin/python -m bench.provider_client
    .venv/bin/python -m bench.provider_client --requests 1000 --rounds 6

Three ways to send the same embedding request, timed in turns so each sees the same machine:

- ``sdk-httpx``: the openai SDK's ``post(cast_to=bytes)`` over its default httpx transport
  (the service's path until app/openai_client.py);
- ``service``: ``OpenAIClient.post_json`` over aiohttp, as the service sends it now;
- ``aiohttp``: aiohttp alone, the floor (no respx could see it, so the service does not use it).

Prints this process's CPU (user + system) per request, per round, with the uvloop loop the
service runs on.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Awaitable, Callable

import aiohttp
import openai
import uvloop

from app.openai_client import openai_client
from bench.harness import Harness

BODY = {
    "model": "text-embedding-3-small",
    "input": ["how much is a cleaning for a new patient"],
    "dimensions": 512,
    "encoding_format": "base64",
}


async def measure(base_url: str, requests: int, rounds: int) -> dict[str, list[float]]:
    sdk = openai.AsyncOpenAI(api_key="sk-bench", base_url=base_url, max_retries=0, timeout=30.0)
    service = openai_client("sk-bench", base_url)
    session = aiohttp.ClientSession()
    raw = json.dumps(BODY).encode()
    headers = {"Authorization": "Bearer sk-bench", "Content-Type": "application/json"}

    async def via_sdk() -> bytes:
        return await sdk.post("/embeddings", body=BODY, cast_to=bytes, options={"timeout": 5.0})

    async def via_service() -> bytes:
        return await service.post_json("/embeddings", BODY, timeout=5.0)

    async def via_aiohttp() -> bytes:
        timeout = aiohttp.ClientTimeout(total=5.0)
        async with session.post(f"{base_url}/embeddings", data=raw, headers=headers, timeout=timeout) as r:
            return await r.read()

    ways: dict[str, Callable[[], Awaitable[bytes]]] = {
        "sdk-httpx": via_sdk,
        "service": via_service,
        "aiohttp": via_aiohttp,
    }
    per_request: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for send in ways.values():  # connections open, code paths warm
            for _ in range(50):
                await send()
        for _ in range(rounds):
            for name, send in ways.items():
                start = time.process_time()
                for _ in range(requests):
                    await send()
                per_request[name].append((time.process_time() - start) / requests * 1000)
    finally:
        await sdk.close()
        await service.close()
        await session.close()
    return per_request


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=500, help="requests per way and round (default 500)")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds (default 4)")
    args = parser.parse_args()

    harness = Harness.create("vk-provider-bench-")
    try:
        stub = harness.start_stub(dims=512)
        results = uvloop.run(measure(stub.base_url, args.requests, args.rounds))
    finally:
        harness.close()
    print(f"client CPU per request (ms), {args.requests} requests x {args.rounds} rounds, alternating:")
    for name, values in results.items():
        rounds = " ".join(f"{v:.3f}" for v in values)
        print(f"  {name:<10} {rounds}   (min {min(values):.3f}, max {max(values):.3f})")


if __name__ == "__main__":
    main()
