"""The embedded PostgreSQL (pgserver) used when DATABASE_URL is unset.

pgserver ships PostgreSQL 16 with pgvector and starts it from Python without root or
Docker. Its data folder survives restarts. Every vk process that names the folder (the
service, ``vk worker``, ``vk create-org``...) shares one server: the first one starts it,
each registers as a user of it, and the last one to leave stops it. Starting it again on
an existing folder takes about 0.2 s, too little to be worth a PostgreSQL that outlives the
service with nobody owning it. A process killed outright (SIGKILL) cannot stop it: the next
user that leaves does, and ``vk db status`` / ``vk db stop`` show and stop a server left
with no user.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)
_servers: dict[Path, Any] = {}
# pgserver's own record of the processes using a folder's server (it stops the server when
# the last of them exits).
_USERS_FILE = ".handle_pids.json"


@dataclass(frozen=True)
class EmbeddedStatus:
    """A look at an embedded PostgreSQL's folder, taken without starting anything."""

    data_dir: Path
    pid: int | None  # the postmaster's; None when no server runs on the folder
    url: str | None
    users: tuple[tuple[int, str], ...]  # live processes registered as users: (pid, command)

    @property
    def running(self) -> bool:
        return self.pid is not None

    def describe_users(self) -> str:
        return ", ".join(f"pid {pid} ({command})" for pid, command in self.users)


class EmbeddedInUse(RuntimeError):
    """The server still has users; stopping it would cut them off."""


def embedded_database_url(data_dir: Path) -> str:
    """Start the folder's server, or join the one running, as a user; its URL."""
    pgserver = import_pgserver()
    data_dir = data_dir.resolve()
    server = _servers.get(data_dir)
    if server is None:
        data_dir.mkdir(parents=True, exist_ok=True)
        # A user killed outright stays in pgserver's list, and the server would then never
        # find itself without users again.
        _forget_dead_users(pgserver, data_dir)
        _clear_stale_lock(data_dir)
        log.info("starting or joining the embedded PostgreSQL in %s", data_dir)
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
        _servers[data_dir] = server
    uri: str = server.get_uri()
    return uri


def resolve_database_url(database_url: str | None, data_dir: Path) -> str:
    return database_url or embedded_database_url(data_dir)


def embedded_status(data_dir: Path) -> EmbeddedStatus:
    import_pgserver()
    from pgserver.utils import PostmasterInfo

    data_dir = data_dir.resolve()
    info = PostmasterInfo.read_from_pgdata(data_dir) if data_dir.is_dir() else None
    if info is None or not info.is_running() or not _is_postmaster_of(info.pid, data_dir):
        return EmbeddedStatus(data_dir, None, None, ())
    return EmbeddedStatus(data_dir, info.pid, info.get_uri(), _live_users(data_dir))


def leave_embedded(data_dir: Path) -> EmbeddedStatus:
    """This process stops using the folder's server, which stops if no one else uses it.

    Also run by pgserver at exit; leaving first lets the caller say what became of it.
    """
    pgserver = import_pgserver()
    data_dir = data_dir.resolve()
    server = _servers.pop(data_dir, None)
    if server is not None:
        _forget_dead_users(pgserver, data_dir)
        server.cleanup()
    return embedded_status(data_dir)


def stop_embedded(data_dir: Path) -> bool:
    """Stop the folder's server if no live process uses it: whether there was one to stop.

    Raises EmbeddedInUse, naming the users, when processes still use it.
    """
    status = embedded_status(data_dir)
    if not status.running:
        return False
    if status.users:
        raise EmbeddedInUse(status.describe_users())
    # Join, then leave as its last user: pgserver stops it its own way (pg_ctl, as the
    # system user it runs PostgreSQL as when started by root).
    embedded_database_url(data_dir)
    status = leave_embedded(data_dir)
    if status.running:  # someone joined meanwhile; the server is theirs now
        raise EmbeddedInUse(status.describe_users())
    return True


@contextmanager
def embedded_stops_with_this_process(data_dir: Path, say: Callable[[str], object]) -> Iterator[None]:
    """However the block ends (a signal unwinding it included), this process then leaves
    the embedded server it started or joined, stopping it when no one else uses it, and
    says what became of it.

    Without it the server is left by pgserver's exit hook, which a process ended by a
    signal never runs, and in silence.
    """
    try:
        yield
    finally:
        if data_dir.resolve() in _servers:
            say(_leaving_text(leave_embedded(data_dir)))


