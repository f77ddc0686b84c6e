"""Ingestion benchmark: time from POST to ``ready`` for many markdown documents, chunking
throughput, and how well embedding requests are batched.

What it does, in order:

1. generates ``--docs`` distinct markdown documents of about ``--doc-bytes`` each (seeded);
2. measures extract + chunk throughput in this process, on one core, over the same documents;
3. starts the OpenAI-compatible stub (``bench/openai_stub.py``) as a child process, answering
   embeddings after ``--embed-delay-ms``;
4. runs ``vk create-org`` and ``vk serve`` against a fresh embedded PostgreSQL in a temporary
   folder, with the stub as ``OPENAI_BASE_URL``;
5. creates a knowledge base, POSTs every document (``--post-concurrency`` at a time) while
   polling the knowledge base, until every document is ``ready`` or ``failed`` or
   ``--timeout-s`` passes;
6. prints the figures (``--json`` also writes them), then stops the service, PostgreSQL and the
   stub and deletes the temporary folder, also after a failure, Ctrl-C or SIGTERM.

Run from the repository root::

    .venv/bin/python bench/ingest_bench.py                      # 1,000 docs, 8 workers
    .venv/bin/python bench/ingest_bench.py --workers 2 --json bench/results/w2.json

Diagnosis and what-if flags (results in ``docs/BENCHMARKS.md``):

    --instrument    start the service through ``bench/instrumented_serve.py``: per-stage timers,
                    event-loop lag and a stack sampler, printed at the end
    --drop-hnsw     drop the service's HNSW index from the throw-away database before ingesting
    --dimensions N  ``EMBEDDING__OPENAI_DIMENSIONS=N`` (the stub honours ``dimensions``)
    --offline minilm  embed in the service with the offline default instead of the stub
                    (``--workers 2`` matches the service's default on a 2-core machine)

All traffic stays on 127.0.0.1. The service gets ``LOG_LEVEL=WARNING`` (access logs of 1,000
POSTs are not what is measured; note that Litestar's default logging config currently keeps the
root logger at INFO anyway) and ``LIMITS__MANAGE_PER_MINUTE=0`` (1,000 POSTs a minute exceed the
per-organisation management budget). The ``CPU seconds`` line reports how much CPU other
processes used during the run: this machine is shared, and a run that competed with other
work should be repeated.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # `python bench/ingest_bench.py` puts only bench/ on the path

from bench.corpus import make_corpus  # noqa: E402
from bench.openai_stub import StubProcess, free_port, start_stub_process  # noqa: E402
from bench.seed import (  # noqa: E402
    BenchError,
    die_with_parent,
    finish_report,
    machine_info,
    pg_bin,
    postmaster_info,
    stop_postgres,
)

TARGET_S = 60.0  # the figure the project promised for 1,000 documents of ~5 KB


def code_version(repo: Path) -> dict[str, Any]:
    """Which code was measured: the commit and whether the working tree had changes (read-only git)."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", *args], check=False, cwd=repo, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    changed = git("status", "--porcelain", "--untracked-files=no")
    return {
        "repo": str(repo),
        "commit": git("rev-parse", "--short", "HEAD") or None,
        "modified_files": len(changed.splitlines()),
    }


# ---------------------------------------------------------------------------------------------
# Chunking throughput, in this process


