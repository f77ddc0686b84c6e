"""The application: one explicit ``create_app()`` listing routes, dependencies, handlers
and the lifespan that owns every long-lived client."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from litestar import Litestar
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins.prometheus import PrometheusConfig

from app.agents.endpoints import AgentSettingsController
from app.answering.llm import ChatAnswerer
from app.api_docs import LocalSwaggerUI
from app.auth import ApiKeyAuthMiddleware
from app.config import Settings, get_settings
from app.console.routes import console_routes
from app.console.security import send_console_headers
from app.console.web import template_config
from app.crawl.endpoints import CrawlController
from app.crawl.runner import start_crawls
from app.db.embedded import resolve_database_url
from app.db.engine import make_engine, make_sessionmaker
from app.documents.endpoints import DocumentController
from app.embeddings.factory import build_embedder
from app.exception_handlers import HANDLERS
from app.health import Readiness, health, ready
from app.http import (
    ApiRequest,
    check_request,
    provide_principal,
    provide_session,
    send_allowed_methods,
)
from app.ingestion.fetch import Fetcher, Resolver, validate_url
from app.ingestion.pipeline import Ingestor
from app.ingestion.worker import WorkerPool, worker_id
from app.keys.endpoints import ApiKeyController
from app.knowledge.endpoints import AgentKnowledgeController, KnowledgeController
from app.observability.http_metrics import StatusTrueMetrics
from app.observability.logging import configure_logging
from app.observability.metrics import MetricsController
from app.observability.middleware import request_id_middleware, send_request_id
from app.openai_client import make_openai_client
from app.openapi_docs import complete_openapi
from app.query.endpoints import KnowledgeGapController, QueryController
from app.query.indexes import maintain_vector_index, pgvector_version
from app.query.kb_vectors import KBVectorCache
from app.query.retrieval import Retriever, default_rrf_k, default_sentence_weight, default_vector_weight
from app.query.sentences import ChunkSentences, SentenceEncoder
from app.query.service import QueryService
from app.query.tool_service import load_prompts
from app.webhooks.dispatcher import WebhookDispatcher
from app.webhooks.endpoints import WebhookController

log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None,
    *,
    database_url: str | None = None,
    resolver: Resolver | None = None,
    run_workers: bool | None = None,
) -> Litestar:
    """Build the service.

    ``database_url`` overrides the settings (tests, CLI); ``resolver`` replaces DNS for
    fetched URLs (tests); ``run_workers`` overrides whether ingestion workers run in
    this process (default: only with ``INGESTION__ISOLATION=inline``; otherwise ``vk serve``
    runs them in a process of their own).
    """
    settings = settings or get_settings()
    # Paths are grouped by route template so ids do not explode the label space.
    prometheus = PrometheusConfig(
        app_name="voice-knowledge", prefix="vk_http", group_path=True, middleware_class=StatusTrueMetrics
    )
    # Loaded and checked once, before anything starts: a broken template stops the service.
    prompts = load_prompts(settings)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        state = app.state
        url = database_url
        if url is None:
            url = await asyncio.to_thread(
                resolve_database_url, settings.database_url, settings.db.embedded_dir
            )
        state.engine = make_engine(url, settings)
        state.sessionmaker = make_sessionmaker(state.engine)
        state.openai = make_openai_client(settings)
        state.embedder = build_embedder(settings, state.openai)
        state.fetcher = Fetcher(
            resolver=resolver,
            max_bytes=settings.ingestion.fetch_max_bytes,
            timeout_s=settings.ingestion.fetch_timeout_s,
            intranet=settings.ingestion.intranet,
        )
        state.ingestor = Ingestor(
            state.engine,
            state.embedder,
            state.fetcher,
            settings.ingestion,
            worker_id(),
            quota_tokens_per_day=settings.limits.embedding_tokens_per_day,
            storage_quota_bytes=settings.limits.org_storage_bytes,
        )
        state.readiness = Readiness(state.engine, state.openai)
        version = await pgvector_version(state.engine)
        index_task = asyncio.create_task(
            maintain_vector_index(
                state.engine,
                state.embedder.dimensions,
                min_chunks=settings.query.exact_search_max_chunks,
            )
        )
        state.query_service = QueryService(
            engine=state.engine,
            embedder=state.embedder,
            retriever=Retriever(
                dimensions=state.embedder.dimensions,
                pgvector_version=version,
                exact_max_chunks=settings.query.exact_search_max_chunks,
                rrf_k=default_rrf_k(settings.query.rrf_k, state.embedder.model_key),
                vector_weight=default_vector_weight(settings.query.vector_weight, state.embedder.model_key),
                sentences=ChunkSentences(state.embedder.model_key)
                if isinstance(state.embedder, SentenceEncoder)
                else None,
                sentence_weight=default_sentence_weight(
                    settings.query.sentence_weight, state.embedder.model_key
                ),
                candidates=settings.query.candidates,
                engine=state.engine,
                model_key=state.embedder.model_key,
                kb_vectors=KBVectorCache(
                    state.engine,
                    model_key=state.embedder.model_key,
                    budget_bytes=settings.query.vector_cache_mb * 1024 * 1024,
                ),
            ),
            prompts=prompts,
            llm=ChatAnswerer(state.openai) if state.openai is not None else None,
            settings=settings.query,
            embed_timeout_s=settings.embedding.query_timeout_s,
            prompt_fingerprint=prompts.fingerprint,
        )
        pool = crawls = None
        inline = settings.ingestion.workers > 0 and settings.ingestion.isolation == "inline"
        if run_workers if run_workers is not None else inline:
            pool = WorkerPool(
                state.ingestor,
                concurrency=max(1, settings.ingestion.workers),
                poll_interval_s=settings.ingestion.poll_interval_s,
            )
            await pool.start()
            state.wake_workers = pool.wake
            crawls = start_crawls(state.engine, settings, state.ingestor.owner, resolver=resolver)
            if crawls is not None:
                await crawls.start()
        dispatcher = None
        if pool is not None and settings.webhooks.concurrency > 0:
            dispatcher = WebhookDispatcher(
                state.engine,
                settings.webhooks,
                state.ingestor.owner,
                resolver=resolver,
                intranet=settings.ingestion.intranet,
            )
            await dispatcher.start()
        try:
            yield
        finally:
            index_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await index_task
            if dispatcher is not None:
                await dispatcher.stop()
            if crawls is not None:
                await crawls.stop()
            if pool is not None:
                await pool.stop()
            await state.query_service.close()
            await state.fetcher.aclose()
            if state.openai is not None:
                await state.openai.close()
            await state.engine.dispose()

    state = State(
        {
            "settings": settings,
            "prompts": prompts,
            "validate_url": partial(validate_url, resolver=resolver, intranet=settings.ingestion.intranet),
            "resolver": resolver,
            "wake_workers": lambda: None,
        }
    )
    app = Litestar(
        route_handlers=[
            health,
            ready,
            KnowledgeController,
            DocumentController,
            CrawlController,
            AgentKnowledgeController,
            ApiKeyController,
            QueryController,
            AgentSettingsController,
            KnowledgeGapController,
            WebhookController,
            MetricsController,
            *console_routes(),
        ],
        # Handlers are given what they use, never read app.state: here the session and the
        # caller; each controller declares its feature's service, which its provider builds
        # from these and from what create_app and the lifespan keep in app.state.
        dependencies={
            "session": Provide(provide_session),
            "principal": Provide(provide_principal, sync_to_thread=False),
        },
        middleware=[
            request_id_middleware,
            prometheus.middleware,
            ApiKeyAuthMiddleware(),
        ],
        exception_handlers=HANDLERS,
        # Body decoding failures (bad UTF-8, deep nesting, form limits) are 4xx, not 500s;
        # JSON routes refuse other media types (415) and a missing body (400), every route a
        # non-text query parameter sent as "null" (400).
        request_class=ApiRequest,
        before_request=check_request,
        # Every response, errors answered outside the route's middleware included.
        before_send=[send_request_id, send_allowed_methods, send_console_headers],
        lifespan=[lifespan],
        state=state,
        template_config=template_config(),
        request_max_body_size=settings.limits.max_upload_bytes + 64 * 1024,
        openapi_config=OpenAPIConfig(
            title="Voice knowledge service",
            version="0.1.0",
            description=(
                "Knowledge bases for voice agents. Authenticate with `Authorization: Bearer <api key>`. "
                'Errors share one shape: `{"error": <code>, "detail": <sentence>, "fields"?: [...]}`.'
            ),
            path="/schema",
            # Swagger UI at /schema (and /schema/swagger) from the service's own files.
            render_plugins=[LocalSwaggerUI(schema_path="/schema")],
            components=Components(
                security_schemes={
                    "bearer": SecurityScheme(type="http", scheme="bearer", bearer_format="API key")
                }
            ),
            security=[{"bearer": []}],
        ),
        debug=settings.debug,
        # Logging is configured once by the CLI (JSON lines with request ids); Litestar's
        # default configuration would replace it.
        logging_config=None,
    )
    complete_openapi(app)
    return app


def app_factory() -> Litestar:
    """Entry point for ``uvicorn --factory app.main:app_factory`` (and each ``vk serve --workers``
    process): settings from the environment, JSON logs as ``vk serve`` configures them. The
    server's own options (``KEEP_ALIVE_S`` among them) are ``vk serve``'s: uvicorn run by hand
    takes them as its flags (``--timeout-keep-alive 75``)."""
    configure_logging(get_settings().log_level)
    app = create_app()
    tune_gc()
    return app


def tune_gc() -> None:
    """For a server process, once its modules and app are built.

    Everything alive now (modules, classes, schemas, prompts: hundreds of thousands of
    objects) lives as long as the process, yet every full collection walked it again:
    collections took 7 % of a query_knowledge call's CPU (py-spy --native under load) and
    each full one is a pause heard by whichever calls are in flight. freeze() moves them out
    of the collector's sight; a larger first generation makes collections rarer (a call
    allocates a few thousand objects, nearly all freed by reference counting).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, 20, 20)


GC_GEN0_THRESHOLD = 20_000


__all__: list[Any] = ["app_factory", "create_app", "tune_gc"]
