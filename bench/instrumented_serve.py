"""``vk serve`` with timers around the ingestion stages, for finding the bottleneck.

Nothing in ``app/`` changes: this launcher wraps a few functions of the already-imported modules
(``Ingestor.claim/_extract/_embed/_swap/process``, ``chunk_sections``, ``vector_text``, the
embedder's HTTP request and response validation, the pool's connection checkout), samples the
event-loop thread's stack every few milliseconds, measures event-loop lag, and writes everything
as JSON to ``$VK_BENCH_TIMINGS`` when the service exits. ``python -m bench.ingest --instrument`` uses it
in place of ``python -m app.cli serve``; by hand::

    VK_BENCH_TIMINGS=/tmp/t.json .venv/bin/python bench/instrumented_serve.py serve --port 8010

The wrappers cost a few microseconds per call and the sampler about 1 % of a core, so absolute
throughput drops slightly; the proportions are what this is for.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import gc
import json
import os
import re
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

_STDLIB = re.compile(r"^.*/lib/python3\.\d+/")
SAMPLE_INTERVAL_S = 0.005
LAG_INTERVAL_S = 0.01
# With uvloop (litestar[standard] installs it) the loop itself is C code: a sample whose
# innermost Python frame is asyncio.run means "waiting in epoll, or inside uvloop/asyncpg C code",
# which sampling Python stacks cannot tell apart. Busy Python work shows as deeper frames.
LOOP_FRAMES = frozenset({"asyncio/runners.py:run", "selectors.py:select", "asyncio/base_events.py:_run_once"})


class Timings:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        # name -> [calls, total wall s, max wall s, total thread-CPU s]
        self.stages: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
        self.loop_leaf: Counter[str] = Counter()
        self.loop_app: Counter[str] = Counter()
        self.loop_samples = 0
        self.loop_idle = 0
        self.lags: list[float] = []
        self.stalls: list[tuple[float, int]] = []  # (s since first claim, ms) for lags > 50 ms
        self.first_claim: float | None = None
        self.last_finish: float | None = None

    def record(self, name: str, wall: float, cpu: float = 0.0) -> None:
        with self.lock:
            entry = self.stages[name]
            entry[0] += 1
            entry[1] += wall
            entry[2] = max(entry[2], wall)
            entry[3] += cpu

    def dump(self, path: Path) -> None:
        lags = sorted(self.lags)

        def pct(q: float) -> float:
            return round(1000 * lags[min(len(lags) - 1, int(q * len(lags)))], 2) if lags else 0.0

        busy = self.loop_samples - self.loop_idle
        data = {
            "window_s": round((self.last_finish or 0) - (self.first_claim or 0), 2),
            "stages": {
                name: {
                    "calls": int(calls),
                    "total_s": round(total, 3),
                    "mean_ms": round(1000 * total / calls, 2) if calls else 0.0,
                    "max_ms": round(1000 * peak, 1),
                    "thread_cpu_s": round(cpu, 3),
                }
                for name, (calls, total, peak, cpu) in sorted(self.stages.items())
            },
            "event_loop": {
                "samples": self.loop_samples,
                # Share of samples running Python code above the loop (a lower bound on busy).
                "python_fraction": round(busy / self.loop_samples, 3) if self.loop_samples else None,
                "stalls_over_50ms": self.stalls[:50],
                "lag_ms": {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": pct(1.0)},
                # Where the loop thread was when it was not waiting in select(): innermost frame,
                # and innermost frame inside app/ (what the service's own code was doing).
                "top_leaf": [[k, round(v / max(1, busy), 3)] for k, v in self.loop_leaf.most_common(25)],
                "top_app_frame": [[k, round(v / max(1, busy), 3)] for k, v in self.loop_app.most_common(25)],
            },
        }
        path.write_text(json.dumps(data, indent=2) + "\n")


TIMINGS = Timings()


def _timed_async(owner: Any, attr: str, name: str) -> None:
    original = getattr(owner, attr)

    @functools.wraps(original)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            TIMINGS.record(name, time.perf_counter() - started)

    setattr(owner, attr, timed)


def _timed_sync(owner: Any, attr: str, name: str) -> None:
    original = getattr(owner, attr)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            # Thread CPU below wall time in a worker thread = time spent waiting for the GIL.
            TIMINGS.record(name, time.perf_counter() - started, time.thread_time() - cpu)

    setattr(owner, attr, timed)


def _timed_connection(module: Any) -> None:
    """Time the pool checkout separately from the statements run on the connection."""
    original: Callable[..., Any] = module.raw_connection

    @contextlib.asynccontextmanager
    async def timed(engine: Any) -> AsyncIterator[Any]:
        started = time.perf_counter()
        async with original(engine) as conn:
            TIMINGS.record("db.checkout", time.perf_counter() - started)
            yield conn

    module.raw_connection = timed


def _frame_name(frame: Any) -> str:
    """``file:function`` with the file relative to site-packages, the stdlib or the repository."""
    code = frame.f_code
    path = code.co_filename
    if "/site-packages/" in path:
        path = path.split("/site-packages/", 1)[1]
    elif "/app/" in path:
        path = "app/" + path.split("/app/", 1)[1]
    else:
        path = _STDLIB.sub("", path)
    return f"{path}:{code.co_name}"


def _sampler(main_id: int, stop: threading.Event) -> None:
    """A poor man's sampling profiler for the event-loop thread (py-spy is not installed here)."""
    while not stop.wait(SAMPLE_INTERVAL_S):
        frame = sys._current_frames().get(main_id)
        if frame is None or TIMINGS.first_claim is None:
            continue  # start-up (imports, migrations) is not what is being measured
        TIMINGS.loop_samples += 1
        if _frame_name(frame) in LOOP_FRAMES:
            TIMINGS.loop_idle += 1
            continue
        TIMINGS.loop_leaf[_frame_name(frame)] += 1
        current = frame
        while current is not None:
            if "/app/" in current.f_code.co_filename:
                TIMINGS.loop_app[f"{_frame_name(current)}:{current.f_lineno}"] += 1
                break
            current = current.f_back


