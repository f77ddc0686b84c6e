"""Load at a fixed arrival rate: the highest query_knowledge rate with a service-time p99 under
100 ms and no errors, on this machine, on loopback, with the OpenAI stub (zero delay); then the
same with ingestion running at full speed beside it.

Why not wrk: ``wrk`` is closed-loop (a slow response delays the next request, which hides the
queueing a real caller sees: coordinated omission) and Debian has no ``wrk2``. The generator here
is open-loop, wrk2-style: request *i* is due at ``t0 + i / rate`` whatever happened to earlier
ones, its latency is measured from that due time (so time spent waiting behind a slow response or
a busy generator counts), and at most ``--max-inflight`` requests are outstanding; a request due
while the cap is reached is counted as an error ("overflow"), never delayed. It runs in its own
process(es) (``--procs``), speaks HTTP/1.1 with keep-alive over raw asyncio streams (a few tens
of microseconds of CPU per request, so the generator does not steal the service's cores), and
reports its own send lag so a generator that fell behind is visible.

What it does, in order:

1. starts the stub, ``vk create-org`` on a fresh embedded PostgreSQL, seeds it by SQL
   (``bench.seed``: ``--kbs`` x ``--chunks-per-kb`` chunks, one agent per KB, HNSW built once);
2. ``vk serve`` with ``INGESTION__WORKERS=0`` and both rate limits disabled
   (``LIMITS__QUERY_PER_MINUTE=0``, ``LIMITS__MANAGE_PER_MINUTE=0``);
3. steps the rate (``--rates``, ``--step-s`` each, distinct questions, so no cache hits), stops
   after ``--stop-after`` failing steps, then bisects between the best passing and the first
   failing rate (``--refine`` extra steps);
4. restarts the service with ``INGESTION__WORKERS=--ingest-workers`` (same database), creates a
   separate knowledge base and keeps POSTing ~5 KB markdown documents to it from a feeder process
   (a bounded backlog keeps the workers busy without an unbounded queue), and steps the rate
   again; ingestion throughput (documents ready per second) is reported per step;
5. prints the tables (``--json`` also writes them) and stops everything, also after a failure,
   Ctrl-C or SIGTERM.

Run from the repository root::

    .venv/bin/python -m bench.load --json /tmp/load.json
    .venv/bin/python -m bench.load --rates 50,100,150 --step-s 10 --phases plain
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench.corpus import make_document
from bench.harness import (
    BenchError,
    Harness,
    add_service_env_argument,
    pg_connect,
    reported_failure,
    run_driver,
    service_env,
    terminate_on_sigterm,
    vk_command,
)
from bench.metering import CpuMeter, machine_info, wait_for_quiet
from bench.report import finish_report, now_iso, percentiles
from bench.seed import QuestionMaker, SeedConfig, seeded_service

P99_TARGET_MS = 100.0


# ---------------------------------------------------------------------------------------------
# The open-loop generator (its own process)


# uvicorn closes a keep-alive connection after 5 s without a request; a connection idle for longer
# than this is not reused (sending on one the server is closing would fail for the client's sake).
MAX_IDLE_S = 3.0


class _Pool:
    """Keep-alive HTTP/1.1 connections; a new one is opened whenever none is idle and fresh."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[tuple[float, tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = []
        self.opened = 0

    async def acquire(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        now = time.perf_counter()
        while self.idle:
            released, conn = self.idle.pop()
            if now - released < MAX_IDLE_S and not conn[0].at_eof():
                return conn
            conn[1].close()
        self.opened += 1
        return await asyncio.open_connection(self.host, self.port)

    def release(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.idle.append((time.perf_counter(), conn))

    def close_all(self) -> None:
        for _, (_, writer) in self.idle:
            writer.close()
        self.idle.clear()


async def _http(
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], request: bytes
) -> tuple[int, bytes, bool]:
    """Send one request; return status, body and whether the server asked to close."""
    reader, writer = conn
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length, chunked, close = 0, False, False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            close = b"close" in value.lower()
    if not chunked:
        return status, await reader.readexactly(length), close
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            break
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
    return status, b"".join(parts), close


async def _generate(config: dict[str, Any]) -> dict[str, Any]:
    url = urlsplit(config["base"])
    host, port = url.hostname or "127.0.0.1", url.port or 80
    rate: float = config["rate"]
    procs: int = config["procs"]
    index: int = config["index"]
    cap: int = config["max_inflight"]
    timeout_s: float = config["timeout_s"]
    items: list[list[str]] = config["items"]
    head = (
        "POST /api/agents/{agent}/query_knowledge HTTP/1.1\r\nHost: "
        f"{host}:{port}\r\nAuthorization: Bearer {config['key']}\r\nContent-Type: application/json\r\n"
        "Content-Length: {length}\r\n\r\n"
    )
    requests = []
    for agent, question in items:
        body = json.dumps({"query": question}).encode()
        requests.append(head.format(agent=agent, length=len(body)).encode() + body)
    pool = _Pool(host, port)
    # A few connections ready before the clock starts, as a warm client would have.
    for _ in range(min(8, cap)):
        pool.release(await pool.acquire())
    records: list[list[Any]] = []
    inflight = 0
    max_inflight = 0
    tasks: set[asyncio.Task[None]] = set()

    print("ready", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)  # "go <epoch t0>"
    t0 = time.perf_counter() + (float(line.split()[1]) - time.time())
    cpu0 = time.process_time()

    async def one(request: bytes, due: float) -> None:
        nonlocal inflight
        started = time.perf_counter()
        conn = None
        try:
            async with asyncio.timeout(timeout_s):
                conn = await pool.acquire()
                status, body, close = await _http(conn, request)
            end = time.perf_counter()
            if close:
                conn[1].close()
            else:
                pool.release(conn)
            conn = None
            if status != 200:
                records.append([due - t0, (started - due) * 1000, (end - due) * 1000, f"HTTP {status}"])
                return
            payload = json.loads(body)
            timings = payload.get("timings_ms") or {}
            records.append(
                [
                    due - t0, (started - due) * 1000, (end - due) * 1000, "ok",
                    float(timings.get("total", 0.0)), payload.get("status"), bool(payload.get("cached")),
                    bool(payload.get("degraded")),
                ]
            )  # fmt: skip
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
            kind = "timeout" if isinstance(exc, TimeoutError) else type(exc).__name__
            records.append([due - t0, (started - due) * 1000, (time.perf_counter() - due) * 1000, kind])
        finally:
            if conn is not None:
                conn[1].close()
            inflight -= 1

    for j, request in enumerate(requests):
        due = t0 + (index + j * procs) / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if inflight >= cap:
            records.append([due - t0, 0.0, 0.0, "overflow"])
            continue
        inflight += 1
        max_inflight = max(max_inflight, inflight)
        task = asyncio.create_task(one(request, due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.wait(tasks, timeout=timeout_s + 5)
    cpu = time.process_time() - cpu0
    pool.close_all()
    return {
        "records": records,
        "max_inflight": max_inflight,
        "connections": pool.opened,
        "generator_cpu_s": cpu,
    }


# ---------------------------------------------------------------------------------------------
# The ingestion feeder (its own process)


async def _feed(config: dict[str, Any]) -> dict[str, Any]:
    kb_id: str = config["kb_id"]
    target_backlog: int = config["backlog"]
    rng = random.Random(config["seed"])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    posted = 0
    errors: Counter[str] = Counter()
    latencies: list[float] = []
    backlog = 0  # pending + processing, from the database, plus what was posted since
    conn = await pg_connect(Path(config["pgdir"]))

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        loop.call_soon_threadsafe(stop.set)

    async with httpx.AsyncClient(
        base_url=config["base"],
        headers={"Authorization": f"Bearer {config['key']}"},
        timeout=60.0,
        trust_env=False,
    ) as client:
        print("ready", flush=True)
        threading.Thread(target=watch_stdin, daemon=True).start()

        async def monitor() -> None:
            nonlocal backlog
            while not stop.is_set():
                backlog = await conn.fetchval(
                    "SELECT count(*) FROM documents "
                    "WHERE kb_id = $1::uuid AND status IN ('pending', 'processing')",
                    kb_id,
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)

        async def poster() -> None:
            nonlocal posted, backlog
            while not stop.is_set():
                if backlog >= target_backlog or posted >= config["max_docs"]:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), 0.1)
                    continue
                title, body = make_document(rng, posted, config["doc_bytes"])
                backlog += 1
                started = time.perf_counter()
                try:
                    response = await client.post(
                        f"/api/knowledge/{kb_id}/documents",
                        json={"title": title, "content": body, "content_type": "markdown"},
                    )
                except httpx.HTTPError as exc:
                    errors[type(exc).__name__] += 1
                    continue
                latencies.append((time.perf_counter() - started) * 1000)
                if response.status_code == 202:
                    posted += 1
                else:
                    errors[f"HTTP {response.status_code}"] += 1

        await asyncio.gather(monitor(), *(poster() for _ in range(config["post_concurrency"])))
    await conn.close()
    return {"posted": posted, "errors": dict(errors), "post_ms": percentiles(latencies)}


# ---------------------------------------------------------------------------------------------
# Steps, from the benchmark process


def _count(harness: Harness, kb_id: str | None, status: str) -> int:
    if kb_id is None:
        return 0
    sql = "SELECT count(*) AS n FROM documents WHERE kb_id = $1::uuid AND status = $2"
    return int(harness.fetchrow(sql, kb_id, status)["n"])


def run_step(
    harness: Harness,
    base: str,
    key: str,
    rate: float,
    seconds: float,
    maker: QuestionMaker,
    args: argparse.Namespace,
    *,
    label: str,
    ingest_kb: str | None = None,
) -> dict[str, Any]:
    count = max(1, round(rate * seconds))
    items = maker.many(count)
    procs = max(1, min(args.procs, count))
    wait_for_quiet(harness.pids(), max_foreign_cores=args.max_foreign_cores, max_wait_s=args.quiet_wait_s)
    generators = []
    for k in range(procs):
        config = {
            "base": base, "key": key, "rate": rate, "procs": procs, "index": k,
            "max_inflight": max(1, args.max_inflight // procs), "timeout_s": args.timeout_s,
            "items": [list(item) for item in items[k::procs]],
        }  # fmt: skip
        generators.append(
            harness.spawn_driver("bench.load", "--generate", config, f"gen-{label}-{rate:g}-{k}")
        )
    ready_before = _count(harness, ingest_kb, "ready")
    meter = CpuMeter(harness.pids()).start()
    t0 = time.time() + 0.3
    for process, _ in generators:
        assert process.stdin is not None
        process.stdin.write(f"go {t0!r}\n")
        process.stdin.flush()
    outputs = []
    for process, out in generators:
        process.wait(seconds + args.timeout_s + 60)
        harness.children.remove(process)
        if process.returncode != 0 or not out.exists():
            meter.stop()
            raise BenchError(f"a generator failed with status {process.returncode}")
        outputs.append(json.loads(out.read_text()))
    window = time.time() - t0
    ready_after = _count(harness, ingest_kb, "ready")
    load = meter.stop(extra_cpu_s={"generator": sum(o["generator_cpu_s"] for o in outputs)})
    step = summarise_step(rate, seconds, outputs, load, args)
    if ingest_kb is not None:
        step["ingestion_docs_ready"] = ready_after - ready_before
        step["ingestion_docs_per_s"] = round((ready_after - ready_before) / window, 2)
    print_step(step)
    return step


def summarise_step(
    rate: float, seconds: float, outputs: list[dict[str, Any]], load: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    records = [r for o in outputs for r in o["records"]]
    ok = [r for r in records if r[3] == "ok"]
    kinds = Counter(r[3] for r in records if r[3] != "ok")
    unavailable = sum(1 for r in ok if r[5] == "unavailable")
    service = percentiles([r[4] for r in ok])
    latency = percentiles([r[2] for r in records if r[3] == "ok"])
    errors = len(records) - len(ok) + unavailable
    if unavailable:
        kinds["answered 'unavailable'"] = unavailable
    last_end = max((r[0] + r[2] / 1000 for r in ok), default=seconds)
    n = len(records)
    passed = errors == 0 and service["p99"] is not None and service["p99"] < args.p99_target_ms
    return {
        "rate": rate,
        "seconds": seconds,
        "sent": n,
        "ok": len(ok),
        "achieved_per_s": round(len(ok) / max(last_end, seconds), 1),
        "errors": errors,
        "error_kinds": dict(kinds),
        "answer_statuses": dict(Counter(r[5] for r in ok)),
        "cached": sum(1 for r in ok if r[6]),
        "degraded": sum(1 for r in ok if r[7]),
        "service_ms": service,
        "latency_ms": latency,  # from the due time to the end of the response
        "send_lag_ms": percentiles([r[1] for r in records if r[3] != "overflow"]),
        "max_inflight": max(o["max_inflight"] for o in outputs),
        "connections": sum(o["connections"] for o in outputs),
        "cpu_ms_per_request": {k: round(1000 * v / max(1, n), 2) for k, v in load["cpu_s"].items()},
        "load": load,
        "machine_busy": (load["foreign_cores"] or 0.0) > args.max_foreign_cores,
        "pass": passed,
        "pass_latency": errors == 0 and latency["p99"] is not None and latency["p99"] < args.p99_target_ms,
    }


def print_step(step: dict[str, Any]) -> None:
    s, lat, load = step["service_ms"], step["latency_ms"], step["load"]
    extra = ""
    if "ingestion_docs_per_s" in step:
        extra = f"  ingest {step['ingestion_docs_per_s']} docs/s"
    print(
        f"  {step['rate']:>6g}/s  ok {step['ok']:>5}  err {step['errors']:>4}  "
        f"service p50 {_n(s['p50']):>7} p99 {_n(s['p99']):>7}  "
        f"latency p50 {_n(lat['p50']):>8} p99 {_n(lat['p99']):>8}  "
        f"lag p99 {step['send_lag_ms']['p99']}  inflight {step['max_inflight']}  "
        f"loadavg {load['loadavg_end'][0]} foreign {load['foreign_cores']}  "
        f"{'PASS' if step['pass'] else 'fail'}{extra}"
        + (f"  {step['error_kinds']}" if step["error_kinds"] else ""),
        flush=True,
    )


def ladder(
    harness: Harness,
    base: str,
    key: str,
    maker: QuestionMaker,
    args: argparse.Namespace,
    rates: Sequence[float],
    *,
    label: str,
    ingest_kb: str | None = None,
) -> dict[str, Any]:
    """Step through ``rates``, stop after ``--stop-after`` failing steps, then bisect."""
    print(
        f"\n{label}: {args.step_s:g} s per step, pass = service p99 < {args.p99_target_ms:g} ms and no errors"
    )
    run_step(harness, base, key, args.warmup_rate, args.warmup_s, maker, args, label=f"{label}-warmup")
    steps: list[dict[str, Any]] = []

    def step(rate: float) -> dict[str, Any]:
        result = run_step(
            harness, base, key, rate, args.step_s, maker, args, label=label, ingest_kb=ingest_kb
        )
        if result["machine_busy"] and args.rerun_busy:
            print(f"  (other processes used {result['load']['foreign_cores']} cores; re-running this step)")
            again = run_step(
                harness, base, key, rate, args.step_s, maker, args, label=label, ingest_kb=ingest_kb
            )
            again["rerun_because_busy"] = result["load"]["foreign_cores"]
            result = min((result, again), key=lambda r: r["load"]["foreign_cores"] or 0.0)
        steps.append(result)
        return result

    failures = 0
    for rate in rates:
        failures = 0 if step(rate)["pass"] else failures + 1
        if failures >= args.stop_after:
            break
    for _ in range(args.refine):
        passing = [s["rate"] for s in steps if s["pass"]]
        lo = max(passing, default=0.0)
        above = [s["rate"] for s in steps if not s["pass"] and s["rate"] > lo]
        if not above:
            break
        hi = min(above)
        mid = round((lo + hi) / 2 / 5) * 5 if hi - lo > 10 else round((lo + hi) / 2)
        if mid <= lo or mid >= hi:
            break
        step(mid)
    steps.sort(key=lambda s: s["rate"])
    best = max((s["rate"] for s in steps if s["pass"]), default=None)
    best_latency = max((s["rate"] for s in steps if s["pass_latency"]), default=None)
    print(f"{label}: highest passing rate {best} req/s (by caller-side latency: {best_latency} req/s)")
    return {"steps": steps, "best_rate": best, "best_rate_by_latency": best_latency}


# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--kbs", type=int, default=100)
    parser.add_argument("--chunks-per-kb", type=int, default=1000)
    parser.add_argument("--rates", default="25,50,75,100,150,200,300", help="req/s per step, ascending")
    parser.add_argument("--step-s", type=float, default=20.0, help="seconds per step (default 20)")
    parser.add_argument("--warmup-rate", type=float, default=20.0)
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--stop-after", type=int, default=2, help="stop after this many failing steps")
    parser.add_argument("--refine", type=int, default=2, help="bisection steps after the ladder")
    parser.add_argument("--p99-target-ms", type=float, default=P99_TARGET_MS)
    parser.add_argument("--max-inflight", type=int, default=512, help="outstanding requests cap")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="per-request timeout (an error)")
    parser.add_argument("--procs", type=int, default=1, help="generator processes (default 1)")
    parser.add_argument("--phases", default="plain,ingest", help="plain, ingest or both (default)")
    parser.add_argument("--ingest-workers", type=int, default=4, help="ingestion slots in phase 'ingest'")
    parser.add_argument(
        "--ingest-in",
        choices=("worker", "service"),
        default="worker",
        help="phase 'ingest' runs ingestion in a separate niced `vk worker` (default, as deployed) or "
        "inside the service process (INGESTION__WORKERS)",
    )
    parser.add_argument("--ingest-nice", type=int, default=10, help="niceness of that worker (default 10)")
    parser.add_argument("--ingest-backlog", type=int, default=32, help="documents kept queued (default 32)")
    parser.add_argument("--ingest-post-concurrency", type=int, default=2)
    parser.add_argument("--ingest-doc-bytes", type=int, default=5000)
    parser.add_argument(
        "--ingest-rates",
        help="rates of the ingestion phase (default: the plain phase's rates up to 1.5 x its best)",
    )
    parser.add_argument("--seed", type=int, default=20250101)
    parser.add_argument(
        "--server-workers", type=int, default=1, help="service processes (vk serve --workers, default 1)"
    )
    parser.add_argument(
        "--shared-buffers", help="PostgreSQL shared_buffers for the run, e.g. 1GB (default: the server's)"
    )
    add_service_env_argument(parser)
    parser.add_argument("--max-foreign-cores", type=float, default=0.5)
    parser.add_argument("--quiet-wait-s", type=float, default=10.0)
    parser.add_argument("--rerun-busy", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep-tmp", action="store_true")
    parser.add_argument("--generate", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--feed", nargs=2, type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.generate:
        return run_driver(_generate, args.generate)
    if args.feed:
        return run_driver(_feed, args.feed, fast_loop=False)
    terminate_on_sigterm()
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    phases = {p.strip() for p in args.phases.split(",")}
    started = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": "query_knowledge at a fixed arrival rate",
        "date": now_iso(),
        "command": " ".join(["python -m bench.load", *sys.argv[1:]]),
        "machine": machine_info(),
        "settings": {
            "dims": args.dims,
            "kbs": args.kbs,
            "chunks_per_kb": args.chunks_per_kb,
            "step_s": args.step_s,
            "p99_target_ms": args.p99_target_ms,
            "max_inflight": args.max_inflight,
            "generator_processes": args.procs,
            "rate_limits": "disabled (LIMITS__QUERY_PER_MINUTE=0, LIMITS__MANAGE_PER_MINUTE=0)",
            "stub_delay_ms": {"embed": 0, "chat": 0},
            "uvicorn_workers": args.server_workers,
            "shared_buffers": args.shared_buffers,
            "service_env": [f"{name}={value}" for name, value in args.service_env],
        },
    }
    harness = Harness.create("vk-load-bench-", keep_tmp=args.keep_tmp)
    with reported_failure(harness, result) as outcome:
        harness.start_stub(dims=args.dims)
        assert harness.stub is not None
        cfg = SeedConfig(kbs=args.kbs, chunks_per_kb=args.chunks_per_kb, dims=args.dims, seed=args.seed)
        seed, base, admin_key = seeded_service(
            harness,
            cfg,
            name="load-bench",
            pg_settings={"shared_buffers": args.shared_buffers} if args.shared_buffers else None,
            env_extra={"WEB_CONCURRENCY": str(args.server_workers), **dict(args.service_env)},
        )
        result["seed"] = seed.summary()
        maker = QuestionMaker.of(seed, args.seed)
        best = None
        if "plain" in phases:
            result["plain"] = ladder(harness, base, admin_key, maker, args, rates, label="plain")
            result["plain"]["ingestion_workers"] = 0
            best = result["plain"]["best_rate"]
        if "ingest" in phases:
            result["ingest"] = ingest_phase(harness, seed.org_id, admin_key, maker, args, rates, best)
        if any(s["errors"] for p in ("plain", "ingest") for s in result.get(p, {}).get("steps", [])):
            outcome.status = 1
    finish_report(result, started, print_summary, args.json)
    return outcome.status


def ingest_phase(
    harness: Harness,
    org_id: str,
    admin_key: str,
    maker: QuestionMaker,
    args: argparse.Namespace,
    rates: Sequence[float],
    best: float | None,
) -> dict[str, Any]:
    assert harness.stub is not None
    in_service = args.ingest_in == "service"
    env = service_env(
        harness.pgdir,
        harness.stub.base_url,
        dims=args.dims,
        workers=args.ingest_workers if in_service else 0,
        extra={"WEB_CONCURRENCY": str(args.server_workers)},
    )
    base, ready_s = harness.start_service(env)
    if in_service:
        print(f"\nservice restarted with INGESTION__WORKERS={args.ingest_workers} in {ready_s} s", flush=True)
    else:
        # The deployment docs/OPERATIONS.md recommends: ingestion in its own `vk worker` process,
        # at a lower CPU priority than the service that answers callers.
        worker_env = service_env(harness.pgdir, harness.stub.base_url, dims=args.dims, workers=0)
        command = [
            "nice",
            "-n",
            str(args.ingest_nice),
            *vk_command("worker", "--concurrency", str(args.ingest_workers)),
        ]
        process = harness.spawn(command, "ingest-worker.log", env=worker_env)
        harness.extra_pids["ingest_worker"] = process.pid
        print(
            f"\nservice restarted in {ready_s} s; `nice -n {args.ingest_nice} vk worker --concurrency "
            f"{args.ingest_workers}` started beside it",
            flush=True,
        )
    created = httpx.post(
        f"{base}/api/knowledge",
        json={"title": "Ingestion beside the load"},
        headers={"Authorization": f"Bearer {admin_key}"},
        timeout=30.0,
        trust_env=False,
    )
    if created.status_code != 201:
        raise BenchError(f"creating the ingestion KB answered {created.status_code}: {created.text[:300]}")
    kb_id = created.json()["id"]
    if args.ingest_rates:
        ingest_rates = [float(r) for r in args.ingest_rates.split(",")]
    elif best:
        ingest_rates = [r for r in rates if r <= best * 1.5] or rates[:2]
    else:
        ingest_rates = list(rates)
    feeder, feeder_out = harness.spawn_driver(
        "bench.load",
        "--feed",
        {
            "base": base,
            "key": admin_key,
            "kb_id": kb_id,
            "pgdir": str(harness.pgdir),
            "backlog": args.ingest_backlog,
            "post_concurrency": args.ingest_post_concurrency,
            "doc_bytes": args.ingest_doc_bytes,
            "seed": args.seed,
            "max_docs": 20_000,
        },
        "feeder",
    )
    assert feeder.stdin is not None
    harness.extra_pids["feeder"] = feeder.pid  # its CPU is ours, not foreign load
    t0 = time.perf_counter()
    ready0 = _count(harness, kb_id, "ready")
    # Let the queue fill and the workers reach full speed before the first step.
    time.sleep(5.0)
    phase = ladder(harness, base, admin_key, maker, args, ingest_rates, label="ingest", ingest_kb=kb_id)
    ready1 = _count(harness, kb_id, "ready")
    elapsed = time.perf_counter() - t0
    feeder.stdin.write("stop\n")
    feeder.stdin.flush()
    feeder.wait(60)
    harness.children.remove(feeder)
    harness.extra_pids.pop("feeder", None)
    feed = json.loads(feeder_out.read_text()) if feeder_out.exists() else {}
    phase.update(
        {
            "ingestion_workers": args.ingest_workers,
            "ingestion_in": args.ingest_in
            if args.ingest_in == "service"
            else f"vk worker, nice {args.ingest_nice}",
            "ingestion_docs_ready": ready1 - ready0,
            "ingestion_docs_per_s": round((ready1 - ready0) / elapsed, 2),
            "ingestion_window_s": round(elapsed, 1),
            "feeder": feed,
            "ingestion_failed": _count(harness, kb_id, "failed"),
        }
    )
    print(
        f"ingestion meanwhile: {phase['ingestion_docs_ready']} documents ready in {elapsed:.0f} s = "
        f"{phase['ingestion_docs_per_s']} docs/s; posted {feed.get('posted')}, "
        f"failed {phase['ingestion_failed']}, POST errors {feed.get('errors')}"
    )
    return phase


def print_summary(result: dict[str, Any]) -> None:
    machine = result["machine"]
    print("\n== query_knowledge at a fixed arrival rate ==")
    print(
        f"machine   {machine['nproc']} cpus ({machine['cpu_model']}), {machine['memory_gb']} GB RAM, "
        f"Python {machine['python']}"
    )
    if seed := result.get("seed"):
        print(
            f"data      {seed['sizes']['chunks']} chunks in {seed['kbs']} KBs, "
            f"{result['settings']['dims']} dims; "
            f"seeded in {seed['timings_s']['seed_total']} s, HNSW {seed['timings_s'].get('hnsw_build')} s"
        )
    for name in ("plain", "ingest"):
        phase = result.get(name)
        if not phase:
            continue
        print(f"\n{name} (ingestion workers {phase.get('ingestion_workers')}):")
        print(
            "   rate  achieved  errors  service p50  p99   latency p50   p99     max  lag p99  "
            "loadavg  foreign  result" + ("  ingest docs/s" if name == "ingest" else "")
        )
        for s in phase["steps"]:
            sv, lat, load = s["service_ms"], s["latency_ms"], s["load"]
            print(
                f"  {s['rate']:>5g}  {s['achieved_per_s']:>8}  {s['errors']:>6}  "
                f"{_n(sv['p50']):>10} {_n(sv['p99']):>6}  {_n(lat['p50']):>11} {_n(lat['p99']):>6} "
                f"{_n(lat['max']):>7}  {_n(s['send_lag_ms']['p99']):>7}  {load['loadavg_end'][0]:>7}  "
                f"{load['foreign_cores']:>7}  {'PASS' if s['pass'] else 'fail':>6}"
                + (f"  {s.get('ingestion_docs_per_s')}" if name == "ingest" else "")
            )
        print(
            f"  highest rate with service p99 < {result['settings']['p99_target_ms']:g} ms and no errors: "
            f"{phase['best_rate']} req/s (caller-side latency p99 under the same bound: "
            f"{phase['best_rate_by_latency']} req/s)"
        )
        if name == "ingest":
            print(f"  ingestion meanwhile: {phase.get('ingestion_docs_per_s')} documents ready per second")
    print(f"\nwall      {result.get('wall_s')} s")


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    sys.exit(main())
