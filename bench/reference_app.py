"""The reference a query_knowledge call's CPU is measured against: a minimal handler that does
the vector half of retrieval alone, as issue 18 measured one (FastAPI and asyncpg there; the
service's own framework and server here, so only the features differ).

Per call it embeds the question through the provider (the SDK's default client, as a minimal
app would) and runs exact vector search over the agent's knowledge bases in one statement.
No authentication, BM25, fusion, answer, cache, log, metrics or speech shaping. It answers
the service's route and reply shape, so ``python -m bench.query --reference`` drives both
alike: ``python -m bench.reference_app --port P`` with DATABASE_URL and OPENAI_BASE_URL set.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import asyncpg
import openai
import uvicorn
from litestar import Litestar, MediaType, get, post
from litestar.datastructures import State

SEARCH = """
SELECT c.text
FROM chunks c
WHERE c.kb_id IN (SELECT kb_id FROM agent_assignments WHERE agent_id = $1)
ORDER BY c.embedding <=> $2::float4[]::vector
LIMIT 5
"""


@post("/api/agents/{agent_id:str}/query_knowledge", status_code=200)
async def query_knowledge(agent_id: str, data: dict[str, Any], state: State) -> dict[str, Any]:
    embedded = await state.openai.embeddings.create(
        model="text-embedding-3-small", input=data["query"], dimensions=state.dims
    )
    async with state.pool.acquire() as conn:
        rows = await conn.fetch(SEARCH, agent_id, embedded.data[0].embedding)
    return {"status": "answered", "answer": rows[0]["text"] if rows else "", "cached": False}


@get("/ready")
async def ready() -> dict[str, str]:
    return {"status": "ready"}


@get("/metrics", media_type=MediaType.TEXT)
async def metrics() -> str:
    return ""  # what bench.query reads of the service's metrics: nothing here


def create_app(database_url: str, base_url: str, dims: int) -> Litestar:
    async def start(app: Litestar) -> None:
        app.state.pool = await asyncpg.create_pool(database_url, min_size=2, max_size=10)
        app.state.openai = openai.AsyncOpenAI(api_key="x", base_url=base_url, max_retries=0)
        app.state.dims = dims

    async def stop(app: Litestar) -> None:
        await app.state.openai.close()
        await app.state.pool.close()

    return Litestar([query_knowledge, ready, metrics], on_startup=[start], on_shutdown=[stop])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dims", type=int, default=512)
    args = parser.parse_args()
    app = create_app(os.environ["DATABASE_URL"], os.environ["OPENAI_BASE_URL"], args.dims)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
