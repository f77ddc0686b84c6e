"""The one harness every benchmark runs on: a temporary folder, the embedded PostgreSQL,
``vk`` commands, the service process, the OpenAI stub and helper processes (drivers, load
generators), all stopped in reverse order and the folder removed, also after a failure, Ctrl-C
or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psutil

from bench.openai_stub import DEFAULT_ANSWER, StubProcess, free_port, start_stub_process

REPO_ROOT = Path(__file__).resolve().parents[1]


class BenchError(Exception):
    """The benchmark could not run to the end; the message says where it stopped."""


def die_with_parent() -> None:
    # Linux: a child whose benchmark is SIGKILLed gets SIGTERM instead of running on (PR_SET_PDEATHSIG).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def pg_bin(name: str) -> Path:
    # Found without importing pgserver, whose import creates lock and runtime folders.
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise BenchError("pgserver is not installed in this environment")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin" / name


def postmaster_info(pgdir: Path) -> dict[str, Any] | None:
    """pid, port and socket folder from ``postmaster.pid`` (PostgreSQL's documented layout)."""
    try:
        lines = (pgdir / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    if len(lines) < 5 or not lines[0].strip().isdigit():
        return None
    return {"pid": int(lines[0]), "port": int(lines[3] or 5432), "socket_dir": lines[4] or None}


def stop_postgres(pgdir: Path) -> None:
    """Stop the embedded server (``vk`` leaves it running on purpose): ``pg_ctl stop -m fast`` as
    the user pgserver runs it as, else SIGQUIT to the postmaster read from our own data folder."""
    info = postmaster_info(pgdir)
    if info is None or not psutil.pid_exists(info["pid"]):
        return
    user = "pgserver" if os.geteuid() == 0 else None
    try:
        subprocess.run(
            [str(pg_bin("pg_ctl")), "-D", str(pgdir), "-m", "fast", "-w", "-t", "30", "stop"],
            user=user, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=40,
        )  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(info["pid"])
            process.send_signal(signal.SIGQUIT)
            process.wait(10)


def ensure_postgres(pgdir: Path) -> None:
    """Start the folder's server if no one runs it: ``vk create-org`` stops it when it leaves
    as its last user. Started here without clean-up, it runs until ``stop_postgres``."""
    info = postmaster_info(pgdir)
    if info is not None and psutil.pid_exists(info["pid"]):
        return
    from app.db.embedded import import_pgserver  # noqa: PLC0415 - only when it must start

    import_pgserver().get_server(pgdir, cleanup_mode=None)


def postgres_url(pgdir: Path) -> str:
    """The folder's server (started if need be) as a URL for asyncpg and the migrations."""
    ensure_postgres(pgdir)
    info = postmaster_info(pgdir)
    if info is None:
        raise BenchError("the embedded PostgreSQL is not running")
    return f"postgresql://postgres@/postgres?host={info['socket_dir'] or '127.0.0.1'}&port={info['port']}"


async def pg_connect(pgdir: Path) -> asyncpg.Connection:
    return await asyncpg.connect(postgres_url(pgdir))


def service_env(
    pgdir: Path,
    stub_base_url: str,
    *,
    dims: int | None,
    workers: int = 0,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The service's environment: only what the flags say (service settings of the calling shell
    are dropped), rate limits off, OpenAI provider through the stub, quiet logs."""
    prefixes = ("DB__", "EMBEDDING__", "INGESTION__", "QUERY__", "LIMITS__")
    names = {"DATABASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "LOG_LEVEL", "HOST", "PORT"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes) and k.upper() not in names}
    env.update(
        {
            "DB__EMBEDDED_DIR": str(pgdir),
            "OPENAI_API_KEY": "x",
            "OPENAI_BASE_URL": stub_base_url,
            "EMBEDDING__PROVIDER": "openai",
            **({"EMBEDDING__OPENAI_DIMENSIONS": str(dims)} if dims else {}),
            "INGESTION__WORKERS": str(workers),
            "LIMITS__QUERY_PER_MINUTE": "0",
            "LIMITS__QUERY_IN_FLIGHT": "0",
            "LIMITS__MANAGE_PER_MINUTE": "0",
            "LOG_LEVEL": "WARNING",
            "NO_PROXY": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
            **(extra or {}),
        }
    )
    return env


def offline_env(pgdir: Path, *, isolation: str = "process", workers: int = 0) -> dict[str, str]:
    """The defaults of a fresh install (offline: minilm, no key), rate limits off; ``isolation``
    is INGESTION__ISOLATION, with the worker's niceness after a colon (``process:19``)."""
    env = service_env(pgdir, "http://127.0.0.1:9", dims=384, workers=workers)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "EMBEDDING__PROVIDER", "EMBEDDING__OPENAI_DIMENSIONS"):
        env.pop(name, None)
    isolation, _, nice = isolation.partition(":")
    env["INGESTION__ISOLATION"] = isolation
    if nice:
        env["INGESTION__NICE"] = nice
    return env


def vk_command(*args: str, repo: Path = REPO_ROOT) -> list[str]:
    # `python -m app.cli` is `vk`, but resolves `app` from the working directory (another checkout).
    vk = Path(sys.executable).with_name("vk")
    if repo == REPO_ROOT and vk.exists():
        return [str(vk), *args]
    return [sys.executable, "-m", "app.cli", *args]


def wait_ready(process: subprocess.Popen[Any], base: str, log: Path, name: str, timeout_s: float) -> None:
    """Until ``base``/ready answers 200; BenchError (with the log's end) if ``process`` exits
    or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchError(f"{name} exited with status {process.returncode}:\n{tail(log.read_text())}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{base}/ready", timeout=2.0, trust_env=False).status_code == 200:
                return
        time.sleep(0.25)
    raise BenchError(f"{name} was not ready within {timeout_s:g} s:\n{tail(log.read_text())}")


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Harness:
    """Everything a benchmark starts, stopped in reverse order by ``close`` (also on errors,
    Ctrl-C and SIGTERM), and the temporary folder removed."""

    tmp: Path
    keep_tmp: bool = False
    repo: Path = REPO_ROOT  # the checkout whose `app` the service runs
    stub: StubProcess | None = None
    service: subprocess.Popen[bytes] | None = None
    children: list[subprocess.Popen[Any]] = field(default_factory=list)
    extra_pids: dict[str, int] = field(default_factory=dict)  # helpers whose CPU counts as ours
    _logs: list[Any] = field(default_factory=list)

    @classmethod
    def create(cls, prefix: str, *, keep_tmp: bool = False, repo: Path = REPO_ROOT) -> Harness:
        return cls(Path(tempfile.mkdtemp(prefix=prefix)), keep_tmp=keep_tmp, repo=repo)

    @property
    def pgdir(self) -> Path:
        return self.tmp / "postgres"

    def pids(self) -> dict[str, int | None]:
        info = postmaster_info(self.pgdir)
        return {
            "service": self.service.pid if self.service and self.service.poll() is None else None,
            "postgres": info["pid"] if info else None,
            "stub": self.stub.process.pid if self.stub else None,
            **self.extra_pids,
        }

    def start_stub(
        self,
        *,
        embed_delay_ms: float = 0.0,
        chat_delay_ms: float = 0.0,
        dims: int = 1536,
        port: int = 0,
        chat_answer: str = DEFAULT_ANSWER,
    ) -> StubProcess:
        self.stop_stub()
        self.stub = start_stub_process(
            port,
            embed_delay_ms=embed_delay_ms,
            chat_delay_ms=chat_delay_ms,
            dimensions=dims,
            chat_answer=chat_answer,
        )
        return self.stub

    def stop_stub(self) -> None:
        if self.stub is not None:
            self.stub.stop()
            self.stub = None

    def create_org(self, env: dict[str, str], name: str) -> str:
        log = self.tmp / "create-org.log"
        # Output to a file, not a pipe: the daemonised PostgreSQL could inherit and hold a pipe.
        with log.open("w") as out:
            done = subprocess.run(
                vk_command("create-org", name, repo=self.repo), cwd=self.repo, env=env, stdout=out,
                stderr=subprocess.STDOUT, timeout=180, check=False, preexec_fn=die_with_parent,
            )  # fmt: skip
        text = log.read_text()
        match = re.search(r"admin key:\s+(\S+)", text)
        if done.returncode != 0 or match is None:
            raise BenchError(f"vk create-org failed (status {done.returncode}):\n{tail(text)}")
        return match.group(1)

    def start_service(
        self, env: dict[str, str], *, timeout_s: float = 300.0, wrapper: Path | None = None
    ) -> tuple[str, float]:
        """``vk serve`` on a free port, or the same command through a ``wrapper`` script (the
        instrumented one); returns its base URL and the seconds until /ready."""
        self.stop_service()
        port = free_port()
        log = self.tmp / f"service-{port}.log"
        out = log.open("wb")
        self._logs.append(out)
        started = time.perf_counter()
        command = vk_command("serve", "--port", str(port), "--host", "127.0.0.1", repo=self.repo)
        if wrapper is not None:
            command = [sys.executable, str(wrapper), *command[-5:]]
        self.service = subprocess.Popen(
            command, cwd=self.repo, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=die_with_parent,  # noqa: PLW1509
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        wait_ready(self.service, base, log, "vk serve", timeout_s)
        return base, round(time.perf_counter() - started, 2)

    def service_log(self) -> str:
        logs = sorted(self.tmp.glob("service-*.log"), key=lambda p: p.stat().st_mtime)
        return logs[-1].read_text(errors="replace") if logs else ""

    def stop_service(self) -> None:
        process, self.service = self.service, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)  # uvicorn's graceful shutdown
        try:
            process.wait(40)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def spawn(
        self, command: list[str], log_name: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """A helper process (driver, load generator, feeder, worker), stopped by ``close`` if still
        running."""
        out = (self.tmp / log_name).open("wb")
        self._logs.append(out)
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True, preexec_fn=die_with_parent,  # noqa: PLW1509
        )  # fmt: skip
        self.children.append(process)
        return process

    def spawn_driver(
        self, module: str, role: str, config: dict[str, Any], name: str
    ) -> tuple[subprocess.Popen[str], Path]:
        """``python -m <module> <role> config out``: a driver or generator of this benchmark in its
        own process, returned once it says "ready" (it then waits for "go" on stdin, or starts on
        its own); it writes its figures to ``out``."""
        config_path = self.tmp / f"{name}.json"
        out = self.tmp / f"{name}.out.json"
        config_path.write_text(json.dumps(config))
        process = subprocess.Popen(
            [sys.executable, "-m", module, role, str(config_path), str(out)],
            cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        self.children.append(process)
        assert process.stdout is not None
        said = process.stdout.readline().strip()
        if said != "ready":
            process.wait(30)
            raise BenchError(f"{name} did not start (said {said!r}, status {process.returncode})")
        return process, out

    def fetchrow(self, sql: str, *args: Any) -> dict[str, Any]:
        """One row of a query on the benchmark's database, from synchronous code."""

        async def run() -> dict[str, Any]:
            conn = await pg_connect(self.pgdir)
            try:
                return dict(await conn.fetchrow(sql, *args) or {})
            finally:
                await conn.close()

        return asyncio.run(run())

    def stop_children(self) -> None:
        for process in self.children:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)
        self.children.clear()

    def close(self) -> None:
        steps = (
            ("helpers", self.stop_children),
            ("service", self.stop_service),
            ("postgres", lambda: stop_postgres(self.pgdir)),
            ("stub", self.stop_stub),
            ("temp folder", self._remove_tmp),
        )
        for name, step in steps:
            try:
                step()
            except Exception as exc:
                print(f"warning: could not stop {name}: {exc}", file=sys.stderr)

    def _remove_tmp(self) -> None:
        for handle in self._logs:
            handle.close()
        if self.keep_tmp:
            print(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def run_driver(
    work: Callable[[dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]],
    paths: Sequence[Path],
    *,
    fast_loop: bool = True,
) -> int:
    """The child's side of ``Harness.spawn_driver``: read the config, run ``work`` (on uvloop when
    it is installed and ``fast_loop``), write what it returns."""
    config_path, out_path = paths
    config = json.loads(config_path.read_text())
    if fast_loop:
        with contextlib.suppress(ImportError):
            import uvloop  # noqa: PLC0415 - optional

            uvloop.install()
    out_path.write_text(json.dumps(asyncio.run(work(config))))
    return 0


def terminate_on_sigterm() -> None:
    """SIGTERM takes the same way out as Ctrl-C, through every ``finally``."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


async def create_query_key(base: str, admin_key: str) -> str:
    async with httpx.AsyncClient(base_url=base, timeout=30.0, trust_env=False) as client:
        response = await client.post(
            "/api/keys",
            json={"role": "query", "name": "benchmark voice runtime"},
            headers={"Authorization": f"Bearer {admin_key}"},
        )
        if response.status_code not in (200, 201):
            raise BenchError(f"creating a query key answered {response.status_code}: {response.text[:300]}")
        key: str = response.json()["key"]
        return key


def service_setting(text: str) -> tuple[str, str]:
    """An argparse type: ``NAME=VALUE``, a setting for the service (--service-env)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def add_service_env_argument(parser: argparse.ArgumentParser) -> None:
    """``--service-env NAME=VALUE`` (repeatable): settings passed to the benchmarked service."""
    parser.add_argument(
        "--service-env",
        action="append",
        type=service_setting,
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the service, e.g. QUERY__VECTOR_CACHE_MB=0 (repeatable)",
    )


async def alter_system(pgdir: Path, settings: dict[str, str]) -> None:
    conn = await pg_connect(pgdir)
    try:
        for name, value in settings.items():
            if not re.fullmatch(r"[a-z_]+", name) or not re.fullmatch(r"[A-Za-z0-9_.]+", value):
                raise BenchError(f"refusing PostgreSQL setting {name}={value}")
            await conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
    finally:
        await conn.close()


@dataclass
class Outcome:
    """A benchmark's exit status: 0, 1 when a phase saw errors, 2 when it failed, 130 when
    interrupted."""

    status: int = 0


@contextlib.contextmanager
def reported_failure(
    harness: Harness, result: dict[str, Any], *, errors: tuple[type[Exception], ...] = ()
) -> Iterator[Outcome]:
    """The body of a benchmark's main: a failure or an interrupt is printed, with the tail of
    the service's log, and kept in ``result``; the harness is closed either way, and the
    caller's report follows."""
    outcome = Outcome()
    failures: tuple[type[Exception], ...] = (BenchError, OSError, *errors)
    try:
        yield outcome
    except failures as exc:
        print(f"benchmark failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(f"service log (tail):\n{tail(harness.service_log())}", file=sys.stderr)
        result["error"] = f"{type(exc).__name__}: {exc}"
        outcome.status = 2
    except KeyboardInterrupt:
        print("interrupted; cleaning up", file=sys.stderr)
        result["error"] = "interrupted"
        outcome.status = 130
    finally:
        harness.close()
