"""The embedded PostgreSQL's life, with real pgserver servers in temporary folders: started
or joined by each vk process, stopped by the last one to leave (also when a signal ends
it), and `vk db status` / `vk db stop` for one left behind by a process killed outright."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from app.db.embedded import embedded_database_url, embedded_status, leave_embedded
from tests.conftest import REPO

pytestmark = pytest.mark.timeout(120)

# A process using the folder's server until its stdin closes.
HOLD = (
    "import sys; from pathlib import Path; from app.db.embedded import embedded_database_url; "
    "print(embedded_database_url(Path(sys.argv[1])), flush=True); sys.stdin.read()"
)
# A process that uses the server inside embedded_stops_with_this_process, as `vk serve` does:
# SIGTERM unwinds it as an exception (as in `vk serve`), and Ctrl-C as KeyboardInterrupt.
SERVE = """
import signal, sys, time
from pathlib import Path
from app.db.embedded import embedded_database_url, embedded_stops_with_this_process

class Terminated(BaseException):
    pass

def terminated(signum, frame):
    raise Terminated

signal.signal(signal.SIGTERM, terminated)
# Python leaves SIGINT ignored when its parent did (a shell's background job does): Ctrl-C
# is what this process stands for, so it raises KeyboardInterrupt whoever started the tests.
signal.signal(signal.SIGINT, signal.default_int_handler)
folder = Path(sys.argv[1])
embedded_database_url(folder)
try:
    with embedded_stops_with_this_process(folder, say=print):
        print("ready", flush=True)
        if sys.argv[2] == "wait":
            time.sleep(60)
except (Terminated, KeyboardInterrupt) as stop:
    print(type(stop).__name__, flush=True)
    sys.exit(1)
print("after the block", flush=True)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DB__EMBEDDED_DIR"}}
    return {**env, **extra}


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "pg"
    yield folder
    # Whatever a failed test left running is stopped, so no test leaves a server behind.
    status = embedded_status(folder)
    if status.pid is not None:
        psutil.Process(status.pid).terminate()


def _hold(folder: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)],
        cwd=REPO,
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().startswith("postgresql://")
    return holder


def _exited(process: psutil.Process) -> bool:
    # An exited postmaster whose parent (init, once pg_ctl has left) has not reaped it yet
    # is a zombie: it no longer runs.
    return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE


def _holder_command(folder: Path) -> str:
    return f"{sys.executable} -c {HOLD} {folder}"