async def _lag_monitor() -> None:
    while True:
        started = time.perf_counter()
        await asyncio.sleep(LAG_INTERVAL_S)
        lag = max(0.0, time.perf_counter() - started - LAG_INTERVAL_S)
        if TIMINGS.first_claim is not None:
            TIMINGS.lags.append(lag)
            if lag > 0.05:
                TIMINGS.stalls.append(
                    (round(time.perf_counter() - TIMINGS.first_claim, 2), round(lag * 1000))
                )


def install() -> None:
    from app.embeddings import openai as openai_embeddings  # noqa: PLC0415 - patched after import
    from app.ingestion import pipeline, worker  # noqa: PLC0415

    ingestor = pipeline.Ingestor
    for attr in ("_extract", "_embed", "_swap", "process"):
        _timed_async(ingestor, attr, f"ingestor.{attr.lstrip('_')}")
    _timed_sync(pipeline, "chunk_sections", "chunk_sections (thread)")
    _timed_sync(pipeline, "extract", "extract (thread)")
    _timed_sync(pipeline, "vector_text", "vector_text (loop)")
    _timed_async(openai_embeddings.OpenAIEmbedder, "embed_documents", "embedder.embed_documents")
    _timed_async(openai_embeddings.OpenAIEmbedder, "_request", "embedder.http_request")
    _timed_sync(openai_embeddings.OpenAIEmbedder, "_validate", "embedder.validate (loop)")
    _timed_connection(pipeline)

    original_claim = ingestor.claim

    async def claim(self: Any, limit: int = 1) -> Any:
        started = time.perf_counter()
        claimed = await original_claim(self, limit)
        TIMINGS.record(
            "ingestor.claim" if claimed else "ingestor.claim (empty)", time.perf_counter() - started
        )
        if claimed and TIMINGS.first_claim is None:
            TIMINGS.first_claim = time.perf_counter()
        return claimed

    ingestor.claim = claim  # type: ignore[method-assign]

    original_process = ingestor.process

    async def process(self: Any, doc: Any) -> Any:
        outcome = await original_process(self, doc)
        TIMINGS.last_finish = time.perf_counter()
        return outcome

    ingestor.process = process  # type: ignore[method-assign]

    original_start = worker.WorkerPool.start

    async def start(self: Any) -> None:
        await original_start(self)
        # Kept on the pool so the task is not garbage-collected; it ends with the loop.
        self._bench_lag = asyncio.create_task(_lag_monitor(), name="bench-lag-monitor")

    worker.WorkerPool.start = start  # type: ignore[method-assign]

    gc_started: dict[str, float] = {}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        # Full collections walk every live object while holding the loop: they show as stalls.
        if phase == "start":
            gc_started["t"] = time.perf_counter()
        elif "t" in gc_started and TIMINGS.first_claim is not None:
            TIMINGS.record(f"gc generation {info['generation']}", time.perf_counter() - gc_started["t"])

    gc.callbacks.append(on_gc)
    stop = threading.Event()
    threading.Thread(target=_sampler, args=(threading.get_ident(), stop), daemon=True, name="sampler").start()
    out = os.environ.get("VK_BENCH_TIMINGS")

    def finish() -> None:
        stop.set()
        if out:
            TIMINGS.dump(Path(out))

    atexit.register(finish)


def main() -> None:
    # Import the CLI first: app/__init__ sets the tiktoken cache folder before anything loads it.
    from app import cli  # noqa: PLC0415

    install()
    sys.argv[0] = "vk"
    cli.main()


if __name__ == "__main__":
    main()
