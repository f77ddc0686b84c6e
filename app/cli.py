"""Command line: ``vk serve | migrate | downgrade | create-org | worker | db | eval | replay | sync``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import tempfile
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import typer

from app.config import Settings, get_settings
from app.db.embedded import resolve_database_url
from app.observability.logging import configure_logging

# Help is shown as written: rich markup read "[docs/ beside DATASET]" as a tag and dropped
# it, and rich's tables cut long words short at 80 columns.
cli = typer.Typer(
    no_args_is_help=True, add_completion=False, rich_markup_mode=None, help="Voice knowledge service."
)


def _settings() -> Settings:
    """The settings, or one line per setting the environment gets wrong, and exit 1: a
    traceback hid which variable to fix."""
    from pydantic import ValidationError

    try:
        return get_settings()
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            name = "__".join(str(part) for part in error["loc"]).upper() or "settings"
            value = f" (got {error['input']!r})" if isinstance(error.get("input"), str | int | float) else ""
            typer.echo(f"error: setting {name}: {error['msg']}{value}", err=True)
        raise typer.Exit(1) from None


def _database_url() -> str:
    settings = _settings()
    return resolve_database_url(settings.database_url, settings.db.embedded_dir)


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default from HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default from PORT).")] = None,
    migrate: Annotated[bool, typer.Option(help="Bring the schema up to date first.")] = True,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            max=64,
            envvar="WEB_CONCURRENCY",
            help="Server processes sharing the port (one event loop each). With more than one, "
            "/metrics aggregates them through PROMETHEUS_MULTIPROC_DIR (a fresh temporary folder "
            "unless set).",
        ),
    ] = 1,
) -> None:
    """Start the HTTP service and, beside it, its ingestion worker process."""
    import uvicorn

    from app.db import migrate as migrations
    from app.db.embedded import embedded_stops_with_this_process
    from app.prompting import PromptError
    from app.query.tool_service import load_prompts
    from app.startup import organisation_count, startup_text, vk_command

    settings = _settings()
    try:
        # Checked here too, where a broken prompt file is one line of output, not a traceback.
        load_prompts(settings)
    except PromptError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    url = _database_url()
    if migrate:
        migrations.upgrade(url)
    configure_logging(settings.log_level)
    options: dict[str, Any] = {
        "host": host or settings.host,
        "port": port or settings.port,
        "log_level": settings.log_level.lower(),
        "log_config": None,  # keep the JSON logging configured above
        "timeout_graceful_shutdown": 30,
        # uvicorn's 5 s closed idle connections under a proxy's feet, and under load: a server
        # busier than 5 s closed connections whose next request was already waiting unread.
        "timeout_keep_alive": settings.keep_alive_s,
    }
    # uvicorn ends a graceful shutdown on SIGTERM by raising the signal again, with the
    # handler found before it started: this one, so the worker process is stopped on the way out.
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        with contextlib.ExitStack() as stack:
            # Entered first, so left last: once the ingestion worker process has stopped.
            stack.enter_context(embedded_stops_with_this_process(settings.db.embedded_dir, say=typer.echo))
            ingestion = settings.ingestion
            if ingestion.workers > 0 and ingestion.isolation == "process":
                from app.ingestion.supervisor import WorkerProcess

                stack.enter_context(WorkerProcess(url, concurrency=ingestion.workers, nice=ingestion.nice))
            typer.echo(
                startup_text(
                    settings,
                    database_url=url,
                    host=options["host"],
                    port=options["port"],
                    organisations=organisation_count(url, settings),
                    vk=vk_command(),
                )
            )
            if workers == 1:
                from app.main import create_app, tune_gc

                app = create_app(settings, database_url=url)
                tune_gc()
                uvicorn.run(app, **options)
                return
            # The processes are started afresh and read their settings from the environment:
            # hand them the database this process resolved (the embedded server is already
            # running) and a metrics folder, which must be set before they import prometheus_client.
            os.environ["DATABASE_URL"] = url
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = stack.enter_context(_metrics_folder())
            uvicorn.run("app.main:app_factory", factory=True, workers=workers, **options)
    except _Terminated:
        # Exit by the signal, as uvicorn meant to: the status tells a supervisor why.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)


@contextlib.contextmanager
def _metrics_folder() -> Iterator[str]:
    """The folder the server processes share their metrics in: PROMETHEUS_MULTIPROC_DIR
    without the files of processes gone (prometheus_client reads every file there, and an
    earlier run's unreadable one made every /metrics a 500), or a fresh temporary one,
    removed at the end.
    A folder that cannot be used stops the command in one line: every server process died
    at start, and uvicorn started them again, for ever."""
    import shutil
    from pathlib import Path

    from app.db.embedded import process_alive

    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not given:
        folder = tempfile.mkdtemp(prefix="vk-metrics-")
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    path = Path(given)
    try:
        path.mkdir(parents=True, exist_ok=True)
        foreign = []
        for old in path.glob("*.db"):
            # prometheus_client's files of processes gone go; another server's live ones stay.
            pid = re.fullmatch(r"(?:counter|gauge_\w+|histogram|summary)_(\d+)\.db", old.name)
            if pid is None:
                foreign.append(old.name)
            elif not process_alive(int(pid.group(1))):
                old.unlink()
        probe = tempfile.NamedTemporaryFile(dir=path)  # noqa: SIM115 - closed at once
        probe.close()
    except OSError as exc:
        typer.echo(f"error: PROMETHEUS_MULTIPROC_DIR={given} cannot be used: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None
    if foreign:
        # prometheus_client reads every .db file there; not ours to delete.
        typer.echo(
            f"error: PROMETHEUS_MULTIPROC_DIR={given} holds files that are not metrics "
            f"({', '.join(sorted(foreign)[:3])}): give it a folder of its own",
            err=True,
        )
        raise typer.Exit(1)
    yield given


class _Terminated(BaseException):
    """SIGTERM, unwinding ``serve`` through its clean-ups (BaseException: nothing catches it)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated


@cli.command()
def migrate(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
    """Apply migrations up to REVISION (default: head)."""
    from app.db import migrate as migrations

    migrations.upgrade(_database_url(), revision)
    typer.echo(f"database migrated to {revision}")


@cli.command()
def downgrade(revision: Annotated[str, typer.Argument(help="Target revision.")]) -> None:
    """Revert migrations down to REVISION (base removes everything)."""
    from app.db import migrate as migrations

    migrations.downgrade(_database_url(), revision)
    typer.echo(f"database downgraded to {revision}")


@cli.command("create-org")
def create_org(name: Annotated[str, typer.Argument(help="Organisation name.")]) -> None:
    """Create an organisation and print its first admin API key (shown once)."""
    from pydantic import TypeAdapter, ValidationError

    from app.db import migrate as migrations
    from app.db.engine import make_engine, make_sessionmaker
    from app.keys.service import create_organisation
    from app.schemas import Title

    try:
        name = TypeAdapter(Title).validate_python(name)
    except ValidationError as exc:
        raise typer.BadParameter(exc.errors()[0]["msg"], param_hint="NAME") from None
    settings = _settings()
    url = _database_url()
    migrations.upgrade(url)

    async def run() -> tuple[str, str]:
        engine = make_engine(url, settings)
        try:
            async with make_sessionmaker(engine)() as session:
                org_id, key = await create_organisation(session, name)
        finally:
            await engine.dispose()
        return str(org_id), key

    org_id, key = asyncio.run(run())
    typer.echo(f"organisation: {org_id}")
    typer.echo(f"admin key:    {key}")
    typer.echo("Store the key now: it is not shown again.")


@cli.command()
def worker(
    concurrency: Annotated[int, typer.Option(help="Documents processed at once by this process.")] = 4,
    once: Annotated[bool, typer.Option(help="Process what is queued, then exit.")] = False,
    nice: Annotated[
        int, typer.Option(min=0, max=19, help="Run at this CPU niceness at least (higher = lower priority).")
    ] = 0,
    parent_pid: Annotated[
        int | None, typer.Option(hidden=True, help="Stop when this process is gone (vk serve's worker).")
    ] = None,
) -> None:
    """Run standalone ingestion workers against the configured database.

    Start as many as you like, on as many machines as you like: they share the queue in
    PostgreSQL and never process one document twice at the same time.
    """
    import signal

    from app.crawl.runner import start_crawls
    from app.db.engine import make_engine
    from app.embeddings.factory import build_embedder
    from app.ingestion.fetch import Fetcher
    from app.ingestion.pipeline import Ingestor
    from app.ingestion.supervisor import lower_priority
    from app.ingestion.worker import WorkerPool, drain, worker_id
    from app.openai_client import make_openai_client
    from app.webhooks.dispatcher import WebhookDispatcher

    settings = _settings()
    configure_logging(settings.log_level)
    if nice:
        lower_priority(nice)
    url = _database_url()

    async def run() -> None:
        engine = make_engine(url, settings)
        client = make_openai_client(settings)
        fetcher = Fetcher(
            max_bytes=settings.ingestion.fetch_max_bytes,
            timeout_s=settings.ingestion.fetch_timeout_s,
            intranet=settings.ingestion.intranet,
        )
        ingestor = Ingestor(
            engine,
            build_embedder(settings, client),
            fetcher,
            settings.ingestion,
            worker_id(),
            quota_tokens_per_day=settings.limits.embedding_tokens_per_day,
            storage_quota_bytes=settings.limits.org_storage_bytes,
        )
        try:
            if once:
                typer.echo(f"processed: {await drain(ingestor)}")
                return
            pool = WorkerPool(
                ingestor, concurrency=concurrency, poll_interval_s=settings.ingestion.poll_interval_s
            )
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            orphaned = None
            if parent_pid is not None:
                orphaned = asyncio.create_task(_stop_when_orphaned(parent_pid, stop))
            await pool.start()
            # Site crawls run in the worker process too, leased from the same database.
            crawls = start_crawls(engine, settings, ingestor.owner)
            if crawls is not None:
                await crawls.start()
            # Webhook events are delivered by the same process (app/webhooks/dispatcher.py).
            dispatcher = None
            if settings.webhooks.concurrency > 0:
                dispatcher = WebhookDispatcher(
                    engine, settings.webhooks, ingestor.owner, intranet=settings.ingestion.intranet
                )
                await dispatcher.start()
            if parent_pid is None:
                typer.echo(f"worker {ingestor.owner} running with {concurrency} slots; Ctrl-C to stop")
            await stop.wait()
            if dispatcher is not None:
                await dispatcher.stop()
            if crawls is not None:
                await crawls.stop()
            await pool.stop()
            if orphaned is not None:
                orphaned.cancel()
        finally:
            await fetcher.aclose()
            if client is not None:
                await client.close()
            await engine.dispose()

    asyncio.run(run())


async def _stop_when_orphaned(parent_pid: int, stop: asyncio.Event) -> None:
    # A service killed without a chance to stop its worker (SIGKILL, OOM) must not leave it
    # ingesting on its own: once re-parented, it stops as on SIGTERM. Nothing signals a
    # parent's death portably, hence the poll.
    while os.getppid() == parent_pid:  # noqa: ASYNC110
        await asyncio.sleep(1.0)
    stop.set()


@cli.command("eval")
def evaluate(
    dataset: Annotated[str, typer.Argument(help="Question file, JSONL (format: docs/PROMPTS.md).")],
    docs: Annotated[
        str | None, typer.Option(help="Documents folder (default: docs/ beside DATASET).")
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="Running service to ask (default: one started in this process).")
    ] = None,
    key: Annotated[str | None, typer.Option(help="Admin key (with --url).")] = None,
    agent: Annotated[
        uuid.UUID | None, typer.Option(help="Agent holding the documents (--url; squad-dev).")
    ] = None,
    variant: Annotated[str | None, typer.Option(help="Prompt variant (default: the agent's).")] = None,
    compare: Annotated[tuple[str, str] | None, typer.Option(help="Two variants side by side.")] = None,
    limit: Annotated[int | None, typer.Option(help="Ask a seeded sample of this many questions.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the --limit sample.")] = 0,
    out: Annotated[str | None, typer.Option(help="Report folder (default: eval-out/<timestamp>/).")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Questions in flight at once.")] = 1,
    docs_as: Annotated[
        Literal["markdown", "text"],
        typer.Option(
            help="Upload the documents as markdown, or as plain text (heading marks and bold dropped)."
        ),
    ] = "markdown",
) -> None:
    """Measure retrieval and answers on a question set; writes report.json and report.md.

    A callers-dev set (records with an org field) gets one knowledge base and agent per
    docs/<org>/ folder.
    """
    from pathlib import Path

    from app.db.embedded import import_pgserver
    from app.evaluation.commands import eval_command

    import_pgserver()  # before the in-process mode's temporary server imports it
    eval_command(
        Path(dataset),
        docs=Path(docs) if docs else None,
        url=url,
        key=key,
        agent=str(agent) if agent else None,
        variant=variant,
        compare=compare,
        limit=limit,
        seed=seed,
        out=Path(out) if out else None,
        concurrency=concurrency,
        docs_as=docs_as,
    )


@cli.command("replay")
def replay(
    agent: Annotated[uuid.UUID, typer.Option(help="Agent whose logged questions are replayed.")],
    variant: Annotated[str, typer.Option(help="Prompt variant to replay them with.")],
    url: Annotated[str | None, typer.Option(help="The running service (required).")] = None,
    key: Annotated[str | None, typer.Option(help="Admin key of the agent's organisation (required).")] = None,
    last: Annotated[int, typer.Option(min=1, help="How many of the newest logged calls to read.")] = 100,
    out: Annotated[str | None, typer.Option(help="Report folder (default: eval-out/<timestamp>/).")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Questions in flight at once.")] = 1,
) -> None:
    """Re-ask an agent's last logged questions with another prompt variant; report what changed."""
    from pathlib import Path

    from app.evaluation.commands import replay_command

    replay_command(
        agent=str(agent),
        last=last,
        variant=variant,
        url=url,
        key=key,
        out=Path(out) if out else None,
        concurrency=concurrency,
    )


@cli.command("sync")
def sync(
    folder: Annotated[str, typer.Argument(help="The folder to mirror (a git checkout, say).")],
    kb: Annotated[uuid.UUID, typer.Option("--kb", help="Id of the knowledge base to keep equal to it.")],
    url: Annotated[
        str | None,
        typer.Option(envvar="VK_URL", help="The service (default: the address vk serve prints)."),
    ] = None,
    include: Annotated[
        list[str] | None, typer.Option(help="Only files matching this glob (repeatable).")
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option(help="Skip files matching this glob (repeatable).")
    ] = None,
    delete_missing: Annotated[
        bool, typer.Option(help="Delete the documents whose file is gone from the folder.")
    ] = False,
    dry_run: Annotated[bool, typer.Option(help="Print the plan and change nothing.")] = False,
    wait: Annotated[bool, typer.Option(help="Wait until every sent file is indexed or failed.")] = False,
    wait_timeout: Annotated[float, typer.Option(min=1, help="Seconds --wait waits at most.")] = 1800,
    batch_size: Annotated[int, typer.Option(min=1, max=1000, help="Files per bulk request.")] = 50,
    allow_duplicates: Annotated[
        bool, typer.Option(help="Add a file even if another document holds the same bytes.")
    ] = False,
) -> None:
    """Make a knowledge base equal to a folder: upload new and changed files, optionally
    delete the documents of removed ones. The admin key comes from VK_API_KEY.

    Exit codes: 0 done, 1 some files failed, 2 wrong usage, 3 service unusable, 130
    interrupted (docs/SYNC.md).
    """
    from pathlib import Path

    from app.startup import service_url
    from app.sync.command import SyncOptions, sync_command
    from app.sync.planner import Selection

    settings = _settings()
    options = SyncOptions(
        folder=Path(folder),
        kb_id=str(kb),
        selection=Selection(tuple(include or ()), tuple(exclude or ())),
        delete_missing=delete_missing,
        dry_run=dry_run,
        wait=wait,
        wait_timeout_s=wait_timeout,
        batch_files=batch_size,
        allow_duplicates=allow_duplicates,
        # The service's limit as this environment sets it: a larger file is refused unread,
        # not read whole into memory to be refused by the service.
        max_file_bytes=settings.limits.max_upload_bytes,
    )
    code = sync_command(
        options,
        url=url or service_url(settings.host, settings.port),
        api_key=os.environ.get("VK_API_KEY"),
        say=typer.echo,
    )
    raise typer.Exit(code)


db_cli = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="The embedded PostgreSQL, used when DATABASE_URL is unset (its folder: DB__EMBEDDED_DIR).",
)
cli.add_typer(db_cli, name="db")


@db_cli.command("status")
def db_status() -> None:
    """Say whether the embedded PostgreSQL runs, its URL, and which vk processes use it.

    Exits with 3 when it is not running, as pg_ctl status does.
    """
    from app.db.embedded import embedded_status
    from app.startup import without_password

    settings = _settings()
    if settings.database_url:
        typer.echo(f"DATABASE_URL is set: vk uses {without_password(settings.database_url)}.")
    status = embedded_status(settings.db.embedded_dir)
    if not status.running:
        typer.echo(f"The embedded PostgreSQL in {status.data_dir} is not running.")
        raise typer.Exit(3)
    typer.echo(f"The embedded PostgreSQL in {status.data_dir} is running (pid {status.pid}).")
    typer.echo(f"url:     {status.url}")
    typer.echo(f"used by: {status.describe_users() or 'no vk process; vk db stop stops it'}")


@db_cli.command("stop")
def db_stop() -> None:
    """Stop the embedded PostgreSQL if no vk process uses it (say, one left by a killed service).

    The last vk process using it stops it by itself when it exits.
    """
    from app.db.embedded import EmbeddedInUse, stop_embedded

    data_dir = _settings().db.embedded_dir.resolve()
    try:
        stopped = stop_embedded(data_dir)
    except EmbeddedInUse as exc:
        typer.echo(f"The embedded PostgreSQL in {data_dir} is in use by {exc}: stop those first.", err=True)
        raise typer.Exit(1) from None
    if stopped:
        typer.echo(f"Stopped the embedded PostgreSQL in {data_dir}.")
    else:
        typer.echo(f"The embedded PostgreSQL in {data_dir} is not running.")


def main() -> None:
    """``vk``: the commands, with a database that cannot be reached or signed in to said in
    one line (``error: the database could not be used: ConnectionRefusedError: ...``), not
    a traceback of sixty lines through asyncpg and SQLAlchemy; an Alembic error (a revision
    that does not exist) in its own words."""
    import socket

    import asyncpg
    import sqlalchemy.exc
    from alembic.util import CommandError

    unreachable = (
        ConnectionError,
        socket.gaierror,
        asyncpg.PostgresConnectionError,
        asyncpg.InterfaceError,
        asyncpg.InvalidAuthorizationSpecificationError,  # a wrong user or password
        asyncpg.InvalidCatalogNameError,  # no such database
        sqlalchemy.exc.OperationalError,
        sqlalchemy.exc.InterfaceError,
    )
    try:
        typer.main.get_command(cli).main(prog_name="vk")
    except unreachable as exc:
        cause = exc.orig if isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.orig else exc
        first_line = (str(cause).strip().splitlines() or [""])[0]
        typer.echo(f"error: the database could not be used: {type(cause).__name__}: {first_line}", err=True)
        raise SystemExit(1) from None
    except CommandError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
