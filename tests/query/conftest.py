"""Fixtures for the query path: an agent with an indexed knowledge base, offline or with
a respx-mocked OpenAI answering model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient
from pydantic import SecretStr

from app.config import Settings
from app.main import create_app
from tests.conftest import fake_resolver
from tests.helpers import assign_new_agent, create_kb, create_text_doc

OPENAI_BASE = "https://api.openai.test/v1"

FAQ = """# Acme Dental

## Opening hours
The practice is open Monday to Friday from 9 am to 5 pm. On Saturdays we open from 10 am to 1 pm.

## Emergencies
For a dental emergency outside opening hours, call the emergency line and press 2.

## Payments
We accept cash, debit cards and credit cards. Payment is due at the end of each visit.

## Parking
Free parking is available behind the building, entrance on Elm Street.
"""


def llm_settings(settings: Settings, **query: Any) -> Settings:
    return settings.model_copy(
        update={
            "openai_api_key": SecretStr("sk-test"),
            "openai_base_url": OPENAI_BASE,
            # The answering model is mocked; embeddings stay offline so only chat is sent.
            "embedding": settings.embedding.model_copy(update={"provider": "lexical"}),
            "query": settings.query.model_copy(update=query),
        }
    )


def chat_reply(
    text: Any, *, prompt_tokens: int = 120, completion_tokens: int = 12, finish_reason: str = "stop"
) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": 132,
            },
        },
    )


def sent_json(route: Any, index: int = -1) -> dict[str, Any]:
    return json.loads(route.calls[index].request.content)


@pytest.fixture
async def faq_agent(client, org, drain_queue) -> dict[str, Any]:
    """An agent assigned one KB holding the FAQ, indexed offline."""
    kb = await create_kb(client, org.headers, "Dental FAQ", description="Practice information")
    doc = await create_text_doc(
        client, org.headers, kb["id"], title="Practice FAQ", content=FAQ, content_type="markdown"
    )
    agent = await assign_new_agent(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": 1}
    return {"agent": agent, "kb": kb, "doc": doc}


@pytest.fixture
async def llm_client(database_url, settings) -> AsyncIterator[tuple[AsyncTestClient, Any]]:
    app = create_app(
        llm_settings(settings), database_url=database_url, resolver=fake_resolver, run_workers=False
    )
    async with AsyncTestClient(app=app) as client:
        yield client, app
