"""Knowledge base pages: list, create, edit, delete (with a confirmation step)."""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath
from litestar.response import Template

from app.console.forms import FieldErrors, app_error_fields, form_int, form_values, validated
from app.console.web import PageNumber, Pager, redirect, render
from app.errors import ValidationFailed
from app.knowledge.schemas import (
    BUILT_IN_LANGUAGES,
    KnowledgeBaseCreate,
    KnowledgeBaseRead,
    KnowledgeBaseUpdate,
)
from app.knowledge.service import KnowledgeService

PAGE_SIZE = 25
LANGUAGES = [(name, name.capitalize()) for name in BUILT_IN_LANGUAGES]


async def provide_kb(
    kb_id: FromPath[uuid.UUID], knowledge_service: NamedDependency[KnowledgeService]
) -> KnowledgeBaseRead:
    """The knowledge base a page under ``/knowledge/{kb_id}`` is about (these pages and the
    document pages): a 404 page for an id this organisation does not have, before anything
    else is read."""
    # The one dependency that reads the database: Litestar resolves the dependencies a
    # handler needs at the same level concurrently, and two reading one session at once
    # would fail. That is why the handlers read the document themselves.
    return await knowledge_service.read(kb_id)


class KnowledgePages(Controller):
    path = "/knowledge"
    dependencies = {"kb": Provide(provide_kb)}

    @get("/", summary="Knowledge bases")
    async def list_page(
        self,
        request: Request[Any, Any, Any],
        knowledge_service: NamedDependency[KnowledgeService],
        page: PageNumber = 1,
    ) -> Template:
        found = await knowledge_service.page(limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
        pager = Pager(page=page, size=PAGE_SIZE, total=found.total)
        return render(request, "knowledge/list.html", kbs=found.items, pager=pager)

    @get("/new", summary="The form for a new knowledge base")
    async def new_page(self, request: Request[Any, Any, Any]) -> Template:
        return _form(request, values={"language": "english"}, errors={})

    @post("/", summary="Create a knowledge base")
    async def create(
        self, request: Request[Any, Any, Any], knowledge_service: NamedDependency[KnowledgeService]
    ) -> Response[Any]:
        form = await request.form()
        values = form_values(form, _CREATE_FIELDS)
        errors: FieldErrors = {}
        data: dict[str, Any] = {
            "title": values["title"],
            "description": values["description"],
            "language": values["language"] or "english",
            "chunk_tokens": form_int(form, "chunk_tokens", errors),
            "chunk_overlap_tokens": form_int(form, "chunk_overlap_tokens", errors),
        }
        create, errors = validated(
            KnowledgeBaseCreate, {k: v for k, v in data.items() if v is not None}, errors
        )
        if create is None or errors:
            return _form(request, values=values, errors=errors)
        try:
            kb = await knowledge_service.create(create)
        except ValidationFailed as exc:
            return _form(request, values=values, errors=app_error_fields(exc))
        return redirect(f"/console/knowledge/{kb.id}", done="kb-created")

    @get("/{kb_id:str}/edit", summary="The form to edit a knowledge base")
    async def edit_page(
        self, request: Request[Any, Any, Any], kb: NamedDependency[KnowledgeBaseRead]
    ) -> Template:
        values = {"title": kb.title, "description": kb.description}
        return render(request, "knowledge/edit.html", kb=kb, values=values, errors={})

    @post("/{kb_id:str}/edit", summary="Save a knowledge base's title and description")
    async def update(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        kb: NamedDependency[KnowledgeBaseRead],
        knowledge_service: NamedDependency[KnowledgeService],
    ) -> Response[Any]:
        values = form_values(await request.form(), ("title", "description"))
        data, errors = validated(KnowledgeBaseUpdate, values)
        if data is None:
            return render(
                request, "knowledge/edit.html", status_code=422, kb=kb, values=values, errors=errors
            )
        await knowledge_service.update(kb_id, data)
        return redirect(f"/console/knowledge/{kb_id}", done="kb-updated")

    @get("/{kb_id:str}/delete", summary="Confirm deleting a knowledge base")
    async def delete_page(
        self, request: Request[Any, Any, Any], kb: NamedDependency[KnowledgeBaseRead]
    ) -> Template:
        return render(request, "knowledge/delete.html", kb=kb)

    @post("/{kb_id:str}/delete", summary="Delete a knowledge base, its documents and chunks")
    async def delete(
        self, kb_id: FromPath[uuid.UUID], knowledge_service: NamedDependency[KnowledgeService]
    ) -> Response[Any]:
        await knowledge_service.delete(kb_id)
        return redirect("/console/knowledge", done="kb-deleted")


_CREATE_FIELDS = ("title", "description", "language", "chunk_tokens", "chunk_overlap_tokens")


def _form(request: Request[Any, Any, Any], *, values: dict[str, str], errors: FieldErrors) -> Template:
    return render(
        request,
        "knowledge/new.html",
        status_code=422 if errors else 200,
        values={name: values.get(name, "") for name in _CREATE_FIELDS},
        errors=errors,
        languages=LANGUAGES,
        defaults=request.app.state.settings.ingestion,
    )