def _leaving_text(status: EmbeddedStatus) -> str:
    if not status.running:
        return f"Stopped the embedded PostgreSQL in {status.data_dir}."
    if status.users:
        return (
            f"The embedded PostgreSQL in {status.data_dir} keeps running for "
            f"{status.describe_users()}; the last of them stops it."
        )
    return f"The embedded PostgreSQL in {status.data_dir} is still running: `vk db stop` stops it."


def import_pgserver() -> ModuleType:
    """pgserver, imported once the runtime folder it reads at import is chosen: import it
    only through here (``vk eval``'s temporary server included), or it warns."""
    _choose_runtime_dir()
    import pgserver

    return pgserver


def _choose_runtime_dir() -> None:
    """Name the user's runtime folder before pgserver reads it.

    pgserver keeps its lock file there (and the socket, for a data folder whose path is too
    long for a socket name), found by platformdirs when pgserver is imported. Where nothing
    sets XDG_RUNTIME_DIR (containers, ssh, cron, su), platformdirs warns at every import and
    falls back to a folder of its own. That folder is what is wanted: it is asked for here
    on purpose, created private (0700) and checked by platformdirs, and set in the
    environment, so every vk process and every process they start agree on it.
    """
    if os.environ.get("XDG_RUNTIME_DIR"):
        return
    import platformdirs

    with warnings.catch_warnings():
        # Only the warning that the fallback, asked for here, is being used.
        warnings.simplefilter("ignore", platformdirs.RuntimeDirWarning)
        os.environ["XDG_RUNTIME_DIR"] = platformdirs.user_runtime_dir(ensure_exists=True)


def _live_users(data_dir: Path) -> tuple[tuple[int, str], ...]:
    from pgserver.utils import DiskList

    psutil = _psutil()
    users = []
    for pid in DiskList(data_dir / _USERS_FILE).get():
        if not process_alive(pid):
            continue
        try:
            users.append((pid, _command(psutil.Process(pid).cmdline())))
        except psutil.Error:  # not ours to look at, or gone this instant
            users.append((pid, "?"))
    return tuple(users)


def _forget_dead_users(pgserver: ModuleType, data_dir: Path) -> None:
    from pgserver.utils import DiskList

    users = DiskList(data_dir / _USERS_FILE)
    with pgserver.PostgresServer._lock:  # the lock pgserver itself takes around the list
        pids = users.get()
        alive = [pid for pid in pids if process_alive(pid)]
        if alive != pids:
            users.put(alive)


def _clear_stale_lock(data_dir: Path) -> None:
    """Remove a postmaster.pid whose process lives but is no PostgreSQL of this folder: the
    server died without removing it and its number went to another process (after a crash
    and a restart of the machine or container). pgserver would take that process for the
    server and, failing to stop it, kill it."""
    lock = data_dir / "postmaster.pid"
    try:
        pid = int(lock.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0])
    except (OSError, ValueError):
        return  # none, or not one PostgreSQL wrote: PostgreSQL itself says what is wrong
    if process_alive(pid) and not _is_postmaster_of(pid, data_dir):
        log.warning("%s names process %d, which is not its PostgreSQL: removed as stale", lock, pid)
        lock.unlink(missing_ok=True)


def _is_postmaster_of(pid: int, data_dir: Path) -> bool:
    """Whether process ``pid`` is a PostgreSQL server of ``data_dir`` (``postgres -D <it>``).
    A process this one may not look at is taken to be: nothing is removed on a guess."""
    psutil = _psutil()
    try:
        process = psutil.Process(pid)
        cmdline: list[str] = process.cmdline()
        if not Path(process.name()).name.startswith("postgres"):
            return False
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True
    folders = [cmdline[i + 1] for i, arg in enumerate(cmdline[:-1]) if arg == "-D"]
    return any(Path(folder).resolve() == data_dir.resolve() for folder in folders)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not; another user's does)."""
    psutil = _psutil()
    try:
        # A zombie has exited; only its parent has not noticed yet.
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: alive
        return True


def _psutil() -> Any:
    import psutil  # type: ignore[import-untyped]  # installed with pgserver, untyped

    return psutil


def _command(cmdline: list[str]) -> str:
    """``vk serve`` rather than ``/srv/app/.venv/bin/python /srv/app/.venv/bin/vk serve``."""
    for i, arg in enumerate(cmdline):
        if Path(arg).name == "vk":
            return " ".join(["vk", *cmdline[i + 1 :]])
        if arg == "app.cli":
            return " ".join(["vk", *cmdline[i + 1 :]])
    return " ".join(cmdline) or "?"
