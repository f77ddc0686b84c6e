"""Does one organisation's burst of calls take the service from another organisation? A burst of
``--calls`` query_knowledge calls at once from one organisation, and meanwhile ``--other``
calls, one after another, from a second, on one ``vk serve`` (offline default, rate limits
off), with the cap on an organisation's calls in progress (``LIMITS__QUERY_IN_FLIGHT``) off and
on, alternating, the service restarted for each round. With ``--stub-ms`` the calls
embed and answer through the OpenAI stub, and wait for its replies as they would for a
provider.

Run from the repository root::

    .venv/bin/python -m bench.burst --rounds 2 --json /tmp/burst.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx

from bench.harness import (
    BenchError,
    Harness,
    create_query_key,
    offline_env,
    service_env,
    terminate_on_sigterm,
)
from bench.metering import machine_info
from bench.report import now_iso, percentiles

FAQ = """# Opening hours

We are open Monday to Friday from nine to five, and on Saturdays from ten to one.

# Parking

Visitors park behind the building, on level two of the car park.
"""


def environment(harness: Harness, args: argparse.Namespace, cap: int = 0, workers: int = 0) -> dict[str, str]:
    """The offline default, or the OpenAI provider through the stub (``--stub-ms``)."""
    if args.stub_ms is None:
        env = offline_env(harness.pgdir, workers=workers)
    else:
        assert harness.stub is not None
        env = service_env(harness.pgdir, harness.stub.base_url, dims=512, workers=workers)
    env["LIMITS__QUERY_IN_FLIGHT"] = str(cap)
    return env


def set_up(harness: Harness, args: argparse.Namespace) -> list[tuple[str, str]]:
    """Two organisations, each with a KB, its FAQ ready and an agent: (query key, agent) each."""
    if args.stub_ms is not None:
        harness.start_stub(embed_delay_ms=args.stub_ms, chat_delay_ms=args.stub_ms, dims=512)
    env = environment(harness, args, workers=1)
    callers = []
    for name in ("burst", "other"):
        admin_key = harness.create_org(env, name)
        callers.append(admin_key)
    base, _ = harness.start_service(env)
    made = []
    for admin_key in callers:
        headers = {"Authorization": f"Bearer {admin_key}"}
        with httpx.Client(base_url=base, timeout=60.0, trust_env=False, headers=headers) as http:
            kb = http.post("/api/knowledge", json={"title": "FAQ"}).json()["id"]
            doc = http.post(f"/api/knowledge/{kb}/documents", json={"title": "FAQ", "content": FAQ}).json()
            agent = str(uuid.uuid4())
            http.put(f"/api/knowledge/{kb}/agents", json={"agent_ids": [agent]})
            deadline = time.monotonic() + 120
            while http.get(f"/api/knowledge/{kb}/documents/{doc['id']}").json()["status"] != "ready":
                if time.monotonic() > deadline:
                    raise BenchError("the FAQ was not ready within 120 s")
                time.sleep(0.2)
        made.append((asyncio.run(create_query_key(base, admin_key)), agent))
    harness.stop_service()
    return made


async def burst(
    base: str, callers: list[tuple[str, str]], args: argparse.Namespace, index: int
) -> dict[str, Any]:
    # Without keep-alive, each call comes on a connection of its own, as from separate runtimes.
    keep = 0 if args.no_keep_alive else args.calls + 10
    limits = httpx.Limits(max_connections=args.calls + 10, max_keepalive_connections=keep)
    async with httpx.AsyncClient(base_url=base, timeout=120.0, trust_env=False, limits=limits) as http:

        async def ask(caller: tuple[str, str], question: str) -> tuple[int | str, float]:
            key, agent = caller
            started = time.perf_counter()
            try:
                response = await http.post(
                    f"/api/agents/{agent}/query_knowledge",
                    json={"query": question},
                    headers={"Authorization": f"Bearer {key}"},
                )
            except httpx.TransportError as exc:  # counted by kind: a connection reset, refused
                return type(exc).__name__, (time.perf_counter() - started) * 1000
            return response.status_code, (time.perf_counter() - started) * 1000

        # The model loaded, connections pooled; with --cold the burst's key is not yet known
        # to the service process, as after a restart or for a new key.
        for caller in callers[1:] if args.cold else callers:
            await ask(caller, "When are you open?")
        # Numbers in the questions keep them out of each other's answer caches.
        flood = [
            asyncio.create_task(ask(callers[0], f"Are you open at {i} minutes past {index}?"))
            for i in range(args.calls)
        ]
        await asyncio.sleep(0.05)
        other = [
            await ask(callers[1], f"Where do I park on visit {i} of {index}?") for i in range(args.other)
        ]
        flooded = await asyncio.gather(*flood)
    answered = [ms for status, ms in flooded if status == 200]
    return {
        "burst_statuses": dict(Counter(str(status) for status, _ in flooded)),
        "burst_answered_ms": percentiles(answered),
        "other_statuses": dict(Counter(str(status) for status, _ in other)),
        "other_ms": [round(ms, 1) for _, ms in other],
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500, help="calls at once from one organisation")
    parser.add_argument("--other", type=int, default=5, help="calls from the other organisation, one by one")
    parser.add_argument("--caps", default="0,64", help="LIMITS__QUERY_IN_FLIGHT per round, in turn")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each cap")
    parser.add_argument(
        "--stub-ms",
        type=float,
        help="embed and answer through the OpenAI stub, its replies this late (default: offline)",
    )
    parser.add_argument(
        "--no-keep-alive", action="store_true", help="a new connection for each call, none kept open"
    )
    parser.add_argument("--cold", action="store_true", help="no call with the burst's key before the burst")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--keep-tmp", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    terminate_on_sigterm()
    harness = Harness.create("vk-burst-", keep_tmp=args.keep_tmp)
    caps = [int(cap) for cap in args.caps.split(",")]
    rounds: list[dict[str, Any]] = []
    started = now_iso()
    try:
        callers = set_up(harness, args)
        for index in range(args.rounds * len(caps)):
            cap = caps[index % len(caps)]
            base, _ = harness.start_service(environment(harness, args, cap))
            result = {"cap": cap, **asyncio.run(burst(base, callers, args, index))}
            harness.stop_service()
            rounds.append(result)
            print(
                f"cap {cap:>4}: burst {result['burst_statuses']}, answered p50 "
                f"{result['burst_answered_ms']['p50']} ms; other organisation {result['other_statuses']} "
                f"{result['other_ms']} ms",
                flush=True,
            )
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        harness.close()
    if args.json:
        report = {"started": started, "machine": machine_info(), "args": vars(args), "rounds": rounds}
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
