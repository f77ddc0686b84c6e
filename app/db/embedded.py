"""The embedded PostgreSQL (pgserver) used when DATABASE_URL is unset.

pgserver ships PostgreSQL 16 with pgvector and starts it from Python without root or
Docker. Its data folder survives restarts; several processes (service, CLI workers) that
name the same folder share one server.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
_servers: dict[Path, Any] = {}


def embedded_database_url(data_dir: Path) -> str:
    import pgserver  # imported lazily: only the embedded mode needs it

    data_dir = data_dir.resolve()
    server = _servers.get(data_dir)
    if server is None:
        data_dir.mkdir(parents=True, exist_ok=True)
        log.info("starting embedded PostgreSQL in %s", data_dir)
        # cleanup_mode=None keeps the server (and its data) when this process exits, so
        # the next start is quick and other processes using the folder are not cut off.
        server = pgserver.get_server(data_dir, cleanup_mode=None)  # type: ignore[attr-defined]
        _servers[data_dir] = server
    uri: str = server.get_uri()
    return uri


def resolve_database_url(database_url: str | None, data_dir: Path) -> str:
    return database_url or embedded_database_url(data_dir)
