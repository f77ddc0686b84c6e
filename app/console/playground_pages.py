"""The playground: ask an agent a question as a caller would, with a prompt variant (and a
second one side by side), and see everything that went into the answer. A dry run: nothing
is logged or cached (app/query/playground.py). htmx swaps the results into the page; without
JavaScript the form posts and the whole page comes back with them."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, get, post
from litestar.di import NamedDependency
from litestar.response import Template
from pydantic import ValidationError

from app.agents.service import AgentService
from app.console.forms import FieldErrors, app_error_fields, form_values, parse_uuid, validation_errors
from app.console.log_pages import Text, agent_options
from app.console.web import is_htmx, render
from app.errors import ValidationFailed
from app.query.playground import PlaygroundService
from app.query.schemas import PlaygroundRequest, PlaygroundResponse

_FIELDS = ("agent_id", "query", "history", "variant", "compare_variant", "skip_model")
_SPEAKERS = {"caller": "user", "agent": "assistant"}


class PlaygroundPages(Controller):
    path = "/playground"

    @get("/", summary="The playground")
    async def page(
        self,
        request: Request[Any, Any, Any],
        agent_service: NamedDependency[AgentService],
        playground_service: NamedDependency[PlaygroundService],
        agent_id: Text = "",
    ) -> Template:
        values = dict.fromkeys(_FIELDS, "") | {"agent_id": agent_id}
        return await _page(request, agent_service, playground_service, values=values, errors={}, result=None)

    @post("/", summary="Dry-run a question and show how it was answered")
    async def run(
        self,
        request: Request[Any, Any, Any],
        agent_service: NamedDependency[AgentService],
        playground_service: NamedDependency[PlaygroundService],
    ) -> Template:
        form = await request.form()
        values = form_values(form, _FIELDS)
        errors: FieldErrors = {}
        agent_id = parse_uuid(values["agent_id"], "agent_id", errors, "Choose an agent.")
        data: PlaygroundRequest | None = None
        history = _turns(values["history"], errors)
        try:
            data = PlaygroundRequest.model_validate(
                {
                    "query": values["query"],
                    "history": history,
                    "variant": values["variant"] or None,
                    "compare_variant": values["compare_variant"] or None,
                    "skip_model": bool(values["skip_model"]),
                }
            )
        except ValidationError as exc:
            errors.update(validation_errors(exc))
        result: PlaygroundResponse | None = None
        if agent_id is not None and data is not None and not errors:
            try:
                result = await playground_service.run(agent_id, data)
            except ValidationFailed as exc:  # a variant not in prompts/
                errors.update(app_error_fields(exc))
        if is_htmx(request):
            # htmx swaps only successful responses: the fragment carries its own errors.
            return render(request, "playground/_results.html", result=result, errors=errors)
        return await _page(
            request,
            agent_service,
            playground_service,
            values=values,
            errors=errors,
            result=result,
            status_code=422 if errors else 200,
        )


async def _page(
    request: Request[Any, Any, Any],
    agent_service: AgentService,
    playground_service: PlaygroundService,
    *,
    values: dict[str, str],
    errors: FieldErrors,
    result: PlaygroundResponse | None,
    status_code: int = 200,
) -> Template:
    variants = [(v, v) for v in playground_service.query_service.prompts.variants]
    return render(
        request,
        "playground/page.html",
        status_code=status_code,
        agents=await agent_options(agent_service),
        variants=[("", "The agent's own"), *variants],
        compare_variants=[("", "None"), *variants],
        values=values,
        errors=errors,
        result=result,
    )


def _turns(text: str, errors: FieldErrors) -> list[dict[str, str]] | None:
    """The earlier turns written one a line, each "Caller: ..." or "Agent: ..."."""
    turns = []
    for line in text.splitlines():
        speaker, colon, said = line.strip().partition(":")
        if not line.strip():
            continue
        role = _SPEAKERS.get(speaker.strip().lower()) if colon else None
        if role is None:
            errors["history"] = f"Start each line with “Caller:” or “Agent:” (not “{line.strip()[:40]}”)."
            return None
        turns.append({"role": role, "content": said.strip()})
    return turns or None
