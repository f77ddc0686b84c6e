"""API key pages: the list (never a secret), a new key (its secret shown on the one page
that answers its creation, never again), and revoking with a confirmation step."""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Template

from app.console.forms import FieldErrors, form_values, validated
from app.console.web import PageNumber, Pager, redirect, render
from app.errors import Conflict
from app.keys.schemas import ApiKeyCreate
from app.keys.service import ApiKeyService

PAGE_SIZE = 25
ROLES = [
    ("query", "query: may call query_knowledge and read tool declarations"),
    ("admin", "admin: everything"),
]


class KeyPages(Controller):
    path = "/keys"

    @get("/", summary="API keys")
    async def list_page(
        self,
        request: Request[Any, Any, Any],
        api_key_service: NamedDependency[ApiKeyService],
        page: PageNumber = 1,
    ) -> Template:
        found = await api_key_service.page(limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
        pager = Pager(page=page, size=PAGE_SIZE, total=found.total)
        return render(request, "keys/list.html", keys=found.items, pager=pager)

    @get("/new", summary="The form for a new API key")
    async def new_page(self, request: Request[Any, Any, Any]) -> Template:
        return _form(request, values={"name": "", "role": "query"}, errors={})

    @post("/", summary="Create an API key and show its secret, once")
    async def create(
        self, request: Request[Any, Any, Any], api_key_service: NamedDependency[ApiKeyService]
    ) -> Template:
        values = form_values(await request.form(), ("name", "role"))
        data, errors = validated(ApiKeyCreate, values)
        if data is None:
            return _form(request, values=values, errors=errors)
        created = await api_key_service.create(data)
        # Rendered, not redirected to: the secret is in this response only (no-store, as
        # every console page), so reloading or going back cannot show it again.
        return render(request, "keys/created.html", status_code=201, key=created)

    @get("/{key_id:str}/revoke", summary="Confirm revoking an API key")
    async def revoke_page(
        self,
        request: Request[Any, Any, Any],
        key_id: FromPath[uuid.UUID],
        api_key_service: NamedDependency[ApiKeyService],
    ) -> Template:
        key = await api_key_service.read(key_id)
        return render(request, "keys/revoke.html", key=key, error=None)

    @post("/{key_id:str}/revoke", summary="Revoke an API key; it stops working at once")
    async def revoke(
        self,
        request: Request[Any, Any, Any],
        key_id: FromPath[uuid.UUID],
        api_key_service: NamedDependency[ApiKeyService],
    ) -> Response[Any]:
        key = await api_key_service.read(key_id)
        try:
            await api_key_service.revoke(key_id)
        except Conflict as exc:  # the organisation's last admin key
            return render(request, "keys/revoke.html", status_code=409, key=key, error=exc.detail)
        return redirect("/console/keys", done="key-revoked")


def _form(request: Request[Any, Any, Any], *, values: dict[str, str], errors: FieldErrors) -> Template:
    status = 422 if errors else 200
    return render(request, "keys/new.html", status_code=status, values=values, errors=errors, roles=ROLES)
