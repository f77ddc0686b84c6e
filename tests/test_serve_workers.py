"""`vk serve --workers 2`: several processes share the port, and /metrics adds them up."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import REPO
from tests.helpers import free_port, wait_until_up

pytestmark = pytest.mark.timeout(120)


def _health_count(metrics: str) -> float:
    pattern = r'^vk_http_requests_total\{[^}]*path="/health"[^}]*\} ([0-9.e+]+)$'
    return sum(float(v) for v in re.findall(pattern, metrics, flags=re.M))


async def test_two_worker_processes_share_the_port_and_the_metrics(database_url, engine, tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "INGESTION__", "PROMETHEUS"))}
    env.update(
        DATABASE_URL=database_url,
        INGESTION__WORKERS="0",
        LOG_LEVEL="WARNING",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path),
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--no-migrate", "--workers", "2"],
        cwd=REPO,
        env=env,
    )
    try:
        await wait_until_up(f"http://127.0.0.1:{port}", "/ready")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            # The server processes, not multiprocessing's resource tracker (also a python child).
            workers = [
                c for c in psutil.Process(server.pid).children() if "spawn_main" in " ".join(c.cmdline())
            ]
            assert len(workers) == 2
            before = _health_count((await http.get("/metrics")).text)
            # New connections each time, so both processes take some of them.
            for _ in range(40):
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as once:
                    assert (await once.get("/health")).status_code == 200
            after = _health_count((await http.get("/metrics")).text)
        assert after - before == 40
        # Both processes counted requests (one file per process and metric type), and the
        # figure above is their sum.
        writers = {p.stem.rsplit("_", 1)[-1] for p in tmp_path.glob("counter_*.db")}
        assert len(writers) >= 2
    finally:
        server.terminate()
        # The supervisor stops and reaps its server processes on SIGTERM, then exits 0 (a single
        # process re-raises the signal instead: tests/test_faults.py).
        assert server.wait(timeout=40) == 0
    assert [w.is_running() for w in workers] == [False, False]


async def test_access_log_lines_carry_the_request_id(database_url, engine):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "INGESTION__", "PROMETHEUS"))}
    env.update(DATABASE_URL=database_url, INGESTION__WORKERS="0", LOG_LEVEL="INFO")
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--no-migrate"],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
    )
    try:
        await wait_until_up(f"http://127.0.0.1:{port}", "/ready")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            r = await http.get("/health", headers={"X-Request-ID": "call-42"})
            assert r.headers["X-Request-ID"] == "call-42"
    finally:
        server.terminate()
        _, err = server.communicate(timeout=40)
    lines = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    access = [e for e in lines if e["logger"] == "uvicorn.access" and "/health" in e["msg"]]
    assert [e.get("request_id") for e in access] == ["call-42"]


def _ingestion_children(server: subprocess.Popen[bytes]) -> list[psutil.Process]:
    return [c for c in psutil.Process(server.pid).children() if "worker" in c.cmdline()]


async def test_serve_ingests_in_a_worker_process_at_lower_priority(database_url, engine, org):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "INGESTION__", "PROMETHEUS"))}
    # The default isolation, said nowhere: what `vk serve` does out of the box.
    env.update(DATABASE_URL=database_url, INGESTION__WORKERS="2", LOG_LEVEL="WARNING")
    env["EMBEDDING__PROVIDER"] = "lexical"
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--no-migrate"], cwd=REPO, env=env
    )
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_until_up(base, "/ready")
        [worker] = _ingestion_children(server)
        assert worker.cmdline()[-6:] == [
            "--concurrency",
            "2",
            "--nice",
            "10",
            "--parent-pid",
            str(server.pid),
        ]
        assert worker.nice() == 10
        assert psutil.Process(server.pid).nice() == 0
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            kb = (await http.post("/api/knowledge", json={"title": "FAQ"}, headers=org.headers)).json()
            doc = (
                await http.post(
                    f"/api/knowledge/{kb['id']}/documents",
                    json={"title": "Parking", "content": "Free parking is behind the building."},
                    headers=org.headers,
                )
            ).json()
            status = doc["status"]
            for _ in range(900):  # a liveness bound (90 s), not a speed requirement
                if status == "ready":
                    break
                await asyncio.sleep(0.1)
                got = await http.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)
                status = got.json()["status"]
            assert status == "ready"
    finally:
        server.terminate()
        # The worker is stopped before the service exits (by the signal, as uvicorn does), not
        # left to notice on its own that its parent is gone.
        assert server.wait(timeout=60) == -signal.SIGTERM
    assert not worker.is_running()


async def test_inline_isolation_starts_no_worker_process(database_url, engine):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "INGESTION__", "PROMETHEUS"))}
    env.update(DATABASE_URL=database_url, INGESTION__ISOLATION="inline", LOG_LEVEL="WARNING")
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--no-migrate"], cwd=REPO, env=env
    )
    try:
        await wait_until_up(f"http://127.0.0.1:{port}", "/ready")
        assert _ingestion_children(server) == []
    finally:
        server.terminate()
        assert server.wait(timeout=60) == -signal.SIGTERM


def _serve_with_metrics_folder(database_url: str, folder: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "INGESTION__", "PROMETHEUS"))}
    env.update(DATABASE_URL=database_url, INGESTION__WORKERS="0", PROMETHEUS_MULTIPROC_DIR=str(folder))
    command = ["serve", "--port", str(free_port()), "--no-migrate", "--workers", "2"]
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *command],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_metrics_folder_that_cannot_be_used_stops_serve_in_one_line(database_url, tmp_path):
    # Every server process died at start, and uvicorn started them again, for ever.
    not_a_folder = tmp_path / "metrics"
    not_a_folder.write_text("a file")
    result = _serve_with_metrics_folder(database_url, not_a_folder)
    assert (result.returncode, result.stderr.splitlines()[-1]) == (
        1,
        f"error: PROMETHEUS_MULTIPROC_DIR={not_a_folder} cannot be used: File exists",
    )
    # Another program's database there: every /metrics read it and failed; not ours to delete.
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.db").write_bytes(b"SQLite format 3\x00")
    result = _serve_with_metrics_folder(database_url, shared)
    assert (result.returncode, result.stderr.splitlines()[-1]) == (
        1,
        f"error: PROMETHEUS_MULTIPROC_DIR={shared} holds files that are not metrics (notes.db): "
        "give it a folder of its own",
    )
    assert (shared / "notes.db").exists()


async def test_an_earlier_runs_metrics_files_are_cleared_at_start(database_url, engine, tmp_path):
    # prometheus_client reads every file there: one it could not read made /metrics a 500.
    (tmp_path / "counter_999999999.db").write_bytes(b"\x00garbage\xff" * 10)  # no process has it
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "INGESTION__", "PROMETHEUS"))}
    env.update(DATABASE_URL=database_url, INGESTION__WORKERS="0", LOG_LEVEL="WARNING",
               PROMETHEUS_MULTIPROC_DIR=str(tmp_path))  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--no-migrate", "--workers", "2"],
        cwd=REPO,
        env=env,
    )
    try:
        await wait_until_up(f"http://127.0.0.1:{port}", "/ready")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            assert (await http.get("/metrics")).status_code == 200
        assert not (tmp_path / "counter_999999999.db").exists()
    finally:
        server.terminate()
        assert server.wait(timeout=40) == 0
