"""Do live calls suffer while documents ingest? query_knowledge at a fixed rate, idle and then
while a 16.8 MB markdown document and 200 small ones upload and ingest, for each ingestion
isolation (``INGESTION__ISOLATION=inline`` = workers in the service process, ``process`` = the
``vk worker`` process ``vk serve`` starts at lower priority), alternating in one sitting.

Per round, on one ``vk serve`` with the default offline embedder (minilm) and
``INGESTION__WORKERS=2``, a fresh set of documents (no embedding-cache hits between rounds):

1. ``--idle-s`` of queries at ``--rate`` (open loop, wrk2-style, from bench.load's generator
   processes: latency counts from each request's due time) and ``/health`` every 50 ms;
2. the same for ``--window-s`` while, from its first second, the big document and then the small
   ones are POSTed; ingestion throughput is the chunks embedded in the window (the big
   document's progress plus finished documents) per second, and the small documents ready.

Run from the repository root::

    .venv/bin/python -m bench.isolation --rounds 2 --json /tmp/isolation.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx

from bench.corpus import make_corpus, make_document
from bench.harness import BenchError, Harness, create_query_key, offline_env, terminate_on_sigterm
from bench.metering import CpuMeter, machine_info, wait_for_quiet
from bench.report import now_iso, percentiles

QUESTIONS = (
    "How much does the {p} cost?",
    "When can I pick up the {p}?",
    "Is the {p} available on weekends?",
    "How do I return a {p}?",
    "Can I get a refund for the {p}?",
    "Who do I call about my {p}?",
)
FAQ = """# Opening hours and prices

We are open Monday to Friday from 8 am to 6 pm, and on Saturdays from 9 am to 1 pm.
The standard service costs 45 dollars; the premium service costs 80 dollars.

## Returns

Items can be returned within 30 days with the receipt. Refunds go back to the card used.

## Pick-up

