"""The application: one explicit ``create_app()`` listing routes, dependencies, handlers
and the lifespan that owns every long-lived client."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx
from litestar import Litestar
from litestar.datastructures import State
from litestar.di import Provide
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import ScalarRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme

from app.auth import PUBLIC_PATHS, ApiKeyAuthMiddleware
from app.config import Settings, get_settings
from app.db.embedded import resolve_database_url
from app.db.engine import make_engine, make_sessionmaker
from app.documents.endpoints import DocumentController
from app.exception_handlers import HANDLERS
from app.health import health, ready
from app.ingestion.fetch import Resolver, validate_url
from app.keys.endpoints import ApiKeyController
from app.knowledge.endpoints import AgentKnowledgeController, KnowledgeController
from app.http import provide_principal, provide_session

log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None,
    *,
    database_url: str | None = None,
    resolver: Resolver | None = None,
    http_transport: httpx.AsyncBaseTransport | None = None,
) -> Litestar:
    """Build the service.

    ``database_url`` overrides the settings (tests, CLI); ``resolver`` and
    ``http_transport`` replace DNS and the outbound HTTP transport (tests).
    """
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        state = app.state
        url = database_url or await asyncio.to_thread(
            resolve_database_url, settings.database_url, settings.db.embedded_dir
        )
        state.engine = make_engine(url, settings)
        state.sessionmaker = make_sessionmaker(state.engine)
        state.http = httpx.AsyncClient(transport=http_transport, timeout=settings.ingestion.fetch_timeout_s)
        try:
            yield
        finally:
            await state.http.aclose()
            await state.engine.dispose()

    state = State(
        {
            "settings": settings,
            "validate_url": partial(validate_url, resolver=resolver),
            "resolver": resolver,
            "wake_workers": lambda: None,
        }
    )
    return Litestar(
        route_handlers=[
            health,
            ready,
            KnowledgeController,
            DocumentController,
            AgentKnowledgeController,
            ApiKeyController,
        ],
        dependencies={
            "session": Provide(provide_session),
            "principal": Provide(provide_principal, sync_to_thread=False),
        },
        middleware=[
            DefineMiddleware(
                ApiKeyAuthMiddleware,
                exclude=[rf"^{p}$" for p in PUBLIC_PATHS] + [r"^/schema"],
            )
        ],
        exception_handlers=HANDLERS,
        lifespan=[lifespan],
        state=state,
        request_max_body_size=settings.limits.max_upload_bytes + 64 * 1024,
        openapi_config=OpenAPIConfig(
            title="Voice knowledge service",
            version="0.1.0",
            description=(
                "Knowledge bases for voice agents. Authenticate with `Authorization: Bearer <api key>`. "
                'Errors share one shape: `{"error": <code>, "detail": <sentence>, "fields"?: [...]}`.'
            ),
            path="/schema",
            render_plugins=[ScalarRenderPlugin(), SwaggerRenderPlugin(path="/swagger")],
            components=Components(
                security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer", bearer_format="API key")}
            ),
            security=[{"bearer": []}],
        ),
        debug=settings.debug,
    )


def app_factory() -> Litestar:
    """Entry point for ``uvicorn --factory app.main:app_factory``."""
    return create_app()


__all__: list[Any] = ["app_factory", "create_app"]
