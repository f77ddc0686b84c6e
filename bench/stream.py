"""Early speech: how soon a caller hears the answer with query_knowledge/stream, against the
plain JSON form, when the answering model is slow.

What it does, in order:

1. starts the OpenAI-compatible stub (``bench.openai_stub``) in its own process with
   ``--embed-ms`` per embedding and ``--chat-ms`` per chat answer, the answer a three-sentence
   ``ANSWER``; streamed, its words are paced so that the whole answer takes ``--chat-ms``;
2. ``vk create-org`` on a fresh embedded PostgreSQL, seeded by SQL (``bench.seed``, a small
   set: ``--kbs`` knowledge bases of ``--chunks-per-kb`` chunks), then ``vk serve`` and a
   ``query`` key;
3. asks ``--calls`` distinct questions one at a time (no cache hit), alternating the JSON
   form and the stream, and times for each: the JSON reply; the stream's first ``holding``,
   first ``sentence`` and ``done`` events, from the moment the request was sent;
4. prints p50/p95 of each and the share of calls that took the model's path, then stops
   everything, also after a failure, Ctrl-C or SIGTERM.

Run from the repository root::

    .venv/bin/python -m bench.stream
    .venv/bin/python -m bench.stream --calls 100 --json /tmp/stream.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.harness import (
    Harness,
    add_service_env_argument,
    create_query_key,
    reported_failure,
    terminate_on_sigterm,
)
from bench.metering import loadavg, machine_info, speed_probe
from bench.report import finish_report, now_iso, percentiles
from bench.seed import QuestionMaker, SeedConfig, seeded_service

# The stub model's answer: three sentences, 35 words, so the first is ready well before the last.
ANSWER = (
    "You can return any item within thirty days of delivery. Refunds go back to the original "
    "payment method within five working days. Items bought on sale can be exchanged, but "
    "they cannot be refunded."
)


async def _json_call(client: httpx.AsyncClient, agent: str, question: str) -> dict[str, Any]:
    started = time.perf_counter()
    response = await client.post(f"/api/agents/{agent}/query_knowledge", json={"query": question})
    elapsed = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    body = response.json()
    return {"form": "json", "done_ms": elapsed, "first_ms": elapsed, "reply": body}


async def _stream_call(client: httpx.AsyncClient, agent: str, question: str) -> dict[str, Any]:
    record: dict[str, Any] = {"form": "stream", "holding_ms": None, "first_ms": None, "sentences": 0}
    started = time.perf_counter()
    url = f"/api/agents/{agent}/query_knowledge/stream"
    async with client.stream("POST", url, json={"query": question}) as response:
        response.raise_for_status()
        kind = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                kind = line[len("event: ") :]
            elif line.startswith("data: "):
                at = (time.perf_counter() - started) * 1000
                if kind == "holding" and record["holding_ms"] is None:
                    record["holding_ms"] = at
                elif kind == "sentence":
                    record["sentences"] += 1
                    if record["first_ms"] is None:
                        record["first_ms"] = at
                elif kind == "done":
                    record["done_ms"] = at
                    record["reply"] = json.loads(line[len("data: ") :])
    if "reply" not in record:
        raise RuntimeError("the stream ended without a done event")
    return record


async def drive(base: str, key: str, items: Sequence[tuple[str, str]], warmup: int) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key}"}
    records: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30.0, trust_env=False) as client:
        for index, (agent, question) in enumerate(items):
            # Alternate, so that a slower moment of the shared machine weighs on both forms.
            call = _stream_call if index % 2 else _json_call
            record = await call(client, agent, question)
            if index >= warmup:
                records.append(record)
    return records


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for form in ("json", "stream"):
        mine = [r for r in records if r["form"] == form]
        model = [r for r in mine if r["reply"]["timings_ms"]["llm"] > 0 and not r["reply"]["degraded"]]
        out[form] = {
            "calls": len(mine),
            "model_path": len(model),
            "statuses": {s: sum(r["reply"]["status"] == s for r in mine) for s in ("answered", "not_found")},
            "degraded": sum(bool(r["reply"]["degraded"]) for r in mine),
            # Over the calls the model answered: what early speech is for.
            "first_sentence_ms": percentiles([r["first_ms"] for r in model], (0.5, 0.95)),
            "whole_answer_ms": percentiles([r["done_ms"] for r in model], (0.5, 0.95)),
        }
        if form == "stream":
            held = [r["holding_ms"] for r in mine if r["holding_ms"] is not None]
            out[form]["holding_events"] = len(held)
            out[form]["holding_ms"] = percentiles(held, (0.5, 0.95))
            out[form]["sentences_per_answer"] = percentiles([r["sentences"] for r in model], (0.5,))
    return out


def report(result: dict[str, Any]) -> None:
    print(f"\nmachine: {result.get('machine')}  load before/after: {result.get('load')}")
    figures = result.get("figures")
    if not figures:
        return
    print(f"{'form':8} {'model calls':>11} {'first sentence p50/p95 ms':>27} {'whole answer p50/p95 ms':>25}")
    for form in ("json", "stream"):
        f = figures[form]
        first, whole = f["first_sentence_ms"], f["whole_answer_ms"]
        print(
            f"{form:8} {f['model_path']:>5}/{f['calls']:<5} {first['p50']!s:>13} / {first['p95']!s:<11}"
            f" {whole['p50']!s:>11} / {whole['p95']!s}"
        )
    stream = figures["stream"]
    print(f"stream: holding events {stream['holding_events']}, at p50/p95 {stream['holding_ms']} ms")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=60, help="measured calls, half of each form")
    parser.add_argument("--warmup", type=int, default=6)
    parser.add_argument("--embed-ms", type=float, default=150.0)
    parser.add_argument("--chat-ms", type=float, default=700.0)
    parser.add_argument("--kbs", type=int, default=4)
    parser.add_argument("--chunks-per-kb", type=int, default=300)
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--seed", type=int, default=20250101)
    add_service_env_argument(parser)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep-tmp", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    terminate_on_sigterm()
    started = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": "early speech: query_knowledge/stream against the JSON form",
        "started": now_iso(),
        "machine": machine_info(),
        "settings": {k: str(v) for k, v in vars(args).items()},
    }
    harness = Harness.create("vk-stream-bench-", keep_tmp=args.keep_tmp)
    with reported_failure(harness, result) as outcome:
        harness.start_stub(
            embed_delay_ms=args.embed_ms, chat_delay_ms=args.chat_ms, dims=args.dims, chat_answer=ANSWER
        )
        cfg = SeedConfig(
            kbs=args.kbs, chunks_per_kb=args.chunks_per_kb, docs_per_kb=4, dims=args.dims, seed=args.seed
        )
        seed, base, admin_key = seeded_service(harness, cfg, env_extra=dict(args.service_env))
        key = asyncio.run(create_query_key(base, admin_key))
        items = QuestionMaker.of(seed, args.seed).many(args.warmup + args.calls)
        load_before = loadavg()
        result["speed_probe_ms"] = speed_probe()
        records = asyncio.run(drive(base, key, items, args.warmup))
        result["load"] = [load_before, loadavg()]
        result["figures"] = summarise(records)
    finish_report(result, started, report, args.json)
    return outcome.status


if __name__ == "__main__":
    raise SystemExit(main())