Orders can be picked up at the front desk from the next working day.
"""


def big_document(seed: int, target_bytes: int) -> bytes:
    """One markdown file of ``target_bytes``: many corpus pages under one title (corpus pages are
    built for 5-200 KB; one 16 MB page would take minutes to generate)."""
    rng = random.Random(seed)
    parts = [f"# The complete handbook (edition {seed})\n"]
    size = len(parts[0])
    index = 0
    while size < target_bytes:
        title, text = make_document(rng, index, 200_000)
        part = "\n" + text.replace(f"# {title}", f"## {title}", 1)
        parts.append(part)
        size += len(part.encode())
        index += 1
    return "".join(parts).encode()[:target_bytes]


class HealthProbe(threading.Thread):
    """GET /health every ``interval_s`` on a keep-alive connection; records each latency (ms)."""

    def __init__(self, base: str, interval_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.base, self.interval_s = base, interval_s
        self.latencies: list[float] = []
        self.errors = 0
        self._halt = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=10.0, trust_env=False) as http:
            due = time.perf_counter()
            while not self._halt.is_set():
                started = time.perf_counter()
                try:
                    ok = http.get("/health").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.latencies.append((time.perf_counter() - started) * 1000)
                self.errors += not ok
                due += self.interval_s
                self._halt.wait(max(0.0, due - time.perf_counter()))

    def stop(self) -> dict[str, Any]:
        self._halt.set()
        self.join(15)
        return {
            "n": len(self.latencies),
            "errors": self.errors,
            **percentiles(self.latencies),
            "max": round(max(self.latencies), 2) if self.latencies else None,
        }


def feed(
    base: str, admin_key: str, kb_id: str, big: bytes, small: list[tuple[str, str]], out: dict[str, Any]
) -> None:
    """Upload the big document (a file, as an admin would), then the small ones (JSON)."""
    headers = {"Authorization": f"Bearer {admin_key}"}
    with httpx.Client(base_url=base, timeout=300.0, trust_env=False, headers=headers) as http:
        t = time.perf_counter()
        r = http.post(
            f"/api/knowledge/{kb_id}/documents",
            files={"file": ("handbook.md", big, "text/markdown")},
            data={"title": "Handbook"},
        )
        if r.status_code not in (201, 202):
            out["error"] = f"big upload answered {r.status_code}: {r.text[:200]}"
            return
        out["big_upload_s"] = round(time.perf_counter() - t, 2)
        out["big_id"] = r.json()["id"]
        t = time.perf_counter()
        for title, text in small:
            r = http.post(f"/api/knowledge/{kb_id}/documents", json={"title": title, "content": text})
            if r.status_code not in (201, 202):
                out["error"] = f"small upload answered {r.status_code}: {r.text[:200]}"
                return
        out["small_upload_s"] = round(time.perf_counter() - t, 2)


def progress(harness: Harness, kb_id: str) -> dict[str, int]:
    """Documents ready and failed in a knowledge base, and the chunks embedded so far."""
    row = harness.fetchrow(
        """
        SELECT count(*) FILTER (WHERE status = 'ready') AS ready,
               count(*) FILTER (WHERE status = 'failed') AS failed,
               coalesce(sum(CASE WHEN status = 'ready' THEN chunk_count
                                 WHEN status = 'processing' THEN progress_done ELSE 0 END), 0) AS chunks
        FROM documents WHERE kb_id = $1::uuid
        """,
        kb_id,
    )
    return {name: int(value) for name, value in row.items()}


def queries(
    harness: Harness, base: str, key: str, agent: str, rate: float, seconds: float, label: str, offset: int
) -> tuple[list[tuple[Any, Any]], float]:
    """Start the generator processes (bench.load's); returns them and the start time."""
    count = round(rate * seconds)
    items = [
        [agent, QUESTIONS[i % len(QUESTIONS)].format(p=f"order {offset + i}")] for i in range(count)
    ]  # distinct questions: no answer-cache hits
    config = {
        "base": base, "key": key, "rate": rate, "procs": 1, "index": 0, "max_inflight": 256,
        "timeout_s": 10.0, "items": items,
    }  # fmt: skip
    generator = harness.spawn_driver("bench.load", "--generate", config, f"gen-{label}")
    t0 = time.time() + 0.3
    process = generator[0]
    assert process.stdin is not None
    process.stdin.write(f"go {t0!r}\n")
    process.stdin.flush()
    return [generator], t0


def collect(harness: Harness, generators: list[tuple[Any, Any]], seconds: float) -> dict[str, Any]:
    records = []
    for process, out in generators:
        process.wait(seconds + 120)
        harness.children.remove(process)
        if process.returncode != 0 or not out.exists():
            raise BenchError(f"a generator failed with status {process.returncode}")
        records += json.loads(out.read_text())["records"]
    ok = [r for r in records if r[3] == "ok"]
    return {
        "sent": len(records),
        "ok": len(ok),
        "errors": len(records) - len(ok),
        "latency_ms": {
            **percentiles([r[2] for r in ok]),
            "max": round(max((r[2] for r in ok), default=0.0), 2),
        },
        "service_ms": percentiles([r[4] for r in ok]),
    }


def run_round(
    harness: Harness, admin_key: str, isolation: str, index: int, args: argparse.Namespace
) -> dict[str, Any]:
    env = offline_env(harness.pgdir, isolation=isolation, workers=args.workers)
    base, ready_s = harness.start_service(env)
    headers = {"Authorization": f"Bearer {admin_key}"}
    with httpx.Client(base_url=base, timeout=60.0, trust_env=False, headers=headers) as http:
        faq_kb = http.post("/api/knowledge", json={"title": f"FAQ {index}"}).json()["id"]
        http.post(f"/api/knowledge/{faq_kb}/documents", json={"title": "FAQ", "content": FAQ})
        agent = str(uuid.uuid4())
        http.put(f"/api/knowledge/{faq_kb}/agents", json={"agent_ids": [agent]})
        ingest_kb = http.post("/api/knowledge", json={"title": f"Ingestion {index}"}).json()["id"]
    query_key = asyncio.run(create_query_key(base, admin_key))
    deadline = time.monotonic() + 120
    while progress(harness, faq_kb)["ready"] < 1:
        if time.monotonic() > deadline:
            raise BenchError("the FAQ was not ingested within 120 s")
        time.sleep(0.2)
    big = big_document(1000 + index, args.big_bytes)
    small = make_corpus(args.small, target_bytes=5000, seed=2000 + index)
    print(f"\nround {index}: {isolation}, service ready in {ready_s} s", flush=True)
    result: dict[str, Any] = {"isolation": isolation, "round": index}
    for phase in ("idle", "ingesting"):
        seconds = args.idle_s if phase == "idle" else args.window_s
        result[f"{phase}_quiet"] = wait_for_quiet(harness.pids(), max_foreign_cores=0.3, max_wait_s=30)[
            "quiet"
        ]
        meter = CpuMeter(harness.pids()).start()
        probe = HealthProbe(base)
        probe.start()
        generators, t0 = queries(
            harness, base, query_key, agent, args.rate, seconds, f"{index}-{phase}", index * 100_000
        )
        fed: dict[str, Any] = {}
        feeder = None
        if phase == "ingesting":
            time.sleep(max(0.0, t0 - time.time()) + 1.0)
            before = progress(harness, ingest_kb)
            feeder = threading.Thread(
                target=feed, args=(base, admin_key, ingest_kb, big, small, fed), daemon=True
            )
            feeder.start()
        step = collect(harness, generators, seconds)
        step["health_ms"] = probe.stop()
        step["load"] = meter.stop()
        if feeder is not None:
            after = progress(harness, ingest_kb)
            window = time.time() - t0 - 1.0
            step["ingestion"] = {
                **fed,
                "window_s": round(window, 1),
                "chunks": after["chunks"] - before["chunks"],
                "chunks_per_s": round((after["chunks"] - before["chunks"]) / window, 2),
                "docs_ready": after["ready"],
                "docs_failed": after["failed"],
            }
        result[phase] = step
        print_phase(phase, step)
    # Documents still queued would be taken before the next round's FAQ: delete them.
    httpx.delete(f"{base}/api/knowledge/{ingest_kb}", headers=headers, timeout=60.0, trust_env=False)
    harness.stop_service()
    return result


def print_phase(phase: str, step: dict[str, Any]) -> None:
    lat, health, load = step["latency_ms"], step["health_ms"], step["load"]
    line = (
        f"  {phase:<9} queries ok {step['ok']}/{step['sent']}  p50 {lat['p50']} p99 {lat['p99']} "
        f"max {lat['max']} ms | /health p99 {health['p99']} max {health['max']} ms | "
        f"foreign {load['foreign_cores']} cores"
    )
    if "ingestion" in step:
        ingestion = step["ingestion"]
        line += (
            f" | ingested {ingestion['chunks']} chunks ({ingestion['chunks_per_s']}/s), "
            f"{ingestion['docs_ready']} docs ready"
        )
    print(line, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2, help="pairs of (inline, process) rounds")
    parser.add_argument("--rate", type=float, default=50.0, help="query_knowledge calls per second")
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--window-s", type=float, default=90.0)
    parser.add_argument("--big-bytes", type=int, default=16_800_000)
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2, help="INGESTION__WORKERS")
    parser.add_argument(
        "--order",
        default="inline,process",
        help="isolations, alternated in this order; process:N sets INGESTION__NICE=N",
    )
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--keep-tmp", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    terminate_on_sigterm()
    harness = Harness.create("vk-isolation-", keep_tmp=args.keep_tmp)
    results: list[dict[str, Any]] = []
    started = now_iso()
    try:
        admin_key = harness.create_org(offline_env(harness.pgdir, workers=args.workers), "isolation")
        order = args.order.split(",")
        for index in range(args.rounds * len(order)):
            results.append(run_round(harness, admin_key, order[index % len(order)], index, args))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        harness.close()
    report = {"started": started, "machine": machine_info(), "args": vars(args), "rounds": results}
    print("\nisolation  idle p99 / max   ingesting p99 / max   /health max idle / ingesting   chunks/s")
    for r in results:
        idle, busy = r["idle"], r["ingesting"]
        print(
            f"{r['isolation']:<11}{idle['latency_ms']['p99']!s:>8} / {idle['latency_ms']['max']!s:<8}"
            f" {busy['latency_ms']['p99']!s:>9} / {busy['latency_ms']['max']!s:<9}"
            f" {idle['health_ms']['max']!s:>12} / {busy['health_ms']['max']!s:<12}"
            f" {busy['ingestion']['chunks_per_s']!s:>9}"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
