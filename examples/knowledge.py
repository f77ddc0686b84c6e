"""What every runtime needs from the service: the tool declaration once per call set-up, and
one query_knowledge request per function call that always ends in words the voice model
can say, whatever went wrong on the way."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger(__name__)

TOOL_NAME = "query_knowledge"

# The service answers within QUERY__DEADLINE_S (2.5 s by default), with a spoken apology of
# its own when its providers are slow, so the runtime's timeout only has to cover the
# network and a busy server on top. Past it the runtime stops waiting and speaks FALLBACK.
DEADLINE_S = 2.5
TIMEOUT_S = DEADLINE_S + 1.0

# The words of the service's own `unavailable` reply (prompts/default/reply.unavailable.md),
# so a caller hears the same apology whether the service or the network failed.
FALLBACK_REPLY: dict[str, Any] = {
    "answer": "I'm sorry, I can't look that up right now. Please try again in a moment.",
    "status": "unavailable",
}


def spoken_output(reply: Mapping[str, Any]) -> str:
    """What goes back to the voice model as the function's output: the reply's `answer`.

    Every status (answered, not_found, unavailable) carries a speakable `answer`. The rest of
    the reply (status, confidence, sources, ids, timings) is for the runtime and its logs:
    handed to the model it costs context on every turn and invites it to read ids or
    numbers aloud, or to hedge on a confidence figure.
    """
    return str(reply["answer"])


def query_argument(arguments: str | Mapping[str, Any] | None) -> str:
    """The `query` the model passed, from a JSON string (OpenAI) or an object (Gemini,
    Pipecat, LiveKit); "" when it passed none, which the service answers with 422 and the
    runtime with FALLBACK."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return ""
    if not isinstance(arguments, Mapping):
        return ""
    query = arguments.get("query")
    return query if isinstance(query, str) else ""


def history_argument(arguments: str | Mapping[str, Any] | None) -> list[dict[str, str]] | None:
    """The `history` the model passed (the call's earlier turns), or None when it passed
    none or something else: then the question is asked alone rather than refused."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    history = arguments.get("history") if isinstance(arguments, Mapping) else None
    if not isinstance(history, list) or not all(isinstance(turn, dict) for turn in history):
        return None
    return history


@dataclass(frozen=True, slots=True)
class KnowledgeService:
    """The service as one agent's runtime sees it, with a `query` key (never an admin key)."""

    base_url: str
    agent_id: str
    query_key: str

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.query_key}"}

    async def tool(self, client: httpx.AsyncClient, fmt: str) -> dict[str, Any]:
        """GET /api/agents/{id}/tool: the declaration, instructions and `available`, read once
        when the call is set up. An error here is a configuration error and is raised."""
        r = await client.get(
            f"{self.base_url}/api/agents/{self.agent_id}/tool",
            params={"format": fmt},
            headers=self._headers(),
            timeout=TIMEOUT_S,
        )
        r.raise_for_status()
        body: dict[str, Any] = r.json()
        return body

    async def ask(
        self,
        client: httpx.AsyncClient,
        query: str,
        call_id: str | None = None,
        history: list[dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        """POST /api/agents/{id}/query_knowledge, the platform's call id as X-Request-ID (the
        service puts it on every log line of the request), with the model's `history` when
        it passed one (docs/INTEGRATION.md, "Conversation context"). Any failure (timeout, network,
        an error status) gives FALLBACK_REPLY: the model must get an output for every call,
        or it waits on it in silence."""
        headers = self._headers()
        if call_id:
            headers["X-Request-ID"] = call_id
        try:
            r = await client.post(
                f"{self.base_url}/api/agents/{self.agent_id}/query_knowledge",
                json={"query": query, "history": history} if history else {"query": query},
                headers=headers,
                timeout=TIMEOUT_S,
            )
        except httpx.HTTPError as exc:
            log.warning("query_knowledge %s failed: %r", call_id, exc)
            return dict(FALLBACK_REPLY)
        if r.status_code != httpx.codes.OK:
            # 401/403/404 are configuration errors (wrong key, role or agent), 422 a query the
            # model left empty, 429/503 a service that asks to wait: none can be fixed within
            # the caller's turn.
            log.warning("query_knowledge %s answered %s: %s", call_id, r.status_code, r.text[:200])
            return dict(FALLBACK_REPLY)
        reply: dict[str, Any] = r.json()
        return reply

    async def ask_speaking(
        self,
        client: httpx.AsyncClient,
        query: str,
        say: Callable[[str], Awaitable[None]],
        call_id: str | None = None,
    ) -> dict[str, Any]:
        """POST /api/agents/{id}/query_knowledge/stream (docs/INTEGRATION.md, "Early speech"):
        ``say`` is awaited with the holding phrase when the service sends one and with each
        sentence as soon as it is ready; returns the whole reply of the `done` event. A
        failure before the first sentence says and returns FALLBACK_REPLY; one after it
        returns FALLBACK_REPLY with what was said as its answer (nothing is said twice)."""
        headers = self._headers()
        if call_id:
            headers["X-Request-ID"] = call_id
        said: list[str] = []
        url = f"{self.base_url}/api/agents/{self.agent_id}/query_knowledge/stream"
        try:
            async with client.stream(
                "POST", url, json={"query": query}, headers=headers, timeout=TIMEOUT_S
            ) as r:
                if r.status_code != httpx.codes.OK:
                    await r.aread()
                    raise httpx.HTTPStatusError(
                        f"answered {r.status_code}: {r.text[:200]}", request=r.request, response=r
                    )
                event = ""
                async for line in r.aiter_lines():
                    if line.startswith("event: "):
                        event = line.removeprefix("event: ")
                    elif line.startswith("data: "):
                        data = json.loads(line.removeprefix("data: "))
                        if event == "done":
                            reply: dict[str, Any] = data
                            return reply
                        if event == "sentence":
                            said.append(data["text"])
                        await say(data["text"])  # holding or sentence
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("query_knowledge/stream %s failed: %r", call_id, exc)
        else:
            log.warning("query_knowledge/stream %s ended without a reply", call_id)
        if said:
            return {**FALLBACK_REPLY, "answer": "".join(said)}
        await say(FALLBACK_REPLY["answer"])
        return dict(FALLBACK_REPLY)


def joined_instructions(own: str, tool_reply: Mapping[str, Any]) -> str:
    """The runtime's own instructions, followed by the agent instructions when the tool can
    answer; without the tool they would tell the model to call a tool it does not have."""
    parts = [own.strip()]
    if tool_reply["available"]:
        parts.append(str(tool_reply["instructions"]).strip())
    return "\n\n".join(p for p in parts if p)


def check_format(tool_reply: Mapping[str, Any], expected: str) -> None:
    if tool_reply.get("format") != expected:
        raise ValueError(f"expected a declaration in format {expected!r}, got {tool_reply.get('format')!r}")