def _vk(*args: str, folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=REPO,
        env=_env(DB__EMBEDDED_DIR=str(folder), **env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_last_process_to_leave_stops_the_server(folder):
    holder = _hold(folder)
    try:
        url = embedded_database_url(folder)
        status = embedded_status(folder)
        assert status.url == url == f"postgresql://postgres:@/postgres?host={folder.resolve()}"
        assert [pid for pid, _ in status.users] == [holder.pid, os.getpid()]
        assert status.users[0][1] == _holder_command(folder)
        postmaster = psutil.Process(status.pid)

        after = leave_embedded(folder)
        assert (after.pid, after.users) == (status.pid, ((holder.pid, _holder_command(folder)),))
    finally:
        holder.communicate("", timeout=60)  # it leaves at exit, the last one
    assert holder.returncode == 0
    assert _exited(postmaster)
    assert embedded_status(folder).running is False


def test_a_process_killed_outright_does_not_keep_the_server_running(folder):
    holder = _hold(folder)
    holder.kill()
    holder.wait()
    postmaster = psutil.Process(embedded_status(folder).pid)
    # Still in pgserver's list of users, but dead: forgotten when the next user leaves.
    embedded_database_url(folder)
    after = leave_embedded(folder)
    assert after.running is False
    assert _exited(postmaster)


def test_a_lock_file_naming_another_live_process_is_stale(folder):
    # After a crash and a restart, the dead server's number may belong to another process:
    # pgserver took it for the server and, failing to stop it, killed it.
    embedded_database_url(folder)
    lock = (folder / "postmaster.pid").read_text()
    assert leave_embedded(folder).running is False
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        (folder / "postmaster.pid").write_text(f"{bystander.pid}\n" + lock.split("\n", 1)[1])
        assert embedded_status(folder).running is False
        url = embedded_database_url(folder)
        status = embedded_status(folder)
        assert (status.url, status.pid != bystander.pid) == (url, True)
        assert leave_embedded(folder).running is False
        assert bystander.poll() is None  # still alive
    finally:
        bystander.kill()
        bystander.wait()


def test_vk_db_status_and_stop_deal_with_a_server_left_behind(folder):
    holder = _hold(folder)
    holder.kill()  # as a service killed with SIGKILL: its server stays up, with no user
    holder.wait()
    pid = embedded_status(folder).pid
    assert pid is not None
    postmaster = psutil.Process(pid)

    status = _vk("db", "status", folder=folder)
    assert (status.returncode, status.stderr) == (0, "")
    assert status.stdout == (
        f"The embedded PostgreSQL in {folder.resolve()} is running (pid {pid}).\n"
        f"url:     postgresql://postgres:@/postgres?host={folder.resolve()}\n"
        "used by: no vk process; vk db stop stops it\n"
    )

    stop = _vk("db", "stop", folder=folder)
    assert (stop.returncode, stop.stdout, stop.stderr) == (
        0,
        f"Stopped the embedded PostgreSQL in {folder.resolve()}.\n",
        "",
    )
    assert _exited(postmaster)

    status = _vk("db", "status", folder=folder)
    assert (status.returncode, status.stdout) == (
        3,
        f"The embedded PostgreSQL in {folder.resolve()} is not running.\n",
    )
    again = _vk("db", "stop", folder=folder)
    assert (again.returncode, again.stdout) == (
        0,
        f"The embedded PostgreSQL in {folder.resolve()} is not running.\n",
    )


def test_vk_db_stop_leaves_a_server_in_use_running(folder):
    holder = _hold(folder)
    try:
        pid = embedded_status(folder).pid
        stop = _vk("db", "stop", folder=folder)
        assert (stop.returncode, stop.stdout) == (1, "")
        assert stop.stderr == (
            f"The embedded PostgreSQL in {folder.resolve()} is in use by pid {holder.pid} "
            f"({_holder_command(folder)}): stop those first.\n"
        )
        assert embedded_status(folder).pid == pid
    finally:
        holder.communicate("", timeout=60)


def test_vk_db_status_names_the_database_url_in_use(folder):
    status = _vk("db", "status", folder=folder, DATABASE_URL="postgresql://vk:secret@db.internal:5432/vk")
    assert status.returncode == 3
    assert status.stdout == (
        "DATABASE_URL is set: vk uses postgresql://vk@db.internal:5432/vk.\n"
        f"The embedded PostgreSQL in {folder.resolve()} is not running.\n"
    )


@pytest.mark.parametrize(
    ("sig", "unwound_by"), [(signal.SIGTERM, "Terminated"), (signal.SIGINT, "KeyboardInterrupt")]
)
def test_a_signal_that_unwinds_the_block_stops_the_server(folder, sig, unwound_by):
    served = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(folder), "wait"],
        cwd=REPO,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert served.stdout is not None
    assert served.stdout.readline() == "ready\n"
    postmaster = psutil.Process(embedded_status(folder).pid)
    served.send_signal(sig)
    out, err = served.communicate(timeout=60)
    assert (served.returncode, out, err) == (
        1,
        f"Stopped the embedded PostgreSQL in {folder.resolve()}.\n{unwound_by}\n",
        "",
    )
    assert _exited(postmaster)


def test_a_block_that_ends_by_itself_stops_the_server_too(folder):
    done = subprocess.run(
        [sys.executable, "-c", SERVE, str(folder), "return"],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"ready\nStopped the embedded PostgreSQL in {folder.resolve()}.\nafter the block\n",
        "",
    )
    assert embedded_status(folder).running is False


def test_a_server_still_in_use_keeps_running_and_says_for_whom(folder):
    holder = _hold(folder)
    try:
        done = subprocess.run(
            [sys.executable, "-c", SERVE, str(folder), "return"],
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.stdout == (
            f"ready\nThe embedded PostgreSQL in {folder.resolve()} keeps running for pid {holder.pid} "
            f"({_holder_command(folder)}); the last of them stops it.\nafter the block\n"
        )
        assert embedded_status(folder).running is True
    finally:
        holder.communicate("", timeout=60)
    assert embedded_status(folder).running is False


def test_no_runtime_folder_warning_without_xdg_runtime_dir(tmp_path):
    """pgserver reads the user's runtime folder when imported; without XDG_RUNTIME_DIR,
    platformdirs warned on every vk command. The folder is chosen before, and private."""
    env = {k: v for k, v in _env(TMPDIR=str(tmp_path)).items() if k != "XDG_RUNTIME_DIR"}
    shown = subprocess.run(
        [
            sys.executable,
            "-W",
            "default",
            "-c",
            "import os, sys; from pathlib import Path; from app.db.embedded import embedded_status; "
            "print(embedded_status(Path(sys.argv[1])).running, os.environ['XDG_RUNTIME_DIR'])",
            str(tmp_path / "pg"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (shown.returncode, shown.stderr) == (0, "")
    running, runtime_dir = shown.stdout.split()
    assert running == "False"
    info = Path(runtime_dir).lstat()
    assert (stat.S_ISDIR(info.st_mode), stat.S_IMODE(info.st_mode), info.st_uid) == (
        True,
        0o700,
        os.geteuid(),
    )


def test_vk_eval_in_process_starts_its_server_without_warnings(tmp_path):
    """`vk eval` starts a temporary server of its own; it warned about XDG_RUNTIME_DIR too."""
    (tmp_path / "docs" / "acme").mkdir(parents=True)
    (tmp_path / "docs" / "acme" / "FAQ.md").write_text("# FAQ\n\nFree parking is behind the building.\n")
    (tmp_path / "questions.jsonl").write_text(
        '{"id": "q1", "org": "acme", "question": "Where can I park?", "answers": ["behind the building"], '
        '"doc": "acme/FAQ.md", "gold_sentence": "Free parking is behind the building."}\n'
    )
    env = {k: v for k, v in _env(EMBEDDING__PROVIDER="lexical").items() if k != "XDG_RUNTIME_DIR"}
    done = subprocess.run(
        [sys.executable, "-W", "default", "-m", "app.cli", "eval", str(tmp_path / "questions.jsonl"),
         "--out", str(tmp_path / "out")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if "Warning" in line] == []
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.json", "report.md"]