def measure_chunking(
    docs: Sequence[tuple[str, str]], *, chunk_tokens: int, overlap_tokens: int
) -> dict[str, Any]:
    """Extract + chunk every document exactly as the worker does, on one core, no I/O."""
    from app.ingestion.chunking import chunk_sections, get_encoding  # noqa: PLC0415 - after sys.path set-up
    from app.ingestion.extract import extract  # noqa: PLC0415

    encoding = get_encoding("cl100k_base")
    encoding.encode_ordinary("warm up")  # loading the BPE ranks is start-up cost, not throughput
    payloads = [(title, body.encode()) for title, body in docs]
    total = sum(len(data) for _, data in payloads)

    wall, cpu = time.perf_counter(), time.process_time()
    extracted = [extract("markdown", data) for _, data in payloads]
    extract_s, extract_cpu = time.perf_counter() - wall, time.process_time() - cpu

    wall, cpu = time.perf_counter(), time.process_time()
    chunked = [
        chunk_sections(
            title, ex.sections, chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens, encoding=encoding
        )
        for (title, _), ex in zip(payloads, extracted, strict=True)
    ]
    chunk_s, chunk_cpu = time.perf_counter() - wall, time.process_time() - cpu

    # The OpenAI embedder tokenises every chunk again (to truncate and batch by tokens): the third
    # CPU cost a document pays before any I/O.
    embed_texts = [c.embed_text for chunks in chunked for c in chunks]
    wall = time.perf_counter()
    tokens = sum(len(encoding.encode_ordinary(text)) for text in embed_texts)
    prepare_s = time.perf_counter() - wall

    mb = total / 1e6
    both = extract_s + chunk_s
    return {
        "documents": len(docs),
        "megabytes": round(mb, 3),
        "sections": sum(len(ex.sections) for ex in extracted),
        "chunks": len(embed_texts),
        "embed_tokens": tokens,
        "extract_s": round(extract_s, 3),
        "chunk_s": round(chunk_s, 3),
        "embed_prepare_s": round(prepare_s, 3),
        "extract_mb_s": round(mb / extract_s, 2),
        "chunk_mb_s": round(mb / chunk_s, 2),
        "extract_chunk_mb_s": round(mb / both, 2),
        # CPU time close to wall time confirms a single busy core (tiktoken may use threads).
        "cpu_over_wall": round((extract_cpu + chunk_cpu) / both, 2),
    }


# ---------------------------------------------------------------------------------------------
# Processes


