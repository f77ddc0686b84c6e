"""The `sources` of a query_knowledge reply: the chunks an answer rests on, never padding."""

import uuid
from typing import Any

from sqlalchemy import text

from app.query.retrieval import Candidate
from app.query.service import answer_sources
from tests.helpers import assign_new_agent, create_kb, create_text_doc

DOCUMENTS = {
    "Opening hours": "We open Monday to Friday from 9 am to 5 pm. On Saturdays we open from 10 am to 1 pm.",
    "Emergencies": "Outside our opening hours, call the emergency line and press 2.",
    "Payments": "We accept cash, debit cards and credit cards.",
    "Parking": "Free parking is available behind the building.",
}


async def _agent(client, org, engine, drain_queue) -> tuple[str, dict[str, dict[str, Any]]]:
    """An agent over one KB of four one-chunk documents; each title's document id and chunk id."""
    kb = await create_kb(client, org.headers, "Practice")
    docs = {
        title: await create_text_doc(client, org.headers, kb["id"], title=title, content=content)
        for title, content in DOCUMENTS.items()
    }
    agent = await assign_new_agent(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": 4}
    async with engine.connect() as conn:
        rows = (await conn.execute(text("SELECT document_id, id FROM chunks"))).all()
    chunks = {r.document_id: r.id for r in rows}
    assert len(chunks) == 4
    return agent, {
        title: {"document_id": doc["id"], "chunk_id": chunks[uuid.UUID(doc["id"])]}
        for title, doc in docs.items()
    }


def _source(chunk: dict[str, Any], title: str, score: float) -> dict[str, Any]:
    return {**chunk, "title": title, "section": None, "page": None, "score": score}


async def _ask(client, org, agent, query, **params) -> dict[str, Any]:
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": query}, headers=org.headers, params=params
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_answered_reply_lists_the_chunks_it_rests_on(client, org, engine, drain_queue):
    """Offline (lexical embedder): BM25 finds the two chunks that hold the question's words,
    the vectors (no say with this embedder, score 0) the other two. The answer is read from
    the first; the second scores above half the best; the other two are left out, where the
    list used to be padded with them up to QUERY__TOP_K."""
    agent, chunks = await _agent(client, org, engine, drain_queue)
    body = await _ask(client, org, agent, "When do you open on Saturday?", debug="true")
    assert (body["status"], body["answer"]) == ("answered", "On Saturdays we open from 10 AM to 1 PM.")
    assert body["sources"] == [
        # BM25 ranks 1 and 2 at k = 60: 1/61 and 1/62.
        _source(chunks["Opening hours"], "Opening hours", 0.01639),
        _source(chunks["Emergencies"], "Emergencies", 0.01613),
    ]
    # debug still shows every candidate, the unscored ones included.
    candidates = [(c["chunk_id"], c["score"]) for c in body["debug"]["candidates"]]
    assert candidates[:2] == [
        (chunks["Opening hours"]["chunk_id"], 0.01639),
        (chunks["Emergencies"]["chunk_id"], 0.01613),
    ]
    assert set(candidates[2:]) == {
        (chunks["Payments"]["chunk_id"], 0.0),
        (chunks["Parking"]["chunk_id"], 0.0),
    }


async def test_not_found_reply_lists_no_sources(client, org, engine, drain_queue):
    """Candidates were considered (debug shows them) but none passed the gate: the reply
    rests on nothing, so it names nothing a runtime could attribute "I don't know" to."""
    agent, chunks = await _agent(client, org, engine, drain_queue)
    question = "Who won the football world cup in 1998?"
    body = await _ask(client, org, agent, question)
    assert (body["status"], body["sources"]) == ("not_found", [])
    debug = (await _ask(client, org, agent, question, debug="true"))["debug"]
    assert {c["chunk_id"] for c in debug["candidates"]} == {c["chunk_id"] for c in chunks.values()}


def _candidate(chunk_id: int, score: float) -> Candidate:
    return Candidate(
        chunk_id=chunk_id,
        document_id=uuid.UUID(int=chunk_id),
        title=f"Doc {chunk_id}",
        section=None,
        page=None,
        text="",
        vector_rank=None,
        text_rank=None,
        similarity=None,
        text_score=None,
        score=score,
    )


def test_sources_put_the_chunks_read_first_then_those_above_the_floor():
    # minilm's fusion (k = 4, vector weight 0.8): first in both lists 0.36, first in BM25
    # alone 0.2, second in BM25 alone 0.1667 (below half of 0.36), third in the vectors
    # alone 0.1143, found by neither list with a say 0.
    candidates = [_candidate(i, s) for i, s in enumerate([0.36, 0.2, 0.16667, 0.11429, 0.0], start=1)]
    assert [s["chunk_id"] for s in answer_sources(candidates)] == [1, 2]
    # The answer read the fourth and the first chunk (a runner-up sentence from the first).
    assert [s["chunk_id"] for s in answer_sources(candidates, (3, 0))] == [4, 1, 2]
    # A chunk read from is listed even with no score.
    assert [s["chunk_id"] for s in answer_sources(candidates, (4,))] == [5, 1, 2]
    assert answer_sources([]) == []


def test_unscored_candidates_are_sources_only_when_read_or_nothing_else_is():
    candidates = [_candidate(1, 0.0), _candidate(2, 0.0)]
    assert [s["chunk_id"] for s in answer_sources(candidates, (1,))] == [2]
    # A model's answer over unscored chunks (which one it drew on is not known) still rests
    # on something: the best candidate.
    assert [s["chunk_id"] for s in answer_sources(candidates)] == [1]
