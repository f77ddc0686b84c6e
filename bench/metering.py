"""CPU and load metering: which process used how much CPU during a phase, how busy the rest of
the machine was (this machine is shared), and waiting for a quieter moment."""

from __future__ import annotations

import contextlib
import os
import platform
import threading
import time
from pathlib import Path
from typing import Any

import psutil


def machine_info() -> dict[str, Any]:
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        return [float("nan")] * 3


def _busy(times: Any) -> float:
    return float(times.user + times.system + times.nice + getattr(times, "irq", 0.0))


def _tree_cpu(pid: int | None) -> float:
    """CPU seconds of a process and its living children (PostgreSQL backends, pool workers)."""
    if pid is None:
        return 0.0
    try:
        process = psutil.Process(pid)
        times = process.cpu_times()
        total = times.user + times.system + times.children_user + times.children_system
        for child in process.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child_times = child.cpu_times()
                total += child_times.user + child_times.system
    except psutil.Error:
        return 0.0
    return float(total)


def _main_thread_cpu(pid: int | None) -> float:
    """CPU of a process's main thread (its thread id is the pid): the service's event loop."""
    if pid is None:
        return 0.0
    with contextlib.suppress(psutil.Error):
        for thread in psutil.Process(pid).threads():
            if thread.id == pid:
                return float(thread.user_time + thread.system_time)
    return 0.0


class CpuMeter:
    """CPU seconds per component between ``start`` and ``stop``; what is left of the machine's busy
    time after our own processes is "foreign" load (other benchmarks or tests on the machine)."""

    def __init__(self, pids: dict[str, int | None], *, loop_thread_of: str | None = None) -> None:
        """``loop_thread_of``: also meter that process's main thread, its event loop."""
        self.pids = pids
        self.loop_thread_of = loop_thread_of
        self._before: dict[str, float] = {}
        self._t0 = 0.0
        self._load0: list[float] = []
        self._max_load = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _snapshot(self) -> dict[str, float]:
        snap = {name: _tree_cpu(pid) for name, pid in self.pids.items()}
        own = psutil.Process().cpu_times()
        snap["bench"] = own.user + own.system  # this process only; drivers report their own CPU
        snap["_machine"] = _busy(psutil.cpu_times())
        if self.loop_thread_of:
            snap["_loop_thread"] = _main_thread_cpu(self.pids.get(self.loop_thread_of))
        return snap

    def _watch_load(self) -> None:
        while not self._stop.wait(1.0):
            self._max_load = max(self._max_load, loadavg()[0])

    def start(self) -> CpuMeter:
        self._before = self._snapshot()
        self._t0 = time.perf_counter()
        self._load0 = loadavg()
        self._max_load = self._load0[0]
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch_load, daemon=True)
        self._thread.start()
        return self

    def stop(self, extra_cpu_s: dict[str, float] | None = None) -> dict[str, Any]:
        """``extra_cpu_s``: CPU seconds that helper processes (drivers, generators) report for the
        same window; they count as ours, not as foreign load."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        after = self._snapshot()
        wall = time.perf_counter() - self._t0
        used = {k: after[k] - self._before.get(k, 0.0) for k in after}
        used.update(extra_cpu_s or {})
        ours = sum(v for k, v in used.items() if not k.startswith("_"))
        machine = used.pop("_machine")
        if self.loop_thread_of:
            used[f"{self.loop_thread_of}_loop_thread"] = used.pop("_loop_thread")
        cores = {k: round(v / wall, 2) for k, v in used.items()} if wall > 0 else {}
        return {
            "wall_s": round(wall, 2),
            "cpu_s": {k: round(v, 2) for k, v in used.items()},
            "cores": cores,
            "machine_cores_busy": round(machine / wall, 2) if wall > 0 else None,
            # Clock skew between the two kinds of counters can make this slightly negative.
            "foreign_cores": round(max(0.0, machine - ours) / wall, 2) if wall > 0 else None,
            "loadavg_start": self._load0,
            "loadavg_end": loadavg(),
            "loadavg_max_1m": round(max(self._max_load, loadavg()[0]), 2),
        }


def foreign_load(pids: dict[str, int | None], seconds: float = 3.0) -> dict[str, Any]:
    """How busy the machine is with work that is not ours, measured over ``seconds``."""
    meter = CpuMeter(pids).start()
    time.sleep(seconds)
    return meter.stop()


def wait_for_quiet(
    pids: dict[str, int | None], *, max_foreign_cores: float, max_wait_s: float
) -> dict[str, Any]:
    """Wait (bounded) until other processes use less than ``max_foreign_cores``; returns the last
    measurement with ``quiet`` set accordingly."""
    deadline = time.monotonic() + max_wait_s
    while True:
        sample = foreign_load(pids)
        quiet = (sample["foreign_cores"] or 0.0) <= max_foreign_cores
        if quiet or time.monotonic() >= deadline:
            sample["quiet"] = quiet
            return sample
        print(
            f"  machine busy: other processes use {sample['foreign_cores']} cores "
            f"(loadavg {sample['loadavg_end'][0]}); waiting",
            flush=True,
        )


def speed_probe(repeat: int = 5) -> float:
    """Milliseconds a fixed pure-Python workload takes, best of ``repeat``: the machine's speed
    at that moment. The development VM's host slows it by a third to a half at times, with
    no process here using more CPU and no steal time reported; no change to the service
    touches this figure, so runs and phases measured at different speeds can be told apart."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        total = 0
        for i in range(200_000):
            total += i * i % 7
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 2)
