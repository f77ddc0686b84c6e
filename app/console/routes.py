"""The console's routes, as create_app mounts them: ``/`` to the console, the guarded
``/console`` router with every page controller, and the static files."""

from __future__ import annotations

from typing import Any

from litestar import Request, Router, get
from litestar.di import Provide
from litestar.response import Redirect
from litestar.static_files import create_static_files_router
from litestar.types import ControllerRouterHandler

from app.agents.endpoints import provide_agent_service
from app.console.agent_pages import AgentPages
from app.console.auth_pages import SignInController
from app.console.document_pages import DocumentPages
from app.console.key_pages import KeyPages
from app.console.knowledge_pages import KnowledgePages
from app.console.log_pages import LogPages
from app.console.playground_pages import PlaygroundPages
from app.console.repository import ConsoleSession
from app.console.security import PREFIX, console_guard, console_session
from app.console.web import CONSOLE_HANDLERS, STATIC
from app.documents.endpoints import provide_document_service
from app.keys.endpoints import provide_api_key_service
from app.knowledge.endpoints import provide_knowledge_service
from app.query.endpoints import provide_playground_service, provide_query_log_service, provide_tool_service

# Page controllers: one module per feature, added here.
PAGES: list[ControllerRouterHandler] = [
    SignInController,
    KnowledgePages,
    DocumentPages,
    AgentPages,
    KeyPages,
    LogPages,
    PlaygroundPages,
]


def provide_console(request: Request[Any, Any, Any]) -> ConsoleSession:
    """The signed-in session (organisation, key, CSRF token), as console_guard found it."""
    session = console_session(request)
    assert session is not None, "a public console route asked for the session"
    return session


@get("/", include_in_schema=False)
async def root() -> Redirect:
    return Redirect(PREFIX, status_code=303)


def console_routes() -> list[ControllerRouterHandler]:
    return [
        root,
        Router(
            path=PREFIX,
            route_handlers=PAGES,
            guards=[console_guard],
            exception_handlers=CONSOLE_HANDLERS,
            include_in_schema=False,
            # The API's own providers: the same services, scoped by the session's Principal.
            dependencies={
                "console": Provide(provide_console, sync_to_thread=False),
                "knowledge_service": Provide(provide_knowledge_service, sync_to_thread=False),
                "document_service": Provide(provide_document_service, sync_to_thread=False),
                "agent_service": Provide(provide_agent_service, sync_to_thread=False),
                "api_key_service": Provide(provide_api_key_service, sync_to_thread=False),
                "tool_service": Provide(provide_tool_service, sync_to_thread=False),
                "query_log_service": Provide(provide_query_log_service, sync_to_thread=False),
                "playground_service": Provide(provide_playground_service, sync_to_thread=False),
            },
        ),
        create_static_files_router(
            path=f"{PREFIX}/static", directories=[STATIC], include_in_schema=False, name="console_static"
        ),
    ]
