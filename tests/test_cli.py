"""The command line: every text written for it reaches the reader whole, and a mistake in
its input is one line that says what is wrong."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from app.cli import cli
from app.config import PROJECT_ROOT, get_settings
from tests.helpers import free_port, wait_until_up


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found: list[tuple[tuple[str, ...], Any]] = []
    for name, command in group.commands.items():
        found.append(((*prefix, name), command))
        if isinstance(command, typer.core.TyperGroup):
            found += _commands(command, (*prefix, name))
    return found


def _flat(text: str) -> str:
    # Help is wrapped to the terminal's width: compare the words alone.
    return " ".join(text.split())


COMMANDS = _commands(typer.main.get_command(cli))


def test_every_command_is_checked():
    assert sorted(" ".join(path) for path, _ in COMMANDS) == [
        "create-org",
        "db",
        "db status",
        "db stop",
        "downgrade",
        "eval",
        "migrate",
        "replay",
        "serve",
        "sync",
        "worker",
    ]


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(path) for path, _ in COMMANDS])
def test_help_shows_every_text_whole(path, command):
    """At 80 columns, as a terminal opens. Rich markup dropped square brackets with what they
    held (`vk eval --help` said "Documents folder ." for "Documents folder [docs/ beside
    DATASET]."), and rich's tables cut PROMETHEUS_MULTIPROC_DIR to "PROMETHEUS_MULTIPROC_D…"."""
    result = CliRunner().invoke(cli, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    shown = _flat(result.output)
    texts = [command.help or ""]
    texts += [p.help for p in command.params if getattr(p, "help", None) and not getattr(p, "hidden", False)]
    assert [text for text in texts if _flat(text) not in shown] == []


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    """get_settings() read again from the environment the test gives the command."""
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_serve_stops_at_a_broken_prompt_file_with_its_message(tmp_path, fresh_settings):
    prompts = Path(shutil.copytree(PROJECT_ROOT / "prompts", tmp_path / "prompts"))
    broken = prompts / "default" / "grounding.user.md"
    broken.write_text(
        '+++\nversion = "9"\n+++\nAnswer $caller_name from $knowledge: $question\n', encoding="utf-8"
    )
    result = CliRunner().invoke(cli, ["serve", "--no-migrate"], env={"PROMPTS_DIR": str(prompts)})
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {broken}: ")
    assert "$caller_name" in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.splitlines()) == 1


def test_serve_stops_at_prompts_that_do_not_fit_the_settings_in_one_line(tmp_path, fresh_settings):
    # Both were a traceback, printed after the database had started.
    result = CliRunner().invoke(cli, ["serve", "--no-migrate"], env={"QUERY__PROMPT_VARIANT": "nope"})
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "error: QUERY__PROMPT_VARIANT='nope' is not a prompt variant (known: default, concise)"
    ]
    get_settings.cache_clear()
    prompts = Path(shutil.copytree(PROJECT_ROOT / "prompts", tmp_path / "prompts"))
    (prompts / "default" / "tool.description.md").write_text(
        '+++\nversion = "9"\n+++\n' + "x" * 990 + " $knowledge_summary\n", encoding="utf-8"
    )
    result = CliRunner().invoke(cli, ["serve", "--no-migrate"], env={"PROMPTS_DIR": str(prompts)})
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "error: prompt variant 'default': tool.description.md takes 991 of the 1024 characters a "
        "openai-chat function description may have; shorten it"
    ]


@pytest.mark.parametrize("command", [["serve", "--no-migrate"], ["worker"], ["migrate"], ["db", "status"]])
def test_a_setting_the_environment_gets_wrong_is_named_in_one_line(command, fresh_settings):
    env = {"WEBHOOKS__TIMEOUT_S": "abc", "LIMITS__MAX_UPLOAD_BYTES": "5", "WEBHOOKS__LEASE_S": "8"}
    result = CliRunner().invoke(cli, command, env=env)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "error: setting LIMITS__MAX_UPLOAD_BYTES: Input should be greater than or equal to 1024 (got '5')",
        "error: setting WEBHOOKS__TIMEOUT_S: Input should be a valid number, unable to parse string as a "
        "number (got 'abc')",
    ]
    assert "Traceback" not in result.output


