"""What every console page uses: rendering with the common context, pagination, flash
messages, and errors rendered as pages (reading forms: forms.py)."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from litestar import Request, Response
from litestar.exceptions import HTTPException
from litestar.params import QueryParameter
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect, Template
from litestar.template import TemplateConfig

from app.console.security import SESSION_COOKIE, SignInRequired, console_session, removed_cookie
from app.exception_handlers import HANDLERS

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
SIGN_IN_PATH = "/console/sign-in"

# ?page=N on every paginated list (1-based).
PageNumber = Annotated[int, QueryParameter(ge=1, le=1_000_000, description="Page, from 1.")]

# Messages shown after a redirect, named by ``?done=<code>``. Codes, not text, in the URL:
# nothing a link can carry is ever shown as a message.
FLASHES: dict[str, str] = {
    "signed-out": "You are signed out.",
    "kb-created": "Knowledge base created.",
    "kb-updated": "Knowledge base saved.",
    "kb-deleted": "Knowledge base deleted.",
    "doc-added": "Document added: it is being processed.",
    "docs-added": "Documents added: they are being processed.",
    "doc-updated": "Document saved.",
    "doc-deleted": "Document deleted.",
    "doc-sync": "Re-sync queued: the page will be fetched again.",
    "agent-saved": "Agent settings saved.",
    "agent-kb-assigned": "Knowledge base assigned to the agent.",
    "agent-kb-unassigned": "Knowledge base taken from the agent.",
    "key-revoked": "Key revoked: it no longer works.",
}


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    """Autoescaping on for every template (a title ``<script>`` is shown as text), and an
    undefined name is an error rather than an empty string."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(env))


def is_htmx(request: Request[Any, Any, Any]) -> bool:
    return request.headers.get("hx-request") == "true"


def render(
    request: Request[Any, Any, Any],
    template: str,
    *,
    status_code: int = 200,
    headers: Mapping[str, str] | None = None,
    **context: Any,
) -> Template:
    """A page (or an htmx fragment) with what the base template needs: the session, its
    CSRF token, the current path, and the flash message the URL names."""
    session = console_session(request)
    done = request.query_params.get("done")
    base = {
        "console": session,
        "csrf_token": session.csrf_token if session else None,
        "path": request.url.path,
        "flash": FLASHES.get(done) if done else None,
        "htmx": is_htmx(request),
    }
    return Template(
        template_name=template,
        context={**base, **context},
        status_code=status_code,
        headers=dict(headers or {}),
    )


def redirect(path: str, *, done: str | None = None) -> Redirect:
    """303 See Other: after a POST the browser GETs the new page (reload does not resubmit)."""
    if done is not None:
        path = f"{path}{'&' if '?' in path else '?'}done={quote(done)}"
    return Redirect(path, status_code=303)


@dataclass(frozen=True, slots=True)
class Pager:
    page: int
    size: int
    total: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.size

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.size))

    @property
    def has_previous(self) -> bool:
        return self.page > 1

    @property
    def has_next(self) -> bool:
        return self.page < self.pages

    @property
    def first_item(self) -> int:
        return min(self.total, self.offset + 1)

    @property
    def last_item(self) -> int:
        return min(self.total, self.offset + self.size)


# -- errors as pages -----------------------------------------------------------------------


def _api_handler(exc: Exception) -> Any:
    for cls in type(exc).__mro__:
        if cls in HANDLERS:
            return HANDLERS[cls]
    return HANDLERS[Exception]


def error_page(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """Every error on a console route, as a page: the status, words and headers are the
    ones the API's handlers give the same error (a 404 for another organisation's id,
    a 503 when the database is away, a logged 500), in HTML."""
    if isinstance(exc, SignInRequired):
        return sign_in_required(request)
    api_response = _api_handler(exc)(request, exc)
    content = api_response.content if isinstance(api_response.content, dict) else {}
    status = api_response.status_code
    detail = str(content.get("detail") or "")
    if isinstance(exc, HTTPException) and status == 404:
        detail = "There is no such page."
    return render(
        request,
        "error.html",
        status_code=status,
        headers={k: v for k, v in api_response.headers.items() if k.lower() != "content-type"},
        status=status,
        detail=detail,
    )


def sign_in_required(request: Request[Any, Any, Any]) -> Response[Any]:
    """To the sign-in page, coming back here after (for a page fetched normally); htmx is
    told to load the sign-in page in full rather than swap it into a fragment."""
    target = SIGN_IN_PATH
    if request.method == "GET" and request.url.path != "/console":
        target += "?next=" + quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
    if is_htmx(request):
        response: Response[Any] = Response(content="", status_code=401, headers={"HX-Redirect": target})
    else:
        response = Redirect(target, status_code=303)
    if request.cookies.get(SESSION_COOKIE):
        response.set_cookie(removed_cookie(SESSION_COOKIE))
    return response


# Every type the API's handlers know, so none of theirs is closer to an error than this one.
CONSOLE_HANDLERS: dict[type[Exception] | int, Any] = {
    **dict.fromkeys(HANDLERS, error_page),
    SignInRequired: error_page,
}
