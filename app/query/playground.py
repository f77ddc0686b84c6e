"""The playground: a question answered as query_knowledge would answer it, for prompt
engineers, with everything that went into the answer laid out, and nothing logged or cached.

It is QueryService's own path (``QueryService.dry_run``), not a copy of it: what differs
is that the reply is never logged nor cached, and that every candidate of both retrievers
is listed afterwards, outside the call's timings.
"""

from __future__ import annotations

import uuid
from typing import Any

from app.errors import ValidationFailed
from app.query.conversation import Turn
from app.query.retrieval import Candidate
from app.query.schemas import FusedHit, PlaygroundRequest, PlaygroundResponse, PlaygroundRun, RetrieverHit
from app.query.service import DryRunResult, QueryService


def check_variant(variant: str | None, variants: list[str], field: str = "variant") -> None:
    """422 for a prompt variant the library does not hold."""
    if variant is not None and variant not in variants:
        raise ValidationFailed(
            f"unknown prompt variant '{variant}'",
            extra=[{"field": field, "message": f"one of: {', '.join(variants)}"}],
        )


_REPLY_FIELDS = ("answer", "status", "confidence", "action", "transfer_reason", "degraded", "sources")


class PlaygroundService:
    def __init__(self, query_service: QueryService, org_id: uuid.UUID) -> None:
        self.query_service = query_service
        self.org_id = org_id

    async def run(self, agent_id: uuid.UUID, request: PlaygroundRequest) -> PlaygroundResponse:
        """Answer with ``request.variant`` (the agent's own when absent), then with
        ``compare_variant`` when one is given. NotFound for another organisation's agent."""
        variants = self.query_service.prompts.variants
        check_variant(request.variant, variants)
        check_variant(request.compare_variant, variants, "compare_variant")
        runs = [request.variant]
        if request.compare_variant is not None:
            runs.append(request.compare_variant)
        results = []
        # One after the other: side by side they would share the database and the model's
        # rate limit, and each one's timings would be the other's too.
        for variant in runs:
            result = await self.query_service.dry_run(
                org_id=self.org_id,
                agent_id=agent_id,
                question=request.query,
                history=[Turn(t.role, t.content) for t in request.history or ()],
                variant=variant,
                skip_model=request.skip_model,
            )
            results.append(playground_run(result))
        return PlaygroundResponse(query=request.query, skip_model=request.skip_model, runs=results)


def playground_run(result: DryRunResult) -> PlaygroundRun:
    reply = result.response
    debug = reply.debug or {}
    return PlaygroundRun.model_validate(
        {
            "variant": result.variant,
            "prompt_version": result.prompt_version,
            **{k: getattr(reply, k) for k in _REPLY_FIELDS},
            # A model that failed was called, but the reply was read from the chunks.
            "answered_by": result.model
            if result.model and result.model_called and not debug.get("llm_error")
            else "extractive",
            "model": result.model,
            "model_called": result.model_called,
            "model_error": debug.get("llm_error"),
            "tokens": debug.get("tokens"),
            "plan": debug.get("plan"),
            "embedded": debug.get("embedded"),
            "confidence_parts": debug.get("confidence"),
            "bm25": _hits(result.candidates, "text"),
            "vector": _hits(result.candidates, "vector"),
            "fused": [_fused(rank, c) for rank, c in enumerate(result.fused, 1)],
            "messages": result.messages,
            "escalation": debug.get("escalation"),
            "context": debug.get("context"),
            "timings_ms": reply.timings_ms,
        }
    )


def _hits(candidates: list[Candidate], side: str) -> list[RetrieverHit]:
    ranked = [
        (rank, c)
        for c in candidates
        if (rank := c.text_rank if side == "text" else c.vector_rank) is not None
    ]
    ranked.sort(key=lambda item: item[0])
    return [
        RetrieverHit.model_validate(
            {
                **_chunk(c),
                "rank": rank,
                "score": (c.text_score if side == "text" else c.similarity) or 0.0,
                "fused_score": round(c.score, 5),
            }
        )
        for rank, c in ranked
    ]


def _fused(rank: int, c: Candidate) -> FusedHit:
    return FusedHit.model_validate(
        {
            **_chunk(c),
            "rank": rank,
            "score": round(c.score, 5),
            "text_rank": c.text_rank,
            "vector_rank": c.vector_rank,
        }
    )


def _chunk(c: Candidate) -> dict[str, Any]:
    return {
        "chunk_id": c.chunk_id,
        "document_id": c.document_id,
        "title": c.title,
        "section": c.section,
        "page": c.page,
        "text": c.text,
    }
