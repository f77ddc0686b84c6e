"""Ingestion beside the service: the ``vk worker`` process ``vk serve`` starts and stops.

Parsing, chunking, token counting and embedding are CPU work in Python. Run on the
service's event loop (or its threads, which share the GIL) they held every live call for
as long as a large document took: ``query_knowledge`` p99 went from 9 ms to 1.6 s while a
16.8 MB file ingested. In their own process, at a lower CPU priority, they take only the CPU
the calls leave over. Documents reach the worker through the queue in PostgreSQL, as they
reach any ``vk worker``, woken at once by a notification (``INGESTION_CHANNEL``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping

log = logging.getLogger(__name__)

# Restart delays after unexpected exits: quick after a one-off crash, never a busy loop.
RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)
# A process that ran this long before dying starts the backoff afresh.
HEALTHY_RUN_S = 60.0


def lower_priority(nice: int, pid: int = 0) -> None:
    """Run process ``pid`` (0: this one) at niceness ``nice`` at least; never raises it back."""
    current = os.getpriority(os.PRIO_PROCESS, pid)
    if current < nice:
        os.setpriority(os.PRIO_PROCESS, pid, nice)


def worker_command(*, concurrency: int, nice: int, parent_pid: int) -> list[str]:
    return [
        sys.executable, "-m", "app.cli", "worker",
        "--concurrency", str(concurrency), "--nice", str(nice), "--parent-pid", str(parent_pid),
    ]  # fmt: skip


class WorkerProcess:
    """One ``vk worker`` child, restarted with backoff if it exits while the service runs.

    The child lowers its own priority (``--nice``) and stops by itself if this process dies
    without stopping it (``--parent-pid``), so a killed service leaves no orphan ingesting.
    """

    def __init__(
        self, database_url: str, *, concurrency: int, nice: int, env: Mapping[str, str] | None = None
    ) -> None:
        self.nice = nice
        self.command = worker_command(concurrency=concurrency, nice=nice, parent_pid=os.getpid())
        # The child must use the database this process resolved (the embedded server is
        # already running), whatever its own environment would pick.
        self.env = {**(env if env is not None else os.environ), "DATABASE_URL": database_url}
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._monitor: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        self._spawn()
        self._monitor = threading.Thread(target=self._watch, name="ingestion-worker-monitor", daemon=True)
        self._monitor.start()

    def stop(self, grace_s: float = 30.0) -> int | None:
        """SIGTERM, then ``grace_s`` for the documents in hand to finish or be released."""
        with self._lock:
            self._stopping.set()
            process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(grace_s)
            except subprocess.TimeoutExpired:
                log.warning("ingestion worker %d did not stop within %.0f s; killed", process.pid, grace_s)
                process.kill()
                process.wait(5)
        if self._monitor is not None:
            self._monitor.join(5)
        return process.returncode

    def __enter__(self) -> WorkerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self) -> bool:
        with self._lock:
            if self._stopping.is_set():
                return False
            # Inherit stdout/stderr: the worker's JSON log lines join the service's.
            self.process = subprocess.Popen(self.command, env=self.env)  # noqa: S603 - our own CLI
            # At once, not when the child gets to it: its start-up (imports, the embedding
            # model) is CPU work too.
            with contextlib.suppress(ProcessLookupError):  # died at once: the monitor says so
                lower_priority(self.nice, self.process.pid)
        log.info("ingestion worker started (pid %d)", self.process.pid)
        return True

    def _watch(self) -> None:
        failures = 0
        while True:
            process = self.process
            assert process is not None
            started = time.monotonic()
            code = process.wait()
            if self._stopping.is_set():
                return
            failures = 0 if time.monotonic() - started >= HEALTHY_RUN_S else failures + 1
            delay = RESTART_BACKOFF_S[min(failures, len(RESTART_BACKOFF_S)) - 1] if failures else 0.0
            log.warning(
                "ingestion worker %d exited with status %s; restarting in %.0f s", process.pid, code, delay
            )
            if self._stopping.wait(delay):
                return
            if not self._spawn():
                return
            self.restarts += 1
