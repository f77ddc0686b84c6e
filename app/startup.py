"""What ``vk serve`` tells the person who started it, on stdout: where the service answers,
which database and models it uses, and the next step on a fresh install. The JSON logs on
stderr are for machines and stay as they are."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import httpx
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from app.config import Settings
from app.db.engine import make_engine, make_sessionmaker
from app.organisations.repository import count_organisations

log = logging.getLogger(__name__)


def startup_text(
    settings: Settings,
    *,
    database_url: str,
    host: str,
    port: int,
    organisations: int | None,
    vk: str = "vk",
) -> str:
    """The lines printed once the database is ready, before the service starts listening.

    ``organisations`` None means the database could not be asked: no next step is given.
    ``vk`` is how to run the command line from here (``vk_command``).
    """
    url = service_url(host, port)
    lines = [
        f"Voice knowledge service on {url}",
        f"  console   {url}/console (sign in with an admin key)",
        f"  API docs  {url}/schema",
        f"  database  {database_text(settings, database_url)}",
        f"  embedder  {embedder_text(settings)}",
        f"  answerer  {answerer_text(settings)}",
    ]
    if settings.openai_api_key is None:
        lines.append("            set OPENAI_API_KEY to embed and answer with OpenAI instead")
    lines.append(f"  ingestion {ingestion_text(settings)}")
    if organisations == 0:
        lines += [
            "Next: create an organisation and its first admin key:",
            f'  {vk} create-org "Your organisation"',
        ]
    lines.append("Ctrl-C stops it. Logs follow on stderr, as JSON lines.")
    return "\n".join(lines)


def service_url(host: str, port: int) -> str:
    """The address to open: a wildcard bind address is not one, this machine's loopback is."""
    if host in {"", "0.0.0.0"}:  # noqa: S104  # recognised, not bound
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def database_text(settings: Settings, database_url: str) -> str:
    if settings.database_url is None:
        return f"embedded PostgreSQL in {settings.db.embedded_dir.resolve()}, stopped with the service"
    return without_password(database_url)


def without_password(database_url: str) -> str:
    """The URL without its password, whether in the authority or as a query parameter."""
    try:
        url = make_url(database_url)
    except ArgumentError:
        return "DATABASE_URL (not shown: it could not be parsed)"
    # URL.set() takes None as "unchanged"; SQLAlchemy documents _replace for clearing a part.
    shown = url._replace(password=None).difference_update_query(["password"])
    return shown.render_as_string(hide_password=False)


def embedder_text(settings: Settings) -> str:
    embedding = settings.embedding
    match settings.embedding_provider:
        case "minilm":
            return f"all-MiniLM-L6-v2 ({embedding.minilm_precision}), offline"
        case "lexical":
            return "lexical: hashed words, offline (matches words, not meaning)"
        case "local":
            return f"{embedding.local_model} (sentence-transformers), offline"
        case "openai":
            size = f", {embedding.openai_dimensions} dimensions" if embedding.openai_dimensions else ""
            return f"OpenAI {embedding.openai_model}{size}{_provider_suffix(settings)}"


def answerer_text(settings: Settings) -> str:
    if settings.answerer == "openai":
        return f"OpenAI {settings.query.llm_model}{_provider_suffix(settings)}"
    return "extractive, offline: reads out the best sentences of your documents"


def ingestion_text(settings: Settings) -> str:
    ingestion = settings.ingestion
    if ingestion.workers == 0:
        return "none here (INGESTION__WORKERS=0): run `vk worker` to index documents"
    if ingestion.isolation == "inline":
        return f"in the service process, {ingestion.workers} documents at once"
    return (
        f"a worker process beside the service, {ingestion.workers} documents at once, "
        f"at lower CPU priority (nice {ingestion.nice})"
    )


def _provider_suffix(settings: Settings) -> str:
    if settings.openai_base_url is None:
        return ""
    # Whatever credentials an address may carry stay out of the terminal.
    base = httpx.URL(settings.openai_base_url).copy_with(username=None, password=None)
    return f" at {base}"


def vk_command(argv0: str | None = None, cwd: Path | None = None) -> str:
    """How to run vk from the current folder: the script this process was started as when
    it lies below the folder (``.venv/bin/vk``, which no shell finds by itself), else ``vk``."""
    script = Path(argv0 if argv0 is not None else sys.argv[0])
    if script.name != "vk":
        return "vk"
    try:
        return str(script.resolve().relative_to((cwd or Path.cwd()).resolve()))
    except ValueError:
        return "vk"


def organisation_count(database_url: str, settings: Settings) -> int | None:
    """How many organisations the database holds; None when it cannot be asked, as the
    service starts all the same (answering 503 until the database is back)."""
    try:
        return asyncio.run(count_organisations_at(database_url, settings))
    except (SQLAlchemyError, OSError, TimeoutError) as exc:
        log.warning("could not count the organisations: %s", exc)
        return None


async def count_organisations_at(database_url: str, settings: Settings) -> int:
    engine = make_engine(database_url, settings)
    try:
        async with make_sessionmaker(engine)() as session:
            return await count_organisations(session)
    finally:
        await engine.dispose()
