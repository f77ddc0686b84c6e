"""The ingestion worker process ``vk serve`` runs beside the service (app.ingestion.supervisor):
a real ``vk worker`` child on the test database, woken by PostgreSQL's notification."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from app.ingestion.supervisor import WorkerProcess, lower_priority, worker_command
from app.ingestion.worker import LISTENER_NAME
from tests.helpers import create_kb, create_text_doc

# Liveness bounds, not speed: a child that never gets there has a bug, however slow the machine.
PATIENCE_S = 90.0


def child_env() -> dict[str, str]:
    # An hour between polls: a document is picked up only if the notification wakes the worker.
    return {
        **os.environ,
        "EMBEDDING__PROVIDER": "lexical",
        "INGESTION__POLL_INTERVAL_S": "3600",
        "LOG_LEVEL": "WARNING",
    }


@pytest.fixture
def worker(database_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(database_url, concurrency=2, nice=7, env=child_env())
    process.start()
    try:
        yield process
    finally:
        process.stop()


async def wait_for_status(engine, doc_id: str, status: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        async with engine.connect() as conn:
            found = (
                await conn.execute(text("SELECT status FROM documents WHERE id = :id"), {"id": doc_id})
            ).scalar_one()
        if found == status:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"document {doc_id} still {found!r}, not {status!r}, after {PATIENCE_S:g} s")


async def listeners(engine) -> int:
    async with engine.connect() as conn:
        statement = text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name")
        return (await conn.execute(statement, {"name": LISTENER_NAME})).scalar_one()


async def wait_listening(engine, count: int) -> None:
    for _ in range(int(PATIENCE_S * 10)):
        if await listeners(engine) == count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not {count} listening worker(s) after {PATIENCE_S:g} s")


def wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"not {what} after {PATIENCE_S:g} s")


def test_the_command_is_our_worker_told_its_parent():
    assert worker_command(concurrency=3, nice=10, parent_pid=42) == [
        sys.executable, "-m", "app.cli", "worker", "--concurrency", "3", "--nice", "10", "--parent-pid", "42",
    ]  # fmt: skip


async def test_a_queued_document_is_ingested_by_the_worker_process(worker, client, org, engine):
    # The app under test runs no workers of its own (run_workers=False): only the child can do
    # it, and, started before the document exists and polling hourly, only when notified.
    await wait_listening(engine, 1)
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content="# Hours\nWe open at nine.")

    await wait_for_status(engine, doc["id"], "ready")

    async with engine.connect() as conn:
        chunks = (
            await conn.execute(text("SELECT text FROM chunks WHERE document_id = :id"), {"id": doc["id"]})
        ).scalars()
        assert list(chunks) == ["# Hours\nWe open at nine."]
    assert os.getpriority(os.PRIO_PROCESS, worker.pid) == 7
    assert worker.restarts == 0


async def test_a_worker_that_dies_is_restarted_and_keeps_ingesting(worker, client, org, engine):
    first = worker.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    await asyncio.to_thread(wait_until, lambda: worker.restarts == 1 and worker.pid != first, "restarted")
    await wait_listening(engine, 1)

    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content="Parking is free after six.")
    await wait_for_status(engine, doc["id"], "ready")
    assert os.getpriority(os.PRIO_PROCESS, worker.pid) == 7


async def test_stop_ends_the_worker_cleanly(database_url, engine):
    process = WorkerProcess(database_url, concurrency=1, nice=0, env=child_env())
    process.start()
    pid = process.pid
    # Running (its signal handlers are installed before it listens), not still starting.
    await wait_listening(engine, 1)
    assert process.stop() == 0  # SIGTERM is a clean stop, not a kill
    assert process.restarts == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert await listeners(engine) == 0


def test_a_worker_whose_service_was_killed_stops_by_itself(database_url, tmp_path):
    """SIGKILL gives the service no chance to stop its worker; the worker notices."""
    pid_file = tmp_path / "worker.pid"
    service = subprocess.Popen(
        [
            sys.executable, "-c",
            "import os, subprocess, sys, time\n"
            f"cmd = [sys.executable, '-m', 'app.cli', 'worker', '--parent-pid', str(os.getpid())]\n"
            f"child = subprocess.Popen(cmd)\n"
            f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
            "time.sleep(600)\n",
        ],
        env={**child_env(), "DATABASE_URL": database_url},
    )  # fmt: skip
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text() != "", "started")
        worker_pid = int(pid_file.read_text())
        service.kill()
        service.wait()

        def gone() -> bool:
            # Exited: reaped by init, or a zombie where PID 1 does not reap (containers).
            try:
                return Path(f"/proc/{worker_pid}/stat").read_text().split(") ")[1][0] == "Z"
            except FileNotFoundError:
                return True

        wait_until(gone, "stopped")
    finally:
        service.kill()


def test_priority_is_only_ever_lowered():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lower_priority(5, child.pid)
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == 5
        lower_priority(3, child.pid)  # a process already nicer keeps its niceness
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == 5
    finally:
        child.kill()
        child.wait()
