"""The query log and the knowledge gaps: per agent, filtered by status and time range,
paginated; each logged call has a page with its candidates, scores, timings and answer."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from litestar import Controller, Request, get
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter
from litestar.response import Template

from app.agents.service import AgentService
from app.console.forms import FieldErrors, parse_uuid
from app.console.web import PageNumber, Pager, render
from app.query.query_log import QueryLogService
from app.schemas import storable_instant

PAGE_SIZE = 50
# The agents offered in the filter (the agent's own page links here for any other).
AGENT_CHOICES = 200
STATUSES = [
    ("", "Any status"),
    ("answered", "answered"),
    ("not_found", "not found"),
    ("unavailable", "unavailable"),
]
CALLERS = [("", "All calls"), ("callers", "Callers' calls only"), ("evaluation", "Evaluation calls only")]
_EVALUATION = {"": None, "callers": False, "evaluation": True}

Text = Annotated[str, QueryParameter(max_length=100)]


@dataclass(frozen=True, slots=True)
class Filters:
    """The filter form's values as given, and what they mean once checked."""

    values: dict[str, str]
    errors: FieldErrors
    agent_id: uuid.UUID | None
    status: str | None
    evaluation: bool | None
    since: datetime | None
    until: datetime | None

    def url(self, path: str, page: int) -> str:
        """``path`` with these filters and ``page`` (pagination links keep the filters)."""
        query = {k: v for k, v in self.values.items() if v}
        return f"{path}?{urlencode({**query, 'page': page})}"


class LogPages(Controller):
    path = "/query-log"

    @get("/", summary="An agent's logged queries")
    async def list_page(
        self,
        request: Request[Any, Any, Any],
        agent_service: NamedDependency[AgentService],
        query_log_service: NamedDependency[QueryLogService],
        agent_id: Text = "",
        status: Text = "",
        calls: Text = "",
        since: Text = "",
        until: Text = "",
        page: PageNumber = 1,
    ) -> Template:
        filters = _filters(agent_id=agent_id, status=status, calls=calls, since=since, until=until)
        items: list[Any] = []
        pager = Pager(page=page, size=PAGE_SIZE, total=0)
        if filters.agent_id is not None and not filters.errors:
            found = await query_log_service.queries(
                filters.agent_id,
                status=filters.status,
                evaluation=filters.evaluation,
                since=filters.since,
                until=filters.until,
                limit=PAGE_SIZE,
                offset=(page - 1) * PAGE_SIZE,
            )
            items, pager = found.items, Pager(page=page, size=PAGE_SIZE, total=found.total)
        return render(
            request,
            "logs/list.html",
            status_code=422 if filters.errors else 200,
            filters=filters,
            items=items,
            pager=pager,
            agents=await agent_options(agent_service),
            statuses=STATUSES,
            calls=CALLERS,
        )

    @get("/gaps", summary="Knowledge gaps: questions not answered, or answered with low confidence")
    async def gaps_page(
        self,
        request: Request[Any, Any, Any],
        agent_service: NamedDependency[AgentService],
        query_log_service: NamedDependency[QueryLogService],
        agent_id: Text = "",
        since: Text = "",
        until: Text = "",
        page: PageNumber = 1,
    ) -> Template:
        filters = _filters(agent_id=agent_id, status="", calls="", since=since, until=until)
        gaps: list[Any] = []
        has_next = False
        if not filters.errors:
            # One more than a page: the listing has no total, and this says whether a next page exists.
            gaps = await query_log_service.gaps(
                agent_id=filters.agent_id,
                since=filters.since,
                until=filters.until,
                limit=PAGE_SIZE + 1,
                offset=(page - 1) * PAGE_SIZE,
            )
            has_next, gaps = len(gaps) > PAGE_SIZE, gaps[:PAGE_SIZE]
        return render(
            request,
            "logs/gaps.html",
            status_code=422 if filters.errors else 200,
            filters=filters,
            gaps=gaps,
            page=page,
            has_next=has_next,
            agents=await agent_options(agent_service),
        )

    @get("/{query_id:str}", summary="One logged query: its answer, candidates, scores and timings")
    async def detail_page(
        self,
        request: Request[Any, Any, Any],
        query_id: FromPath[uuid.UUID],
        query_log_service: NamedDependency[QueryLogService],
    ) -> Template:
        logged, chunks = await query_log_service.read(query_id)
        return render(request, "logs/detail.html", q=logged, chunks=chunks)


def _filters(*, agent_id: str, status: str, calls: str, since: str, until: str) -> Filters:
    values = {"agent_id": agent_id.strip(), "status": status, "calls": calls, "since": since, "until": until}
    errors: FieldErrors = {}
    agent = None
    if values["agent_id"]:
        agent = parse_uuid(values["agent_id"], "agent_id", errors, "Choose an agent.")
    if status not in {value for value, _ in STATUSES}:
        errors["status"] = "Choose a status from the list."
    if calls not in _EVALUATION:
        errors["calls"] = "Choose calls from the list."
    start, end = _instant(since, "since", errors), _instant(until, "until", errors)
    if start is not None and end is not None and end <= start:
        errors["until"] = "The end must be after the start."
    return Filters(
        values=values,
        errors=errors,
        agent_id=agent,
        status=status or None,
        evaluation=_EVALUATION.get(calls),
        since=start,
        until=end,
    )


def _instant(value: str, name: str, errors: FieldErrors) -> datetime | None:
    """A date and time as a browser's datetime-local field sends it (UTC is meant), or with
    its own zone."""
    value = value.strip()
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        errors[name] = "Enter a date and time, e.g. 2026-11-25T09:00."
        return None
    when = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    if not storable_instant(when):
        errors[name] = "Enter a date between the years 1 and 9999."
        return None
    return when


async def agent_options(agent_service: AgentService) -> list[tuple[str, str]]:
    agents, _ = await agent_service.page(limit=AGENT_CHOICES, offset=0)
    return [(str(a.agent_id), _agent_label(a.agent_id, [title for _, title in a.kbs])) for a in agents]


def _agent_label(agent_id: uuid.UUID, titles: list[str]) -> str:
    if not titles:
        return str(agent_id)
    more = ", …" if len(titles) > 3 else ""
    return f"{agent_id} ({', '.join(titles[:3])}{more})"
