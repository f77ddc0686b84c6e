"""Command line: ``vk serve | migrate | downgrade | create-org | worker``."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import typer

from app.config import get_settings
from app.db.embedded import resolve_database_url

cli = typer.Typer(no_args_is_help=True, add_completion=False, help="Voice knowledge service.")


def _database_url() -> str:
    settings = get_settings()
    return resolve_database_url(settings.database_url, settings.db.embedded_dir)


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default from HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default from PORT).")] = None,
    migrate: Annotated[bool, typer.Option(help="Bring the schema up to date first.")] = True,
) -> None:
    """Start the HTTP service (and its in-process ingestion workers)."""
    import uvicorn

    from app.db import migrate as migrations
    from app.main import create_app

    settings = get_settings()
    url = _database_url()
    if migrate:
        migrations.upgrade(url)
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    uvicorn.run(
        create_app(settings, database_url=url),
        host=host or settings.host,
        port=port or settings.port,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=30,
    )


@cli.command()
def migrate(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
    """Apply migrations up to REVISION (default: head)."""
    from app.db import migrate as migrations

    migrations.upgrade(_database_url(), revision)
    typer.echo(f"database migrated to {revision}")


@cli.command()
def downgrade(revision: Annotated[str, typer.Argument(help="Target revision.")]) -> None:
    """Revert migrations down to REVISION (``base`` removes everything)."""
    from app.db import migrate as migrations

    migrations.downgrade(_database_url(), revision)
    typer.echo(f"database downgraded to {revision}")


@cli.command("create-org")
def create_org(name: Annotated[str, typer.Argument(help="Organisation name.")]) -> None:
    """Create an organisation and print its first admin API key (shown once)."""
    from app.db import migrate as migrations
    from app.db.engine import make_engine, make_sessionmaker
    from app.keys.service import create_organisation

    settings = get_settings()
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


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