@dataclass
class Resources:
    """Everything the benchmark starts, stopped in reverse order by ``close``."""

    tmp: Path
    keep_tmp: bool = False
    stub: StubProcess | None = None
    service: subprocess.Popen[bytes] | None = None
    log_files: list[Any] = field(default_factory=list)

    @property
    def pgdir(self) -> Path:
        return self.tmp / "postgres"

    def close(self) -> None:
        steps = (("service", self.stop_service), ("postgres", lambda: stop_postgres(self.pgdir)))
        for name, step in (*steps, ("stub", self._stop_stub), ("temp folder", self._remove_tmp)):
            try:
                step()
            except Exception as exc:
                print(f"warning: could not stop {name}: {exc}", file=sys.stderr)

    def stop_service(self) -> None:
        process = self.service
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)  # uvicorn's graceful shutdown: workers release leases
        try:
            process.wait(45)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def _stop_stub(self) -> None:
        if self.stub is not None:
            self.stub.stop()

    def _remove_tmp(self) -> None:
        for handle in self.log_files:
            handle.close()
        if self.keep_tmp:
            print(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def service_env(pgdir: Path, stub: StubProcess, args: argparse.Namespace) -> dict[str, str]:
    # Drop whatever service settings the calling shell has, so the run depends on the flags only.
    prefixes = ("DB__", "EMBEDDING__", "INGESTION__", "QUERY__", "LIMITS__")
    names = {"DATABASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "LOG_LEVEL", "HOST", "PORT"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes) and k.upper() not in names}
    provider = (
        {"EMBEDDING__PROVIDER": args.offline}
        if args.offline
        else {"OPENAI_API_KEY": "dummy", "OPENAI_BASE_URL": stub.base_url, "EMBEDDING__PROVIDER": "openai"}
    )
    env.update(
        {
            "DB__EMBEDDED_DIR": str(pgdir),
            **provider,
            "EMBEDDING__MAX_CONCURRENCY": str(args.embed_concurrency),
            "INGESTION__WORKERS": str(args.workers),
            **({"EMBEDDING__OPENAI_DIMENSIONS": str(args.dimensions)} if args.dimensions else {}),
            "INGESTION__POLL_INTERVAL_S": str(args.worker_poll_s),
            "LOG_LEVEL": args.log_level,
            # 1,000 POSTs plus polls in a minute are far above the per-organisation management
            # budget (300/min): this measures ingestion, not the rate limiter.
            "LIMITS__MANAGE_PER_MINUTE": "0",
            "NO_PROXY": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def vk_command(*args: str) -> list[str]:
    # `python -m app.cli` is `vk`, but resolves `app` from the working directory (--repo) first.
    return [sys.executable, "-m", "app.cli", *args]


def create_org(repo: Path, env: dict[str, str], log: Path) -> str:
    # Output to a file, not a pipe: pg_ctl's daemonised server may inherit a pipe and keep it open.
    with log.open("w") as out:
        done = subprocess.run(
            vk_command("create-org", "ingest-bench"), cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT,
            timeout=180, check=False, preexec_fn=die_with_parent,
        )  # fmt: skip
    text = log.read_text()
    match = re.search(r"admin key:\s+(\S+)", text)
    if done.returncode != 0 or match is None:
        raise BenchError(f"vk create-org failed (status {done.returncode}):\n{_tail(text)}")
    return match.group(1)


def start_service(
    repo: Path, env: dict[str, str], port: int, resources: Resources, *, instrument: bool
) -> str:
    log = resources.tmp / "service.log"
    out = log.open("wb")
    resources.log_files.append(out)
    command = vk_command("serve", "--port", str(port), "--host", "127.0.0.1")
    if instrument:
        # Same CLI, started through the timing wrapper; PYTHONPATH makes it load --repo's `app`.
        command = [sys.executable, str(BENCH_DIR / "instrumented_serve.py"), *command[3:]]
        env = {**env, "PYTHONPATH": str(repo), "VK_BENCH_TIMINGS": str(resources.tmp / "timings.json")}
    resources.service = subprocess.Popen(
        command,
        cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT,
        # Own session: Ctrl-C reaches the benchmark only, which stops the service in order.
        start_new_session=True, preexec_fn=die_with_parent,  # noqa: PLW1509
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if resources.service.poll() is not None:
            raise BenchError(
                f"vk serve exited with status {resources.service.returncode}:\n{_tail(log.read_text())}"
            )
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{base}/ready", timeout=2.0, trust_env=False).status_code == 200:
                return base
        time.sleep(0.25)
    raise BenchError(f"vk serve was not ready within 120 s:\n{_tail(log.read_text())}")


def psql(pgdir: Path, sql: str) -> str:
    """Run SQL on the embedded server through its own psql and Unix socket; stdout, unaligned."""
    info = postmaster_info(pgdir)
    if info is None:
        raise BenchError("the embedded PostgreSQL is not running")
    host = info["socket_dir"] or "127.0.0.1"
    command = [str(pg_bin("psql")), "-h", host, "-p", str(info["port"]), "-U", "postgres"]
    command += ["-d", "postgres", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise BenchError(f"psql failed: {done.stderr.strip()}")
    return done.stdout


def postgres_versions(pgdir: Path) -> dict[str, str | None]:
    try:
        lines = psql(
            pgdir,
            "SELECT current_setting('server_version'); "
            "SELECT extversion FROM pg_extension WHERE extname = 'vector';",
        ).split()
    except BenchError:
        lines = []
    return {"postgresql": lines[0] if lines else None, "pgvector": lines[1] if len(lines) > 1 else None}


# An experiment, not a setting of the service: drops the HNSW indexes the service made at start-up
# from this throwaway database, to show what ingestion costs without maintaining them.
DROP_HNSW_SQL = """
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT indexname FROM pg_indexes WHERE indexname LIKE 'ix_chunks_hnsw_%' LOOP
        EXECUTE 'DROP INDEX ' || quote_ident(r.indexname);
    END LOOP;
END $$;
SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'ix_chunks_hnsw_%';
"""


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


# ---------------------------------------------------------------------------------------------
# CPU accounting: who burns the two cores during ingestion


def _cpu_seconds(pid: int | None, *, with_children: bool = False) -> float:
    if pid is None:
        return 0.0
    try:
        process = psutil.Process(pid)
        times = process.cpu_times()
        total = times.user + times.system
        if with_children:
            # PostgreSQL backends are the postmaster's children; exited ones are in children_*.
            total += times.children_user + times.children_system
            for child in process.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    child_times = child.cpu_times()
                    total += child_times.user + child_times.system
    except psutil.Error:
        return 0.0
    return total


def _main_thread_cpu(pid: int | None) -> float:
    """CPU of the service's main thread, which runs the event loop (its thread id is the pid)."""
    if pid is None:
        return 0.0
    with contextlib.suppress(psutil.Error):
        for thread in psutil.Process(pid).threads():
            if thread.id == pid:
                return thread.user_time + thread.system_time
    return 0.0


def cpu_snapshot(service_pid: int | None, pgdir: Path, stub_pid: int | None) -> dict[str, float]:
    info = postmaster_info(pgdir)
    machine = psutil.cpu_times()
    return {
        "service": _cpu_seconds(service_pid),
        "service_loop_thread": _main_thread_cpu(service_pid),
        "postgres": _cpu_seconds(info["pid"] if info else None, with_children=True),
        "stub": _cpu_seconds(stub_pid),
        "benchmark": _cpu_seconds(os.getpid()),
        "machine_busy": machine.user + machine.system + machine.nice + getattr(machine, "irq", 0.0)
        + getattr(machine, "softirq", 0.0),
        "machine_total": sum(machine),
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The ingestion run, over HTTP


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _epoch(value: str | None) -> float | None:
    return dt.datetime.fromisoformat(value).timestamp() if value else None


async def run_ingestion(
    base: str,
    key: str,
    docs: Sequence[tuple[str, str]],
    args: argparse.Namespace,
    resources: Resources,
) -> dict[str, Any]:
    if resources.stub is None or resources.service is None:
        raise BenchError("the stub and the service must be running")
    limits = httpx.Limits(
        max_connections=args.post_concurrency + 4, max_keepalive_connections=args.post_concurrency + 4
    )
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(
            base_url=base, headers=headers, timeout=60.0, limits=limits, trust_env=False
        ) as api,
        httpx.AsyncClient(base_url=resources.stub.root, timeout=10.0, trust_env=False) as stub,
    ):
        created = await api.post("/api/knowledge", json={"title": "Ingestion benchmark"})
        if created.status_code != 201:
            raise BenchError(
                f"creating the knowledge base answered {created.status_code}: {created.text[:300]}"
            )
        kb_id = created.json()["id"]
        (await stub.post("/stats/reset")).raise_for_status()

        n = len(docs)
        post_errors: list[str] = []
        post_latencies: list[float] = []
        poll_latencies: list[float] = []
        posting_done = asyncio.Event()
        posted = 0
        semaphore = asyncio.Semaphore(args.post_concurrency)
        cpu_before = cpu_snapshot(resources.service.pid, resources.pgdir, resources.stub.process.pid)
        t0_wall, t0 = time.time(), time.perf_counter()

        async def post(title: str, body: str) -> None:
            nonlocal posted
            async with semaphore:
                started = time.perf_counter()
                try:
                    response = await api.post(
                        f"/api/knowledge/{kb_id}/documents",
                        json={"title": title, "content": body, "content_type": "markdown"},
                    )
                except httpx.HTTPError as exc:
                    post_errors.append(f"{type(exc).__name__}: {exc}")
                    return
                post_latencies.append(time.perf_counter() - started)
                if response.status_code != 202:
                    post_errors.append(f"HTTP {response.status_code}: {response.text[:200]}")
                    return
                posted += 1

        async def post_all() -> float:
            await asyncio.gather(*(post(title, body) for title, body in docs))
            posting_done.set()
            return time.perf_counter() - t0

        async def poll() -> tuple[list[dict[str, Any]], float | None, dict[str, float]]:
            """Poll until every accepted document is ready or failed; None as time = timed out."""
            last_report = 0.0
            while True:
                await asyncio.sleep(args.poll_s)
                started = time.perf_counter()
                response = await api.get(f"/api/knowledge/{kb_id}")
                poll_latencies.append(time.perf_counter() - started)
                response.raise_for_status()
                documents = response.json()["documents"]
                elapsed = time.perf_counter() - t0
                counts = Counter(d["status"] for d in documents)
                finished = counts["ready"] + counts["failed"]
                if elapsed - last_report >= 5.0:
                    last_report = elapsed
                    print(
                        f"  [{elapsed:6.1f} s] posted {posted:>5}/{n}  ready {counts['ready']:>5}  "
                        f"failed {counts['failed']:>3}  processing {counts['processing']:>3}  "
                        f"pending {counts['pending']:>5}",
                        flush=True,
                    )
                if posting_done.is_set() and finished >= posted:
                    cpu_after = cpu_snapshot(
                        resources.service.pid, resources.pgdir, resources.stub.process.pid
                    )
                    return documents, elapsed, cpu_after
                if elapsed > args.timeout_s:
                    cpu_after = cpu_snapshot(
                        resources.service.pid, resources.pgdir, resources.stub.process.pid
                    )
                    return documents, None, cpu_after

        post_s, (documents, observed_s, cpu_after) = await asyncio.gather(post_all(), poll())
        stub_stats = (await stub.get("/stats")).json()
        kb = (await api.get(f"/api/knowledge/{kb_id}")).json()

        failed = [d for d in documents if d["status"] == "failed"]
        failure_reasons: Counter[str] = Counter()
        for doc in failed[:20]:
            detail = (await api.get(f"/api/knowledge/{kb_id}/documents/{doc['id']}")).json()
            failure_reasons[str(detail.get("error"))[:200]] += 1

    ready = [d for d in documents if d["status"] == "ready"]
    ready_at = sorted(t for d in ready if (t := _epoch(d["indexed_at"])) is not None)
    finished_at = [t for d in failed if (t := _epoch(d["updated_at"])) is not None] + ready_at
    # The server's own timestamps give the exact moment the last document finished, independent
    # of the polling interval.
    all_done_s = (max(finished_at) - t0_wall) if finished_at and observed_s is not None else None
    latencies = [
        end - start
        for d in ready
        if (end := _epoch(d["indexed_at"])) is not None and (start := _epoch(d["created_at"])) is not None
    ]
    steady = None
    if len(ready_at) >= 20:
        lo, hi = ready_at[len(ready_at) // 10], ready_at[(len(ready_at) * 9) // 10]
        steady = ((len(ready_at) * 9) // 10 - len(ready_at) // 10) / (hi - lo) if hi > lo else None
    megabytes = sum(len(body.encode()) for _, body in docs) / 1e6
    window = (all_done_s or observed_s or args.timeout_s) or 1.0
    cpu = {
        k: round(cpu_after[k] - cpu_before[k], 2)
        for k in ("service", "service_loop_thread", "postgres", "stub")
    }
    machine_total = cpu_after["machine_total"] - cpu_before["machine_total"]
    cpu["machine_busy_pct"] = round(
        100 * (cpu_after["machine_busy"] - cpu_before["machine_busy"]) / machine_total, 1
    ) if machine_total > 0 else None  # fmt: skip
    cpu["window_s"] = round(observed_s or args.timeout_s, 2)
    # Whatever else ran on the machine meanwhile (other people's tests, servers): a run with a
    # large figure here measured a shared machine and should be repeated.
    ours = sum(cpu_after[k] - cpu_before[k] for k in ("service", "postgres", "stub", "benchmark"))
    cpu["other_processes"] = round(cpu_after["machine_busy"] - cpu_before["machine_busy"] - ours, 1)

    requests, inputs = stub_stats["embedding_requests"], stub_stats["embedding_inputs"]
    return {
        "documents": n,
        "accepted": posted,
        "megabytes": round(megabytes, 3),
        "post_s": round(post_s, 2),
        "post_docs_s": round(posted / post_s, 1) if post_s else None,
        "post_latency_p50_ms": round(1000 * _percentile(post_latencies, 0.5), 1),
        "post_latency_p95_ms": round(1000 * _percentile(post_latencies, 0.95), 1),
        "post_to_all_ready_s": round(all_done_s, 2) if all_done_s is not None else None,
        "post_to_all_ready_polled_s": round(observed_s, 2) if observed_s is not None else None,
        "timed_out": observed_s is None,
        "docs_per_s": round(len(finished_at) / window, 1),
        "mb_per_s": round(megabytes / window, 3),
        "steady_docs_per_s": round(steady, 1) if steady else None,
        "doc_latency_p50_s": round(_percentile(latencies, 0.5), 2),
        "doc_latency_p95_s": round(_percentile(latencies, 0.95), 2),
        "doc_latency_max_s": round(max(latencies), 2) if latencies else None,
        "poll_latency_p50_ms": round(1000 * _percentile(poll_latencies, 0.5), 1),
        "poll_latency_max_ms": round(1000 * max(poll_latencies), 1) if poll_latencies else None,
        "ready": len(ready),
        "failed": len(failed),
        "unfinished": posted - len(ready) - len(failed),
        "post_errors": len(post_errors),
        "post_error_examples": post_errors[:5],
        "failure_reasons": dict(failure_reasons),
        "chunks": kb.get("chunk_count"),
        "chunks_per_doc": round(kb.get("chunk_count", 0) / max(1, len(ready)), 2),
        "embedding_requests": requests,
        "embedding_inputs": inputs,
        "embedding_inputs_per_request": round(inputs / requests, 2) if requests else None,
        "embedding_max_batch": stub_stats["embedding_max_batch"],
        "embedding_max_in_flight": stub_stats["embedding_max_in_flight"],
        "cpu_seconds": cpu,
    }


# ---------------------------------------------------------------------------------------------
# Report


def _line(label: str, text: str) -> None:
    print(f"{label:<19}{text}")


def print_report(result: dict[str, Any]) -> None:
    config, machine = result["config"], result["machine"]
    print()
    print("== ingestion benchmark ==")
    _line(
        "machine",
        f"{machine['nproc']} cpus ({machine['cpu_model']}), {machine['memory_gb']} GB RAM, "
        f"Python {machine['python']}",
    )
    if pg := result.get("postgres"):
        _line("database", f"PostgreSQL {pg['postgresql']}, pgvector {pg['pgvector']} (embedded)")
    _line(
        "settings",
        f"workers {config['workers']}, embedding concurrency {config['embed_concurrency']}, "
        f"embedding delay {config['embed_delay_ms']:g} ms, POST concurrency {config['post_concurrency']}"
        + (f", dimensions {config['dimensions']}" if config.get("dimensions") else "")
        + (", WHAT-IF: HNSW indexes dropped" if config.get("drop_hnsw") else ""),
    )
    if chunking := result.get("chunking"):
        _line(
            "chunking (1 core)",
            f"{chunking['megabytes']:.2f} MB: extract {chunking['extract_mb_s']} MB/s, "
            f"chunk {chunking['chunk_mb_s']} MB/s, extract+chunk {chunking['extract_chunk_mb_s']} MB/s; "
            f"{chunking['chunks']} chunks, {chunking['embed_tokens']} tokens "
            f"(re-tokenising them for the embedder: {chunking['embed_prepare_s']} s)",
        )
    run = result.get("ingestion")
    if not run:
        return
    total = run["post_to_all_ready_s"]
    _line("documents", f"{run['documents']} ({run['megabytes']:.2f} MB), accepted {run['accepted']}")
    _line(
        "POST phase",
        f"{run['post_s']} s ({run['post_docs_s']} docs/s; "
        f"p50 {run['post_latency_p50_ms']} ms, p95 {run['post_latency_p95_ms']} ms)",
    )
    if total is None:
        _line(
            "POST -> all ready", f"TIMED OUT after {config['timeout_s']:g} s ({run['unfinished']} unfinished)"
        )
    else:
        verdict = ""
        if run["documents"] >= 1000:
            verdict = f" - target < {TARGET_S:g} s " + ("met" if total < TARGET_S else "MISSED")
        _line(
            "POST -> all ready",
            f"{total} s (seen by polling at {run['post_to_all_ready_polled_s']} s){verdict}",
        )
    _line(
        "throughput",
        f"{run['docs_per_s']} docs/s overall, {run['steady_docs_per_s']} docs/s steady "
        f"(10th-90th percentile), {run['mb_per_s']} MB/s",
    )
    _line(
        "doc latency",
        f"created -> indexed p50 {run['doc_latency_p50_s']} s, p95 {run['doc_latency_p95_s']} s, "
        f"max {run['doc_latency_max_s']} s",
    )
    _line("KB poll latency", f"p50 {run['poll_latency_p50_ms']} ms, max {run['poll_latency_max_ms']} ms")
    _line("chunks", f"{run['chunks']} ({run['chunks_per_doc']} per document)")
    _line(
        "embedding requests",
        f"{run['embedding_requests']} for {run['embedding_inputs']} inputs = "
        f"{run['embedding_inputs_per_request']} inputs/request (max batch {run['embedding_max_batch']}, "
        f"max in flight {run['embedding_max_in_flight']})",
    )
    cpu = run["cpu_seconds"]
    _line(
        "CPU seconds",
        f"service {cpu['service']} (event-loop thread {cpu['service_loop_thread']}), "
        f"postgres {cpu['postgres']}, stub {cpu['stub']} "
        f"in {cpu['window_s']} s; machine busy {cpu['machine_busy_pct']} %, "
        f"other processes {cpu['other_processes']} s",
    )
    _line(
        "failures",
        f"{run['failed']} failed, {run['unfinished']} unfinished, {run['post_errors']} POST errors",
    )
    if timings := result.get("service_timings"):
        loop = timings["event_loop"]
        _line(
            "event loop",
            f"Python code in {loop['python_fraction']:.0%} of samples; lag p50 {loop['lag_ms']['p50']} ms, "
            f"p99 {loop['lag_ms']['p99']} ms, max {loop['lag_ms']['max']} ms",
        )
        for name, stage in timings["stages"].items():
            print(
                f"  {name:<28} {stage['calls']:>6} calls  mean {stage['mean_ms']:>8} ms  "
                f"max {stage['max_ms']:>8} ms  total {stage['total_s']:>8} s"
            )
        print("  event-loop thread, busy samples by innermost app/ frame:")
        for frame, share in loop["top_app_frame"][:12]:
            print(f"    {share:>6.1%}  {frame}")
    for reason, count in run["failure_reasons"].items():
        print(f"  {count} x {reason}")
    for example in run["post_error_examples"]:
        print(f"  POST: {example}")


# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1000, help="documents to ingest (default 1000)")
    parser.add_argument("--doc-bytes", type=int, default=5000, help="mean document size (default 5000)")
    parser.add_argument("--workers", type=int, default=8, help="INGESTION__WORKERS (default 8)")
    parser.add_argument(
        "--embed-concurrency", type=int, default=8, help="EMBEDDING__MAX_CONCURRENCY (default 8)"
    )
    parser.add_argument(
        "--embed-delay-ms", type=float, default=100.0, help="stub embedding latency (default 100)"
    )
    parser.add_argument("--post-concurrency", type=int, default=16, help="POSTs in flight (default 16)")
    parser.add_argument(
        "--timeout-s", type=float, default=300.0, help="give up waiting after this (default 300)"
    )
    parser.add_argument("--poll-s", type=float, default=1.0, help="knowledge-base poll interval (default 1)")
    parser.add_argument(
        "--worker-poll-s", type=float, default=1.0, help="INGESTION__POLL_INTERVAL_S (default 1)"
    )
    parser.add_argument("--seed", type=int, default=20241121, help="corpus seed")
    parser.add_argument("--log-level", default="WARNING", help="service LOG_LEVEL (default WARNING)")
    parser.add_argument("--repo", type=Path, default=REPO_ROOT, help="checkout whose `app` is measured")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--service-log", type=Path, help="copy the service's log here at the end")
    parser.add_argument(
        "--skip-chunking", action="store_true", help="skip the in-process chunking measurement"
    )
    parser.add_argument(
        "--dimensions", type=int, help="EMBEDDING__OPENAI_DIMENSIONS (default: the model's 1536)"
    )
    parser.add_argument(
        "--drop-hnsw",
        action="store_true",
        help="what-if experiment: drop the service's HNSW indexes after start-up, before ingesting",
    )
    parser.add_argument(
        "--instrument",
        action="store_true",
        help="time the service's ingestion stages (bench/instrumented_serve.py)",
    )
    parser.add_argument(
        "--offline",
        choices=("minilm", "lexical"),
        help="embed in the service with this offline embedder instead of the stub (minilm: the default)",
    )
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temporary folder (debugging)")
    args = parser.parse_args(argv)
    args.repo = args.repo.resolve()
    if args.docs < 1 or args.workers < 1 or args.post_concurrency < 1:
        parser.error("--docs, --workers and --post-concurrency must be at least 1")
    return args


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM takes the same way out as Ctrl-C, through every `finally`.
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if str(args.repo) != str(REPO_ROOT):
        sys.path.insert(0, str(args.repo))  # chunking is measured on the same code as the service
    signal.signal(signal.SIGTERM, _terminate)
    result: dict[str, Any] = {
        "benchmark": "ingestion",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": machine_info(),
        "code": code_version(args.repo),
    }
    started = time.perf_counter()
    print(f"generating {args.docs} documents of ~{args.doc_bytes} bytes (seed {args.seed})", flush=True)
    docs = make_corpus(args.docs, target_bytes=args.doc_bytes, seed=args.seed)
    if not args.skip_chunking:
        print("measuring extract + chunk throughput in-process", flush=True)
        result["chunking"] = measure_chunking(docs, chunk_tokens=500, overlap_tokens=60)

    resources = Resources(Path(tempfile.mkdtemp(prefix="vk-ingest-bench-")), keep_tmp=args.keep_tmp)
    status = 0
    try:
        resources.stub = start_stub_process(0, embed_delay_ms=args.embed_delay_ms)
        print(f"stub on {resources.stub.base_url}; embedded PostgreSQL in {resources.pgdir}", flush=True)
        env = service_env(resources.pgdir, resources.stub, args)
        key = create_org(args.repo, env, resources.tmp / "create-org.log")
        base = start_service(args.repo, env, free_port(), resources, instrument=args.instrument)
        result["postgres"] = postgres_versions(resources.pgdir)
        if args.drop_hnsw:
            left = psql(resources.pgdir, DROP_HNSW_SQL).strip()
            print(f"what-if: dropped the HNSW indexes (left: {left})", flush=True)
        print(f"service on {base} (workers {args.workers}); posting {args.docs} documents", flush=True)
        result["ingestion"] = asyncio.run(run_ingestion(base, key, docs, args, resources))
        run = result["ingestion"]
        if args.instrument:
            resources.stop_service()  # the wrapper writes its timings on exit
            timings = resources.tmp / "timings.json"
            if timings.exists():
                result["service_timings"] = json.loads(timings.read_text())
        if run["timed_out"] or run["failed"] or run["post_errors"]:
            status = 1
    except (BenchError, httpx.HTTPError) as exc:
        print(f"benchmark failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        log = resources.tmp / "service.log"
        if not isinstance(exc, BenchError) and log.exists():
            print(f"service log (tail):\n{_tail(log.read_text(errors='replace'))}", file=sys.stderr)
        result["error"] = f"{type(exc).__name__}: {exc}"
        status = 2
    except KeyboardInterrupt:
        print("interrupted; cleaning up", file=sys.stderr)
        result["error"] = "interrupted"
        status = 130
    finally:
        if args.service_log and (resources.tmp / "service.log").exists():
            args.service_log.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(resources.tmp / "service.log", args.service_log)
        resources.close()
    finish_report(result, started, print_report, args.json)
    return status


if __name__ == "__main__":
    sys.exit(main())