def test_an_infinite_or_unbounded_duration_is_refused(fresh_settings):
    # A lease of inf seconds was taken: every claim then failed in PostgreSQL, for good.
    env = {"INGESTION__LEASE_S": "inf", "QUERY__DEADLINE_S": "nan", "INGESTION__POLL_INTERVAL_S": "1e12"}
    result = CliRunner().invoke(cli, ["serve", "--no-migrate"], env=env)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "error: setting INGESTION__POLL_INTERVAL_S: Input should be less than or equal to 3600 (got '1e12')",
        "error: setting INGESTION__LEASE_S: Input should be a finite number (got 'inf')",
        "error: setting QUERY__DEADLINE_S: Input should be a finite number (got 'nan')",
    ]


def _vk_process(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    """``vk`` as its own process (main(), not the test runner, handles its errors)."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=PROJECT_ROOT,
        env={**os.environ, "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("command", [["migrate"], ["create-org", "Acme"], ["worker", "--once"]])
def test_a_database_that_cannot_be_reached_is_said_in_one_line(command):
    # Nothing listens on port 1: the connection is refused at once.
    result = _vk_process(*command, database_url="postgresql://vk:s3cret@127.0.0.1:1/vk")
    assert (result.returncode, result.stderr) == (
        1,
        "error: the database could not be used: ConnectionRefusedError: "
        "[Errno 111] Connect call failed ('127.0.0.1', 1)\n",
    )


def test_a_revision_that_does_not_exist_is_said_as_alembic_says_it(database_url):
    result = _vk_process("downgrade", "nosuchrev", database_url=database_url)
    assert (result.returncode, result.stderr) == (
        1,
        "error: Can't locate revision identified by 'nosuchrev'\n",
    )


def test_a_webhook_lease_no_longer_than_an_attempt_is_refused(fresh_settings):
    # A slow attempt's lease would run out under it: another worker would send it again.
    result = CliRunner().invoke(cli, ["serve", "--no-migrate"], env={"WEBHOOKS__LEASE_S": "10"})
    assert result.exit_code == 1
    assert result.stderr == (
        "error: setting WEBHOOKS: Value error, lease_s (10) must be longer than timeout_s (10), "
        "or a slow attempt is taken over and sent twice\n"
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("   ", "must not be empty or only whitespace"),
        ("A" * 201, "String should have at most 200 characters"),
        ("Acme\x00", "must not contain NUL characters"),
    ],
    ids=["blank", "too-long", "nul"],
)
def test_create_org_refuses_a_name_the_api_would(name, message):
    result = CliRunner().invoke(cli, ["create-org", name])
    assert (result.exit_code, f"Invalid value for NAME: {message}" in result.output) == (2, True)


async def test_serve_keeps_an_idle_connection_open_as_long_as_configured(database_url, engine):
    """uvicorn's own 5 s is shorter than a load balancer's idle timeout: a proxy would send a
    request on a connection the service is closing. `KEEP_ALIVE_S` reaches the server: with 12,
    a connection idle for 6 s is still served, and the server ends it later."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "INGESTION__", "PROMETHEUS"))}
    env.update(DATABASE_URL=database_url, INGESTION__WORKERS="0", LOG_LEVEL="WARNING", KEEP_ALIVE_S="12")
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--no-migrate"],
        cwd=PROJECT_ROOT,
        env=env,
    )
    request = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    try:
        await wait_until_up(f"http://127.0.0.1:{port}")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        statuses = []
        for pause in (0, 6):
            await asyncio.sleep(pause)
            writer.write(request)
            statuses.append(await reader.readline())
            await reader.readuntil(b'{"status":"ok"}')
        # Past the 12 s, the server ends the connection: the reader sees its end, nothing else.
        closed = await asyncio.wait_for(reader.read(), timeout=30)
        writer.close()
    finally:
        server.terminate()
        server.wait(timeout=40)
    assert statuses == [b"HTTP/1.1 200 OK\r\n"] * 2
    assert closed == b""
