"""A first run of `vk serve` as a new user sees it: the start-up text on stdout, no warning,
and the embedded PostgreSQL stopped with the service."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from app.config import Settings
from app.db.embedded import embedded_status
from app.startup import startup_text
from tests.conftest import REPO
from tests.helpers import free_port, wait_until_up

pytestmark = pytest.mark.timeout(120)


async def test_a_first_run_says_what_it_runs_and_stops_its_database_on_sigterm(tmp_path):
    folder = tmp_path / "pg"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "DATABASE_URL", "INGESTION__"))}
    env.pop("XDG_RUNTIME_DIR", None)
    env.update(
        DB__EMBEDDED_DIR=str(folder),
        EMBEDDING__PROVIDER="lexical",  # the text names it; minilm would only add its build time
        INGESTION__WORKERS="0",
        TMPDIR=str(tmp_path),
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        try:
            # A liveness bound (a fresh PostgreSQL is initialised first), generous for a
            # loaded 2-core machine; a server that never comes up says why.
            await wait_until_up(f"http://127.0.0.1:{port}", "/ready", attempts=900)
        except AssertionError:
            server.kill()
            out, err = server.communicate(timeout=60)
            raise AssertionError(f"vk serve never became ready:\n{out[-2000:]}\n{err[-4000:]}") from None
        postmaster = psutil.Process(embedded_status(folder).pid)
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    expected = startup_text(
        Settings(
            _env_file=None,
            db={"embedded_dir": folder},
            embedding={"provider": "lexical"},
            ingestion={"workers": 0},
        ),  # type: ignore[call-arg]
        database_url="",
        host="127.0.0.1",
        port=port,
        organisations=0,
    )
    assert out == f"{expected}\nStopped the embedded PostgreSQL in {folder.resolve()}.\n"
    assert server.returncode == -signal.SIGTERM
    assert [line for line in err.splitlines() if not line.startswith("{")] == []  # JSON logs only
    assert not postmaster.is_running() or postmaster.status() == psutil.STATUS_ZOMBIE
