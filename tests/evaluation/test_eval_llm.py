"""Token and cost accounting of the evaluation when the answering model is called
(respx-mocked OpenAI; embeddings stay offline)."""

import json

from litestar.testing import AsyncTestClient

from app.evaluation.commands import build_report, evaluate
from app.evaluation.service_client import ServiceClient
from app.ingestion.worker import drain
from app.main import create_app
from tests.conftest import fake_resolver, make_ingestor
from tests.evaluation.test_eval import QUESTIONS, load
from tests.query.conftest import OPENAI_BASE, chat_reply, llm_settings

CHAT = f"{OPENAI_BASE}/chat/completions"
# Two answerable questions reach the model; the Mona Lisa question ends at the confidence
# threshold before any model call.
ASKED = [q for q in QUESTIONS if q["id"] in {"hours", "members", "mona"}]


async def test_tokens_and_cost_come_from_the_models_usage(
    database_url, settings, org, engine, respx_mock, tmp_path
):
    route = respx_mock.post(CHAT).mock(
        return_value=chat_reply("Members pay 90% of the list price.", prompt_tokens=120, completion_tokens=12)
    )
    app = create_app(
        llm_settings(settings), database_url=database_url, resolver=fake_resolver, run_workers=False
    )
    questions, documents = load(tmp_path, ASKED)
    async with AsyncTestClient(app=app) as client:
        evaluation = await evaluate(
            ServiceClient(client, org.admin_key),
            questions,
            documents,
            wait=lambda: drain(make_ingestor(app, engine)),
        )
    document, _ = build_report({}, evaluation)
    metrics = document["metrics"]
    # Embedding tokens (cl100k_base, normalised questions): 7 + 12 + 7 = 26 over 3 calls.
    # Model: 1000 * (240 / 3 * 0.15 + 24 / 3 * 0.60) / 1e6 = 0.0168 USD per 1,000 calls;
    # embeddings: 1000 * (26 / 3) * 0.02 / 1e6 = 0.000173 USD.
    assert (route.call_count, metrics["tokens"], metrics["cost_per_1000_calls_usd"]) == (
        2,
        {
            "llm_calls": 2,
            "prompt_total": 240,
            "completion_total": 24,
            "embedding_total_estimated": 26,
            "prompt_per_call": 80.0,
            "completion_per_call": 8.0,
            "embedding_per_call_estimated": 8.67,
        },
        {"llm": 0.0168, "embedding": 0.000173, "total": 0.016973},
    )
    # One model call per answerable question, each asking that question of the default model.
    sent = [json.loads(call.request.content) for call in route.calls]
    assert [body["model"] for body in sent] == ["gpt-4o-mini"] * 2
    users = [next(m["content"] for m in body["messages"] if m["role"] == "user") for body in sent]
    asked = [q["question"] for q in ASKED]
    assert sorted([q for q in asked if q in user] for user in users) == [
        ["How much of the list price do members pay for a cleaning?"],
        ["When do you open on Saturdays?"],
    ]
