"""Agent pages: the organisation's agents with their knowledge bases; per agent, its KBs
(assign, unassign), its settings (prompt variant, escalation) and its tool declaration in
every format the API gives."""

from __future__ import annotations

import json
import uuid
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Template
from pydantic import ValidationError

from app.agents.schemas import AgentSettingsRead, AgentSettingsUpdate
from app.agents.service import AgentService
from app.console.forms import (
    FieldErrors,
    app_error_fields,
    form_text,
    form_values,
    parse_uuid,
    validation_errors,
)
from app.console.web import PageNumber, Pager, redirect, render
from app.errors import ValidationFailed
from app.knowledge.schemas import KnowledgeBaseRead
from app.knowledge.service import KnowledgeService
from app.query.tool_declaration import ToolFormat
from app.query.tool_service import ToolService

PAGE_SIZE = 25
# The KBs offered for assignment: an organisation with more picks by id on the KB's page.
KB_CHOICES = 200
TOOL_FORMATS: tuple[ToolFormat, ...] = ("openai-realtime", "openai-chat", "gemini")
ON_NOT_FOUND = [
    ("say", "Say the not-found line"),
    ("transfer", "Transfer the caller to a human"),
]


class AgentPages(Controller):
    path = "/agents"

    @get("/", summary="Agents")
    async def list_page(
        self,
        request: Request[Any, Any, Any],
        agent_service: NamedDependency[AgentService],
        page: PageNumber = 1,
    ) -> Template:
        agents, total = await agent_service.page(limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
        pager = Pager(page=page, size=PAGE_SIZE, total=total)
        return render(request, "agents/list.html", agents=agents, pager=pager)

    @get("/new", summary="The form for a new agent")
    async def new_page(
        self, request: Request[Any, Any, Any], knowledge_service: NamedDependency[KnowledgeService]
    ) -> Template:
        options = _options(await _kb_choices(knowledge_service))
        return render(
            request, "agents/new.html", kb_options=options, values={"agent_id": "", "kb_id": ""}, errors={}
        )

    @post("/", summary="Make an agent known by assigning it a knowledge base")
    async def create(
        self,
        request: Request[Any, Any, Any],
        agent_service: NamedDependency[AgentService],
        knowledge_service: NamedDependency[KnowledgeService],
    ) -> Response[Any]:
        form = await request.form()
        values = {"agent_id": form_text(form, "agent_id").strip(), "kb_id": form_text(form, "kb_id")}
        errors: FieldErrors = {}
        agent_id = parse_uuid(values["agent_id"], "agent_id", errors, "Enter the agent's id (a UUID).")
        kb_id = parse_uuid(values["kb_id"], "kb_id", errors, "Choose a knowledge base.")
        if agent_id is None or kb_id is None:
            options = _options(await _kb_choices(knowledge_service))
            return render(
                request, "agents/new.html", status_code=422, kb_options=options, values=values, errors=errors
            )
        await agent_service.assign(agent_id, kb_id)
        return redirect(f"/console/agents/{agent_id}", done="agent-kb-assigned")

    @get("/{agent_id:str}", summary="An agent: its knowledge bases, settings and tool declaration")
    async def detail_page(
        self,
        request: Request[Any, Any, Any],
        agent_id: FromPath[uuid.UUID],
        agent_service: NamedDependency[AgentService],
        knowledge_service: NamedDependency[KnowledgeService],
        tool_service: NamedDependency[ToolService],
    ) -> Template:
        settings = await agent_service.get(agent_id)  # 404 for an agent unknown here
        values = {
            "prompt_variant": settings.prompt_variant or "",
            "on_not_found": settings.escalation.on_not_found,
            "topics": "\n".join(settings.escalation.topics),
        }
        return await _detail(
            request,
            agent_id,
            settings,
            agent_service,
            knowledge_service,
            tool_service,
            values=values,
            errors={},
        )

    @post("/{agent_id:str}/settings", summary="Save the agent's prompt variant and escalation policy")
    async def save_settings(
        self,
        request: Request[Any, Any, Any],
        agent_id: FromPath[uuid.UUID],
        agent_service: NamedDependency[AgentService],
        knowledge_service: NamedDependency[KnowledgeService],
        tool_service: NamedDependency[ToolService],
    ) -> Response[Any]:
        settings = await agent_service.get(agent_id)  # 404 for an agent unknown here
        form = await request.form()
        values = form_values(form, ("prompt_variant", "on_not_found", "topics"))
        topics = [line.strip() for line in values["topics"].splitlines() if line.strip()]
        try:
            data = AgentSettingsUpdate.model_validate(
                {
                    "prompt_variant": values["prompt_variant"] or None,
                    "escalation": {"on_not_found": values["on_not_found"], "topics": topics},
                }
            )
            await agent_service.update(agent_id, data)
        except ValidationError as exc:
            errors = _settings_errors(exc)
        except ValidationFailed as exc:  # a variant removed from prompts/ since the page was drawn
            errors = app_error_fields(exc)
        else:
            return redirect(f"/console/agents/{agent_id}", done="agent-saved")
        # A refused save changed nothing: the settings read above still hold.
        return await _detail(
            request,
            agent_id,
            settings,
            agent_service,
            knowledge_service,
            tool_service,
            values=values,
            errors=errors,
        )

    @post("/{agent_id:str}/kbs", summary="Assign a knowledge base to the agent")
    async def assign(
        self,
        request: Request[Any, Any, Any],
        agent_id: FromPath[uuid.UUID],
        agent_service: NamedDependency[AgentService],
    ) -> Response[Any]:
        await agent_service.get(agent_id)
        form = await request.form()
        errors: FieldErrors = {}
        kb_id = parse_uuid(form_text(form, "kb_id"), "kb_id", errors, "Choose a knowledge base.")
        if kb_id is None:
            # The page's list always sends one: only a hand-made request gets here.
            raise ValidationFailed(
                "choose a knowledge base to assign", extra=[{"field": "kb_id", "message": errors["kb_id"]}]
            )
        await agent_service.assign(agent_id, kb_id)
        return redirect(f"/console/agents/{agent_id}", done="agent-kb-assigned")

    @post("/{agent_id:str}/kbs/{kb_id:str}/unassign", summary="Take a knowledge base from the agent")
    async def unassign(
        self,
        agent_id: FromPath[uuid.UUID],
        kb_id: FromPath[uuid.UUID],
        agent_service: NamedDependency[AgentService],
    ) -> Response[Any]:
        await agent_service.unassign(agent_id, kb_id)
        return redirect(f"/console/agents/{agent_id}", done="agent-kb-unassigned")


async def _detail(
    request: Request[Any, Any, Any],
    agent_id: uuid.UUID,
    settings: AgentSettingsRead,
    agent_service: AgentService,
    knowledge_service: KnowledgeService,
    tool_service: ToolService,
    *,
    values: dict[str, str],
    errors: FieldErrors,
) -> Template:
    assigned = await knowledge_service.for_agent(agent_id)
    held = {kb.id for kb in assigned}
    others = _options([kb for kb in await _kb_choices(knowledge_service) if kb.id not in held])
    tools = []
    for fmt in TOOL_FORMATS:
        tool = await tool_service.tool(agent_id, fmt)
        tools.append((fmt, tool, json.dumps(tool.tool, indent=2, ensure_ascii=False)))
    variants = [("", "The default")] + [(v, v) for v in agent_service.variants]
    if settings.prompt_variant is not None and settings.prompt_variant not in agent_service.variants:
        # Shown as it is stored, so that saving the other settings keeps it.
        variants.append((settings.prompt_variant, f"{settings.prompt_variant} (no longer in prompts/)"))
    return render(
        request,
        "agents/detail.html",
        status_code=422 if errors else 200,
        agent_id=agent_id,
        assigned=assigned,
        others=others,
        tools=tools,
        variants=variants,
        warnings=settings.warnings,
        on_not_found=ON_NOT_FOUND,
        values=values,
        errors=errors,
    )


async def _kb_choices(knowledge_service: KnowledgeService) -> list[KnowledgeBaseRead]:
    return (await knowledge_service.page(limit=KB_CHOICES, offset=0)).items


def _options(kbs: list[KnowledgeBaseRead]) -> list[tuple[str, str]]:
    return [(str(kb.id), kb.title) for kb in kbs]


def _settings_errors(exc: ValidationError) -> FieldErrors:
    """Errors of the nested escalation fields, named by the form's own fields."""
    errors: FieldErrors = {}
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        named = [field for field in ("topics", "on_not_found") if field in loc]
        name = named[0] if named else loc[0] if loc else "form"
        errors.setdefault(name, err["msg"])
    return errors or validation_errors(exc)
